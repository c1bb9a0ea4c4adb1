"""``ninfer-bench``: the Linear benchmark. Only the public ``linear()`` is timed.

Modes: a single point (--qtype --policy --n --k --t), --sweep LO:HI[:STEP], --suite,
--profile (one point between cudaProfilerStart/Stop), --list; subcommands ``probe``,
``ncu`` and ``ir`` (PTX/SASS of every routed kernel instance, for A/B diffs; no GPU
needed with --arch). Exit status: 0 ok, 1 a point failed, 2 usage or environment error.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..formats.qtype import QType
from ..policy import Policy
from .args import build_parser, check_input_file, check_outputs
from .memory import check_cap
from .points import (
    BenchPoint,
    load_suite,
    load_suite_file,
    merge_points,
    parse_sweep,
)


def only(points: list[BenchPoint], path: Path) -> list[BenchPoint]:
    """The points named in ``path`` (key strings, as the reports print them)."""
    check_input_file("--only-file", path)
    try:
        wanted = {line.strip() for line in path.read_text().splitlines() if line.strip()}
    except OSError as e:
        raise ValueError(f"--only-file {path}: not readable ({e.strerror})") from None
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
            check_input_file("--suite-file", path)
            args.suite = path.stem
            return merge_points(load_suite_file(path, expect_name=path.stem))
        return load_suite(args.suite)
    missing = [f"--{a}" for a in ("qtype", "n", "k") if getattr(args, a) is None]
    if missing:
        raise ValueError(f"a point needs {' '.join(missing)} (or use --suite)")
    if (args.t is None) == (args.sweep is None):
        raise ValueError("give exactly one of --t and --sweep")
    ts = parse_sweep(args.sweep) if args.sweep else [args.t]
    q, p = QType.parse(args.qtype), Policy.parse(args.policy)
    return [BenchPoint(q, p, args.n, args.k, t) for t in ts]


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    # A command owns everything after its name, --help included: argparse's REMAINDER
    # would let the top-level parser take a leading option such as --help.
    if argv and argv[0] in ("probe", "ncu"):
        from . import tools

        return tools.main(argv)
    if argv and argv[0] == "ir":
        from . import ir

        return ir.main(argv[1:])
    if argv and argv[0] in ("peer-table", "cliffs", "sweep-plan", "targets", "ncu-table",
                            "ir-diff"):  # fmt: skip
        from . import cliffs, ir_diff, ncu_page, peer_table, sweep_plan, targets

        cmd = {"peer-table": peer_table.main, "cliffs": cliffs.main,
               "sweep-plan": sweep_plan.main, "targets": targets.main,
               "ncu-table": ncu_page.main, "ir-diff": ir_diff.main}  # fmt: skip
        return cmd[argv[0]](argv[1:])
    ap = build_parser()
    if not argv:
        ap.print_help()
        return 2
    args = ap.parse_args(argv)
    if args.command is not None:
        # `ninfer-bench --suite all ir` would otherwise run the suite and ignore `ir`.
        ap.error(f"the command {args.command!r} must come first: ninfer-bench {args.command} ...")
    try:
        points = expand(args)
        if args.only_file is not None:
            points = only(points, args.only_file)
        # --list is a dry run: it refuses what a real run would refuse before the GPU.
        check_cap(points, args.flush_mib, args.memory)
        check_outputs(args)
        args.dispatcher = args.dispatch_doc = None
        if args.dispatch is not None:
            from .override import load

            check_input_file("--dispatch", args.dispatch)
            args.dispatch_doc, args.dispatcher = load(args.dispatch)
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
    from ..runtime.cupy_env import NoGPUError, require_device

    try:
        require_device(args.device)
    except NoGPUError as e:
        print(f"ninfer-bench: error: {e}", file=sys.stderr)
        return 2
    from .run import run_points

    return run_points(args, points)


if __name__ == "__main__":
    raise SystemExit(main())
