"""``ninfer-bench``: the Linear benchmark (seed 000). Only the public ``linear()`` is timed.

Modes: a single point (--qtype --policy --n --k --t), --sweep LO:HI[:STEP], --suite,
--profile (one point between cudaProfilerStart/Stop), --list; subcommands ``probe``,
``ncu`` and ``ir`` (PTX/SASS of every routed kernel instance, for A/B diffs; no GPU
needed with --arch). Exit status: 0 ok, 1 a point failed, 2 usage or environment error.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from pathlib import Path
from typing import Any

from ..formats.qtype import QType
from ..policy import Policy
from .peers import PEERS
from .points import (
    SUITE_NAMES,
    BenchPoint,
    load_suite,
    load_suite_file,
    merge_points,
    parse_sweep,
)


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="ninfer-bench",
        description="Cold-cache benchmark of ninfer.ops.linear (subcommands: probe, ncu, ir).",
    )
    ap.add_argument("--qtype", choices=[q.value for q in QType])
    ap.add_argument("--policy", choices=[p.value for p in Policy], default="a16")
    ap.add_argument("--n", type=int)
    ap.add_argument("--k", type=int)
    ap.add_argument("--t", type=int)
    ap.add_argument("--sweep", metavar="LO:HI[:STEP]")
    ap.add_argument("--suite", choices=SUITE_NAMES)
    ap.add_argument(
        "--suite-file",
        type=Path,
        metavar="YAML",
        help="a suite file of your own (same schema as suites/*.yaml; name = file stem)",
    )
    ap.add_argument(
        "--list", action="store_true", help="print the expanded points and their count; no GPU"
    )
    ap.add_argument(
        "--profile", action="store_true", help="one point: profiler start, one call, stop"
    )
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--flush-mib", type=int, default=256)
    ap.add_argument("--execution", choices=["graph", "direct"], default="graph")
    ap.add_argument("--peer", action="append", choices=list(PEERS), default=[])
    ap.add_argument("--csv-out", type=Path)
    ap.add_argument("--json-out", type=Path)
    ap.add_argument("--device", type=int, default=0)
    ap.add_argument("--no-progress", action="store_true")
    return ap


def expand(args: argparse.Namespace) -> list[BenchPoint]:
    if args.suite and args.suite_file:
        raise ValueError("give one of --suite and --suite-file")
    if args.suite or args.suite_file:
        if any(v is not None for v in (args.qtype, args.n, args.k, args.t, args.sweep)):
            raise ValueError("--suite/--suite-file take no --qtype/--n/--k/--t/--sweep")
        if args.suite_file:
            path = Path(args.suite_file)
            args.suite = path.stem
            return merge_points(load_suite_file(path, expect_name=path.stem))
        return load_suite(args.suite)
    missing = [f"--{a}" for a in ("qtype", "n", "k") if getattr(args, a) is None]
    if missing:
        raise ValueError(f"a point needs {' '.join(missing)} (or use --suite)")
    if (args.t is None) == (args.sweep is None):
        raise ValueError("give exactly one of --t and --sweep")
    ts = parse_sweep(args.sweep) if args.sweep else [args.t]
    if args.n < 1 or args.k < 1 or min(ts) < 1:
        raise ValueError(f"expected N, K, T >= 1, got N={args.n} K={args.k} T={min(ts)}")
    q, p = QType.parse(args.qtype), Policy.parse(args.policy)
    return [BenchPoint(q, p, args.n, args.k, t) for t in ts]


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in ("probe", "ncu"):
        from . import tools

        return tools.main(argv)
    if argv and argv[0] == "ir":
        from . import ir

        return ir.main(argv[1:])
    ap = build_parser()
    if not argv:
        ap.print_usage()
        print(
            "examples:\n  ninfer-bench --qtype q4 --n 4096 --k 5120 --t 8\n  ninfer-bench --suite all --list"
        )
        return 2
    args = ap.parse_args(argv)
    try:
        points = expand(args)
    except ValueError as e:
        ap.print_usage(sys.stderr)
        print(f"ninfer-bench: error: {e}", file=sys.stderr)
        return 2
    if args.list:
        for pt in points:
            print(
                f"{pt.label:40s} {pt.qtype.value:5s} {pt.policy.value} N={pt.n} K={pt.k} T={pt.t}"
            )
        print(len(points))
        return 0
    if args.profile and len(points) != 1:
        print(
            f"ninfer-bench: error: --profile takes exactly one point, got {len(points)}",
            file=sys.stderr,
        )
        return 2
    from ..runtime.cupy_env import NoGPUError, require_cupy

    try:
        require_cupy()
    except NoGPUError as e:
        print(f"ninfer-bench: error: {e}", file=sys.stderr)
        return 2
    from .run import run_points

    return run_points(args, points)


def write_csv(path: Path, rows: list[dict[str, Any]]) -> None:
    keys: list[str] = []
    for r in rows:
        keys += [k for k in r if k not in keys]
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=keys)
        w.writeheader()
        w.writerows(rows)


def write_json(path: Path, doc: dict[str, Any]) -> None:
    path.write_text(json.dumps(doc, indent=1))


if __name__ == "__main__":
    raise SystemExit(main())
