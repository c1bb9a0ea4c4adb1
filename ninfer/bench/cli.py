"""``ninfer-bench``: the Linear benchmark (seed 000). Only the public ``linear()`` is timed.

Modes: a single point (--qtype --policy --n --k --t), --sweep LO:HI[:STEP], --suite,
--profile (one point between cudaProfilerStart/Stop), --list; subcommands ``probe``,
``ncu`` and ``ir`` (PTX/SASS of every routed kernel instance, for A/B diffs; no GPU
needed with --arch). Exit status: 0 ok, 1 a point failed, 2 usage or environment error.
"""

from __future__ import annotations

import argparse
import csv
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
    ap.add_argument(
        "--warmup", type=count_arg(0), default=3, help="untimed calls before capture (3)"
    )
    ap.add_argument(
        "--repeat", type=count_arg(1), default=20, help="samples per point and round (20)"
    )
    ap.add_argument(
        "--flush-mib", type=count_arg(0), default=256, help="L2 flush MiB per sample (256)"
    )
    ap.add_argument("--execution", choices=["graph", "direct"], default="graph")
    ap.add_argument("--peer", action="append", choices=list(PEERS), default=[])
    ap.add_argument("--csv-out", type=Path)
    ap.add_argument("--json-out", type=Path)
    ap.add_argument("--device", type=count_arg(0), default=0)
    ap.add_argument("--no-progress", action="store_true",
                    help="accepted for old scripts: rows print as each point finishes")  # fmt: skip
    g = ap.add_argument_group("rounds (what ninfer-regress drives; docs/regress.md)")
    g.add_argument("--order-seed", type=count_arg(0), default=None,
                   help="shuffle the points of each round from this seed (default: suite order)")  # fmt: skip
    g.add_argument("--allocs", type=count_arg(1), default=1,
                   help="rounds in this process, each a fresh allocation of all buffers (1)")  # fmt: skip
    g.add_argument("--memory", choices=["arena", "pool"], default="arena",
                   help="arena: fixed layout (default); pool: the old per-group pool")  # fmt: skip
    g.add_argument("--process", type=count_arg(0), default=0, help="recorded process index")
    g.add_argument("--side", default="", help="recorded A/B side label")
    g.add_argument("--only-file", type=Path,
                   help="measure only the points listed in this file (one 'q4 a16 [N,K] T=t' a line)")  # fmt: skip
    return ap


def count_arg(lo: int) -> Any:
    """An argparse type: an integer >= ``lo`` (checked before any GPU work)."""

    def parse(text: str) -> int:
        try:
            v = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if v < lo:
            raise argparse.ArgumentTypeError(f"expected an integer >= {lo}, got {v}")
        return v

    return parse


def only(points: list[BenchPoint], path: Path) -> list[BenchPoint]:
    """The points named in ``path`` (key strings, as the reports print them)."""
    try:
        wanted = {line.strip() for line in path.read_text().splitlines() if line.strip()}
    except OSError as e:
        raise ValueError(f"--only-file {path}: not readable ({e})") from None
    picked = [p for p in points if str(p.key) in wanted]
    missing = wanted - {str(p.key) for p in picked}
    if missing:
        raise ValueError(f"--only-file {path}: not points of this suite: {sorted(missing)[:3]}")
    return picked


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
        if args.only_file is not None:
            points = only(points, args.only_file)
    except (ValueError, OSError) as e:
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
    import io

    from ..record import write_text_atomic

    keys: list[str] = []
    for r in rows:
        keys += [k for k in r if k not in keys]
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=keys)
    w.writeheader()
    w.writerows(rows)
    write_text_atomic(path, buf.getvalue())


if __name__ == "__main__":
    raise SystemExit(main())
