"""Where decode-then-GEMM (dq_gemm) overtakes dec_q: both routes timed at T = 17 ... 64.

A measurement aid for the selector (docs/perf/decode_h200.md, "Next"), not a benchmark:
for each shape and format it times one public ``linear()`` call under the same cold
timer as ``ninfer-bench`` (graph replay, 256 MiB flush) twice, once with a table that
sends T <= 64 to ``dec_q`` and once with one that sends T >= 17 to ``dq_gemm``
(the selector is private; this tool swaps ``ROUTE_TABLES`` as the tests do), and prints
one row per (format, shape, T) with the decoded-weight size, the key candidate.

    python tools/route_crossover.py [--qtypes q4,w8,bf16] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import sys

from route_swap import from_t, time_under  # tools/ is the script's sys.path[0]

from ninfer import QType
from ninfer.bench.env import environment
from ninfer.bench.fixture import random_activations, random_device_weight
from ninfer.bench.timer import ColdTimer

# The suites' distinct [N,K] below 256 MB plus the two issue-5 shapes.
SHAPES = [
    (1152, 1152), (1152, 1536), (2048, 4096), (3456, 1152), (4304, 1152), (4608, 4608),
    (5120, 6144), (6144, 5120), (5120, 10240), (14336, 5120), (5120, 17408), (34816, 5120),
]  # fmt: skip
TS = [17, 24, 32, 33, 40, 48, 64]


def main() -> int:
    import cupy as cp

    ap = argparse.ArgumentParser()
    ap.add_argument("--qtypes", default="q4,w8,bf16")
    ap.add_argument("--json")
    ap.add_argument("--repeat", type=int, default=20)
    args = ap.parse_args()
    # Both columns from tables of their own: the real sm_90 table already sends some of
    # these T to dq_gemm, and the dec_q column must be dec_q.
    late, early = from_t("dq_gemm", 65), from_t("dq_gemm", 17)
    env = environment(0)
    timer = ColdTimer(3, args.repeat, 256, "graph")
    rows = []
    print("qtype N K decoded_MB T dec_q_us dq_gemm_us dq/dec")
    for q in (QType(s) for s in args.qtypes.split(",")):
        for n, k in SHAPES:
            w = random_device_weight(q, n, k, seed=7)
            for t in TS:
                x = random_activations(t, k)
                out = cp.empty((t, n), dtype=x.dtype)
                us = {
                    name: time_under(tables, timer, x, w, out)
                    for name, tables in (("dec_q", late), ("dq_gemm", early))
                }
                decoded_mb = 2 * n * w.k_pad / 1e6
                rows.append(
                    {"qtype": q.value, "n": n, "k": k, "t": t, "decoded_MB": decoded_mb, **us}
                )
                print(
                    f"{q.value:<5} {n} {k} {decoded_mb:7.1f} {t:>3} {us['dec_q']:9.2f} "
                    f"{us['dq_gemm']:9.2f} {us['dq_gemm'] / us['dec_q']:5.2f}",
                    flush=True,
                )
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"environment": env, "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
