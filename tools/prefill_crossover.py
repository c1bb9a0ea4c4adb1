"""Where dq_rs (sm_90a, weight decoded into wgmma registers) beats dq_gemm (decode + cuBLAS).

A measurement aid for the sm_90 selector (docs/perf/prefill_h200.md, "dq_rs"), like
tools/route_crossover.py: for each format, shape and T >= 65 it times one public
``linear()`` call under the cold timer of ``ninfer-bench`` (graph replay, 256 MiB flush)
once with a table that sends T >= 65 to dq_gemm and once with one that sends it to
dq_rs, and checks the two outputs against each other (both round each weight once to
BF16 and accumulate in FP32: they differ by FP32 summation order only, so a difference
above one BF16 step of the output's largest value is a defect and fails the run).

    python tools/prefill_crossover.py [--qtypes q4,w8] [--ts 128,1024] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import sys

from route_swap import (  # tools/ is the script's sys.path[0]
    bf16_steps,
    from_t,
    host_f32,
    parse_shapes,
    time_under,
)

from ninfer import QType
from ninfer.bench.env import environment
from ninfer.bench.fixture import random_activations, random_device_weight
from ninfer.bench.timer import ColdTimer

# The suites' distinct [N,K] (the seed's permanent surface included).
SHAPES = [
    (1152, 1152), (1152, 1536), (2048, 4096), (3456, 1152), (4304, 1152), (4608, 4608),
    (5120, 6144), (6144, 5120), (5120, 10240), (14336, 5120), (16384, 5120), (5120, 17408),
    (34816, 5120),
]  # fmt: skip
TS = [65, 128, 192, 256, 512, 1024, 2048]


def main() -> int:
    import cupy as cp

    ap = argparse.ArgumentParser()
    ap.add_argument("--qtypes", default=",".join(q.value for q in QType))
    ap.add_argument("--ts", default=",".join(map(str, TS)))
    ap.add_argument("--shapes", default="", help="NxK,... (default: the suites' shapes)")
    ap.add_argument("--json")
    ap.add_argument("--repeat", type=int, default=10)
    args = ap.parse_args()
    shapes = parse_shapes(args.shapes, SHAPES)
    tables = {name: from_t(name, 65) for name in ("dq_gemm", "dq_rs")}
    env = environment(0)
    timer = ColdTimer(3, args.repeat, 256, "graph")
    rows, bad = [], []
    print("qtype N K T dq_gemm_us dq_rs_us rs/gemm max_diff_steps")
    for q in (QType(s) for s in args.qtypes.split(",")):
        for n, k in shapes:
            w = random_device_weight(q, n, k, seed=7)
            for t in (int(v) for v in args.ts.split(",")):
                x = random_activations(t, k)
                us, outs = {}, {}
                for name, tab in tables.items():
                    out = cp.empty((t, n), dtype=x.dtype)
                    us[name] = time_under(tab, timer, x, w, out)
                    timer.stream.synchronize()
                    outs[name] = host_f32(out)
                diff = bf16_steps(outs["dq_gemm"], outs["dq_rs"])
                if diff > 1.0:
                    bad.append((q.value, n, k, t, diff))
                rows.append({"qtype": q.value, "n": n, "k": k, "t": t, **us, "diff_steps": diff})
                print(
                    f"{q.value:<5} {n} {k} {t:>4} {us['dq_gemm']:9.2f} {us['dq_rs']:9.2f} "
                    f"{us['dq_rs'] / us['dq_gemm']:5.2f} {diff:5.2f}",
                    flush=True,
                )
        if args.json:  # after each format: a run cut short keeps what it measured
            with open(args.json, "w") as f:
                json.dump({"environment": env, "rows": rows}, f, indent=1)
    for q_, n, k, t, d in bad:
        print(f"MISMATCH {q_} [{n},{k}] T={t}: {d:.2f} BF16 steps", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
