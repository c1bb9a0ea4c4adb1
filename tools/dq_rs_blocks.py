"""dq_rs's persistent grid against whole tiles per block, side by side (docs/perf/prefill_h200.md).

For each shape and T the public call is timed (``ninfer-bench``: cold, graph replay)
with the host's block count and with BLOCKS_FORCE = the tile count (one whole tile per
block, the data-parallel grid that the persistent one replaced), so that the split
tiles' cost shows as the difference. BLOCKS_FORCE is capped at BLOCKS_MAX (132): with
more tiles than that both lines run the same grid. ``--blocks 120,96,66`` times those
block counts (BLOCKS_FORCE) beside the host's instead of the whole-tile grid: how a
split grid's time follows its block count.

    python tools/dq_rs_blocks.py [--qtype q4] [--shapes 14336x5120,...] [--ts 128,256]
        [--blocks 120,96,66]
"""

from __future__ import annotations

import argparse

from ninfer import Policy, QType
from ninfer.bench.cli import main as bench
from ninfer.routes import Problem, dq_rs


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--qtype", default="q4")
    ap.add_argument("--shapes", default="14336x5120,34816x5120,6144x5120")
    ap.add_argument("--ts", default="128,256")
    ap.add_argument("--blocks", default="", help="block counts to force (default: the tile count)")
    args = ap.parse_args()
    for shape in args.shapes.split(","):
        n, k = (int(v) for v in shape.split("x"))
        for t in (int(v) for v in args.ts.split(",")):
            p = Problem(QType(args.qtype), Policy.A16, n, k, t, 90)
            whole = dq_rs.tiles(p, dq_rs.choose_nb(p))
            forced: list[tuple[str, int | None]] = [
                (f"{g} blocks", g) for g in (int(v) for v in filter(None, args.blocks.split(",")))
            ] or [(f"{whole} whole tiles", whole)]
            for label, force in (("persistent", None), *forced):
                dq_rs.BLOCKS_FORCE = force
                print(f"== {args.qtype} [{n},{k}] T={t}: {label}", flush=True)
                argv = ["--qtype", args.qtype, "--n", str(n), "--k", str(k), "--t", str(t)]
                bench([*argv, "--no-progress"])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
