"""dq_rs's token tiles at any T, against the route the sm_90 table picks (docs/perf/prefill_h200.md).

For each format, shape and T the public ``linear()`` call is timed under the cold timer
of ``ninfer-bench`` (graph replay, 256 MiB flush) once under the real route table (the
reference: whatever route it picks, named in the output) and once per dq_rs token tile
(128 NB tokens, forced through NB_FORCE, with dq_rs serving every T). Every dq_rs
output is checked against the reference's: both round each weight once to BF16 and
accumulate in FP32, so a difference above one BF16 step of the output's largest value
is a defect and fails the run.

    python tools/dq_rs_tiles.py [--qtypes q4,bf16] [--shapes 14336x5120] [--ts 48,128]
        [--nbs 1,2] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import sys

from prefill_crossover import SHAPES  # tools/ is the script's sys.path[0]
from route_swap import bf16_steps, host_f32, parse_shapes, time_under

from ninfer import Policy, QType
from ninfer.bench.env import environment
from ninfer.bench.fixture import random_activations, random_device_weight
from ninfer.bench.timer import ColdTimer
from ninfer.routes import Problem, dq_rs, select, table
from ninfer.routes.table import Route


def main() -> int:
    import cupy as cp

    ap = argparse.ArgumentParser()
    ap.add_argument("--qtypes", default=",".join(q.value for q in QType))
    ap.add_argument("--ts", default="33,48,64,65,96,128")
    ap.add_argument("--shapes", default="", help="NxK,... (default: the suites' shapes)")
    ap.add_argument("--nbs", default="1", help="token tiles to time: NB,...")
    ap.add_argument("--json")
    ap.add_argument("--repeat", type=int, default=10)
    args = ap.parse_args()
    shapes = parse_shapes(args.shapes, SHAPES)
    variants = [int(v) for v in args.nbs.split(",")]
    rs_tables: dict[int, tuple[Route, ...]] = {
        cc: (Route("dq_rs", 1, None),) for cc in table.ROUTE_TABLES
    }
    cc = int(cp.cuda.Device().compute_capability)
    env = environment(0)
    timer = ColdTimer(3, args.repeat, 256, "graph")
    rows, bad = [], []
    names = [f"rs_nb{v}" for v in variants]
    print("qtype N K T ref_route ref_us " + " ".join(f"{n}_us {n}/ref" for n in names))
    for q in (QType(s) for s in args.qtypes.split(",")):
        for n, k in shapes:
            w = random_device_weight(q, n, k, seed=7)
            for t in (int(v) for v in args.ts.split(",")):
                x = random_activations(t, k)
                ref_route = select(Problem(q, Policy.A16, n, k, t, cc)).name
                out = cp.empty((t, n), dtype=x.dtype)
                us = {"ref": time_under(table.ROUTE_TABLES, timer, x, w, out)}
                timer.stream.synchronize()
                ref = host_f32(out)
                diffs = {}
                for v, name in zip(variants, names, strict=True):
                    dq_rs.NB_FORCE = v
                    w.dispatch_cache.clear()  # plans hold their tile
                    try:
                        out = cp.empty((t, n), dtype=x.dtype)
                        us[name] = time_under(rs_tables, timer, x, w, out)
                        timer.stream.synchronize()
                    finally:
                        dq_rs.NB_FORCE = None
                        w.dispatch_cache.clear()
                    d = bf16_steps(ref, host_f32(out))
                    diffs[name] = d
                    if d > 1.0:
                        bad.append((q.value, n, k, t, name, d))
                rows.append(
                    {"qtype": q.value, "n": n, "k": k, "t": t, "ref_route": ref_route, **us,
                     "diff_steps": diffs}
                )  # fmt: skip
                cols = " ".join(f"{us[m]:8.2f} {us[m] / us['ref']:5.2f}" for m in names)
                print(
                    f"{q.value:<5} {n} {k} {t:>4} {ref_route:<7} {us['ref']:8.2f} {cols}",
                    flush=True,
                )
        if args.json:  # after each format: a run cut short keeps what it measured
            with open(args.json, "w") as f:
                json.dump({"environment": env, "rows": rows}, f, indent=1)
    for q_, n, k, t, name, d in bad:
        print(f"MISMATCH {q_} [{n},{k}] T={t} {name}: {d:.2f} BF16 steps", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
