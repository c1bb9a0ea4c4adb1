"""``ninfer-bench``'s argument parser and the argparse helpers both CLIs share.

Kept apart from ``cli.py`` (which runs the points) so that the bench's other modules
and ``ninfer-regress`` import the parser without importing the runner.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from ..formats.qtype import QType
from ..policy import Policy
from .peers import PEER_QTYPES, PEERS
from .points import INT32_MAX, SUITE_NAMES

COMMANDS = {
    "probe": "measure this GPU's read bandwidth and cache it (the roofline's ceiling)",
    "ncu": "one point under Nsight Compute: DRAM bytes and kernel time",
    "ir": "the PTX and SASS of every kernel instance the routes can launch (no GPU with --arch)",
    "peer-table": "a record's points against their best int peer, as Markdown (no GPU)",
    "cliffs": "T cliffs in sweeps: a T faster than a smaller one, a large step (no GPU)",
    "sweep-plan": "a suite file of the T a bounded sweep needs to find the cliffs (no GPU)",
    "targets": "issue 26's targets (share of the read, plain read, cuBLAS) per point (no GPU)",
    "ncu-table": "the figures docs/perf quotes from Nsight Compute --page details texts (no GPU)",
    "ir-diff": "the kernel instances two `ir` outputs compile differently: regs, spills (no GPU)",
}


def _peer_formats() -> str:
    return ", ".join(
        f"{p} ({'/'.join(sorted(PEER_QTYPES[p])) if p in PEER_QTYPES else 'every format'})"
        for p in PEERS
    )


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="ninfer-bench",
        usage="%(prog)s [options]   (a point or a suite)\n       %(prog)s COMMAND [options]",
        description=(
            "Cold-cache benchmark of ninfer.ops.linear: one public call per sample, the L2\n"
            "flushed before each, CUDA events; median / min / p95 per point. Give a point\n"
            "(--qtype --n --k with --t or --sweep) or a suite (--suite or --suite-file)."
        ),
        epilog=(
            "examples:\n"
            "  ninfer-bench --qtype q4 --n 4096 --k 5120 --t 8\n"
            "  ninfer-bench --qtype q4 --n 6144 --k 5120 --sweep 1:64\n"
            "  ninfer-bench --suite all --list\n"
            "  ninfer-bench --suite all --peer cublas --json-out run.json\n"
            "exit status: 0 ok, 1 a point failed (the rest still run), 2 usage or environment "
            "error. docs/bench.md has the timing contract."
        ),
        formatter_class=HelpFormatter,
    )
    sub = ap.add_subparsers(dest="command", title="commands", metavar="COMMAND")
    for name, text in COMMANDS.items():
        # Each command parses its own options (ninfer-bench COMMAND --help shows them).
        sp = sub.add_parser(name, help=text, add_help=False)
        sp.add_argument("rest", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    pt = ap.add_argument_group("a point")
    pt.add_argument("--qtype", choices=[q.value for q in QType], help="weight format")
    pt.add_argument("--policy", choices=[p.value for p in Policy], default="a16",
                    help="activation policy (a4 only with nvfp4)")  # fmt: skip
    pt.add_argument("--n", type=count_arg(1, INT32_MAX), help="output features (weight rows)")
    pt.add_argument("--k", type=count_arg(1, INT32_MAX), help="input features (weight columns)")
    pt.add_argument("--t", type=count_arg(1, INT32_MAX), help="tokens (activation rows)")
    pt.add_argument("--sweep", metavar="LO:HI[:STEP]",
                    help="every T from LO to HI (with delta_%% to the previous T), instead of --t")  # fmt: skip
    su = ap.add_argument_group("or a suite")
    su.add_argument("--suite", choices=SUITE_NAMES, help="a model suite of suites/*.yaml")
    su.add_argument("--suite-file", type=Path, metavar="YAML",
                    help="a suite file of your own (the schema of suites/*.yaml; name = file stem)")  # fmt: skip
    tm = ap.add_argument_group("timing")
    tm.add_argument("--warmup", type=count_arg(0), default=3, help="untimed calls before capture")
    tm.add_argument("--repeat", type=count_arg(1), default=20, help="samples per point and round")
    tm.add_argument("--host-calls", type=count_arg(0), default=20, metavar="N",
                    help="direct calls timed on the host per point, at most --repeat (0: none; "
                         "the tune command's choice is by GPU time alone)")  # fmt: skip
    tm.add_argument("--flush-mib", type=count_arg(0), default=256,
                    help="MiB written before each sample to evict the L2")  # fmt: skip
    tm.add_argument("--execution", choices=["graph", "direct"], default="graph",
                    help="graph: replay a captured call (no host time); direct: call linear()")  # fmt: skip
    tm.add_argument("--peer", action="append", choices=list(PEERS), default=[],
                    help="also time a reference implementation on each point of a format it "
                         f"is the peer of (repeatable; all but read need torch): {_peer_formats()}; "
                         "fbgemm needs fbgemm-gpu-genai and sm_90, gemlite gemlite (docs/bench.md)")  # fmt: skip
    tm.add_argument("--device", type=count_arg(0), default=0, help="CUDA device index")
    out = ap.add_argument_group("output")
    out.add_argument("--list", action="store_true",
                     help="print the expanded points and their count, and stop (no GPU)")  # fmt: skip
    out.add_argument("--json-out", type=Path, metavar="FILE",
                     help="the results record, every sample kept (docs/regress.md's schema)")  # fmt: skip
    out.add_argument("--csv-out", type=Path, metavar="FILE", help="one row per point")
    out.add_argument("--profile", action="store_true",
                     help="one point: cudaProfilerStart, one call, cudaProfilerStop (for nsys/ncu)")  # fmt: skip
    out.add_argument("--no-progress", action="store_true",
                     help="accepted for old scripts: rows print as each point finishes")  # fmt: skip
    g = ap.add_argument_group("rounds (what ninfer-regress drives; docs/regress.md)")
    g.add_argument("--order-seed", type=count_arg(0), default=None,
                   help="shuffle the points of each round from this seed (default: suite order)")  # fmt: skip
    g.add_argument("--allocs", type=count_arg(1), default=1,
                   help="rounds in this process, each a fresh allocation of all buffers")  # fmt: skip
    g.add_argument("--memory", choices=["arena", "pool"], default="arena",
                   help="arena: one fixed layout for the run; pool: a pool per point group")  # fmt: skip
    g.add_argument("--process", type=count_arg(0), default=0, help="recorded process index")
    g.add_argument("--side", default="", help="recorded A/B side label")
    g.add_argument("--dispatch", type=Path, metavar="JSON",
                   help="time a dispatch override instead of the shipped one (experiments and "
                   "tune: a forced route, a route table, launcher tuning; bench/override.py); "
                   "recorded, and never a baseline")  # fmt: skip
    g.add_argument("--only-file", type=Path, metavar="FILE",
                   help="measure only the points listed in this file (one 'q4 a16 [N,K] T=t' a line)")  # fmt: skip
    return ap


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Every option's default shown where it has one (not None, False or empty); the
    description and examples kept as written."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        d = action.default
        empty = d is None or d is False or d is argparse.SUPPRESS or (d == [] or d == "")
        if "%(default)" in text or empty:
            return text
        return f"{text} (default: %(default)s)"


def count_arg(lo: int, hi: int | None = None) -> Any:
    """An argparse type: an integer >= ``lo`` (and <= ``hi``), checked before any GPU work."""

    def parse(text: str) -> int:
        try:
            v = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if v < lo:
            raise argparse.ArgumentTypeError(f"expected an integer >= {lo}, got {v}")
        if hi is not None and v > hi:
            raise argparse.ArgumentTypeError(f"expected an integer <= {hi}, got {v}")
        return v

    return parse


def check_input_file(flag: str, path: Path) -> None:
    if not path.exists():
        raise ValueError(f"{flag} {path}: no such file")
    if path.is_dir():
        raise ValueError(f"{flag} {path}: expected a file, got a directory")
    if not os.access(path, os.R_OK):
        raise ValueError(f"{flag} {path}: not readable")


def check_output_file(flag: str, path: Path) -> None:
    """Fail at parse time what the record writer would only find after the GPU work.

    The writer stages a temporary file beside ``path`` and renames it, so the parent
    must be a writable directory; it is not created, so a mistyped folder is not made.
    """
    if path.is_dir():
        raise ValueError(f"{flag} {path}: expected a file path, got a directory")
    parent = path.parent
    if not parent.exists():
        raise ValueError(f"{flag} {path}: no such directory {parent}")
    if not parent.is_dir():
        raise ValueError(f"{flag} {path}: expected a directory {parent}, got a file")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise ValueError(f"{flag} {path}: directory {parent} is not writable")


def check_outputs(args: argparse.Namespace) -> None:
    outs = [(f, p) for f, p in (("--json-out", args.json_out), ("--csv-out", args.csv_out)) if p]
    for flag, path in outs:
        check_output_file(flag, path)
    if len(outs) == 2 and outs[0][1].resolve() == outs[1][1].resolve():
        raise ValueError(f"--json-out and --csv-out: expected two paths, got {outs[0][1]} twice")
