"""``ninfer-bench ncu-table``: the figures the perf reports quote, read from Nsight Compute's
``--page details`` text (what ``tools/device.sh ncufull`` saves per point), one row per
kernel a file holds: a ``linear()`` call may launch several (dq_gemm's decode, then
cuBLAS's GEMM).

The numbers are copied, not typed: docs/perf's "What bounds each miss" rows come from this
table of the pages the device call brought back. The page's layout (a kernel's header
line, then sections of ``Metric Name / Metric Unit / Metric Value`` tables) is that of
the device's Nsight Compute, whose pages tests/fixtures/ncu/ holds; a page this reader
cannot find a kernel in is an error, not an empty table.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

from .args import HelpFormatter

# A kernel's header: its name (a signature or a bare name), grid and block, then its
# context, stream, device and compute capability.
_HEADER = re.compile(
    r"^  (?P<name>\S.*?) \((?P<grid>\d+, \d+, \d+)\)x\((?P<block>\d+, \d+, \d+)\), "
    r"Context \d+, Stream \d+, Device \d+, CC (?P<cc>[\d.]+)\s*$"
)
_SECTION = re.compile(r"^    Section: (?P<name>.+?)\s*$")
# A metric table's rule: three runs of dashes (name, unit, value columns), one space
# apart. Its first rule opens the header, the second the rows, the third closes them; the
# rows are cut at the rule's columns (a name as wide as its column is one space from a
# unit as wide as its own). Rules of two runs separate advice paragraphs.
_RULE = re.compile(r"^    (-+) (-+) (-+)\s*$")

# The columns of the table: (heading, section, metric). Why these: the bound of a memory
# stream is DRAM against the issue of its decode and the warps there are to hide latency
# (docs/perf/decode_h200.md, "What bounds each miss").
COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("µs", "GPU Speed Of Light Throughput", "Duration"),
    ("SM GHz", "GPU Speed Of Light Throughput", "SM Frequency"),
    ("DRAM %", "GPU Speed Of Light Throughput", "DRAM Throughput"),
    ("L2 %", "GPU Speed Of Light Throughput", "L2 Cache Throughput"),
    ("issue slots %", "Compute Workload Analysis", "Issue Slots Busy"),
    ("warp instr.", "Instruction Statistics", "Executed Instructions"),
    ("cycles / issue", "Warp State Statistics", "Warp Cycles Per Issued Instruction"),
    ("eligible / sched.", "Scheduler Statistics", "Eligible Warps Per Scheduler"),
    ("active / sched.", "Scheduler Statistics", "Active Warps Per Scheduler"),
    ("registers", "Launch Statistics", "Registers Per Thread"),
    ("occupancy % (theor.)", "Occupancy", "Theoretical Occupancy"),
    ("occupancy % (achieved)", "Occupancy", "Achieved Occupancy"),
    ("spill requests", "Memory Workload Analysis", "Local Memory Spilling Requests"),
)
# Nsight Compute scales a value's unit to its size (a long kernel's Duration in ms, a clock
# in Mhz or Ghz, a count in Kinst): each heading's figure is converted to the heading's
# unit, by the factor of the page's unit (lower case); a unit not listed gives no figure.
_TO_US = {"ns": 1e-3, "nsecond": 1e-3, "us": 1.0, "usecond": 1.0, "ms": 1e3, "msecond": 1e3,
          "s": 1e6, "second": 1e6}  # fmt: skip
_TO_GHZ = {"hz": 1e-9, "khz": 1e-6, "mhz": 1e-3, "ghz": 1.0, "cycle/nsecond": 1.0,
           "cycle/usecond": 1e-3}  # fmt: skip
_PREFIX = {"k": 1e3, "m": 1e6, "g": 1e9}  # scaled counts: Kinst, Minst, ...
UNITS: dict[str, dict[str, float]] = {"µs": _TO_US, "SM GHz": _TO_GHZ}


def _factor(heading: str, unit: str) -> float | None:
    """The factor from a page's ``unit`` to ``heading``'s, None for a unit it cannot take."""
    u = unit.lower()
    if heading in UNITS:
        return UNITS[heading].get(u)
    if u.endswith("%") or not u:
        return 1.0
    if u[1:] in {"inst", "warp", "request", "cycle"} and u[:1] in _PREFIX:
        return _PREFIX[u[:1]]
    return 1.0  # an unscaled unit: "inst", "warp", "register/thread", ...


# Stall reasons: Nsight Compute's cycles a warp waits per issued instruction for each
# reason, in the page's "Command line profiler metrics" section when the call asks for
# them (tools/device.sh ncufull passes STALL_METRICS). "selected" is the issue itself.
STALL_PREFIX, STALL_SUFFIX = "smsp__average_warps_issue_stalled_", "_per_issue_active.ratio"
STALL_REASONS = (
    "barrier", "branch_resolving", "dispatch_stall", "drain", "gmma", "imc_miss",
    "lg_throttle", "long_scoreboard", "math_pipe_throttle", "membar", "mio_throttle", "misc",
    "no_instruction", "not_selected", "selected", "short_scoreboard", "sleeping",
    "tex_throttle", "wait",
)  # fmt: skip
STALL_METRICS = ",".join(f"{STALL_PREFIX}{r}{STALL_SUFFIX}" for r in STALL_REASONS)
TOP_STALLS = 3


class NcuPageError(ValueError):
    """A page this reader cannot take: it says which file and what was expected."""


@dataclass
class Kernel:
    """One profiled kernel of a page: its header and every metric row, by (section, name)."""

    name: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    cc: str
    metrics: dict[tuple[str, str], tuple[str, str]] = field(default_factory=dict)

    @property
    def short_name(self) -> str:
        """The name without its parameter list and return type: ``dq_gemm<0>``."""
        base = self.name.split("(", 1)[0].strip()
        return base.removeprefix("void ").strip()

    def stalls(self) -> dict[str, float]:
        """Cycles per issued instruction by stall reason (the issue itself, "selected",
        left out); empty where the page has no stall metrics."""
        out = {}
        for (section, name), _ in self.metrics.items():
            if name.startswith(STALL_PREFIX) and name.endswith(STALL_SUFFIX):
                reason = name[len(STALL_PREFIX) : -len(STALL_SUFFIX)]
                v = self.value(section, name)
                if reason != "selected" and v is not None:
                    out[reason] = v
        return out

    def value(self, section: str, metric: str) -> float | None:
        """A numeric metric (thousands commas dropped) as printed, None where the page has
        none; ``unit`` gives its unit."""
        got = self.metrics.get((section, metric))
        if got is None:
            return None
        try:
            return float(got[1].replace(",", ""))
        except ValueError:
            return None

    def unit(self, section: str, metric: str) -> str:
        return self.metrics.get((section, metric), ("", ""))[0]

    def figure(self, heading: str, section: str, metric: str) -> float | None:
        """A column's figure in the heading's unit (COLUMNS, UNITS)."""
        v, f = self.value(section, metric), _factor(heading, self.unit(section, metric))
        if v is None or f is None:
            return None
        v *= f
        return int(v) if v.is_integer() else round(v, 6)


def _triple(text: str) -> tuple[int, int, int]:
    a, b, c = (int(v) for v in text.split(", "))
    return a, b, c


def parse(text: str) -> list[Kernel]:
    """Every kernel of a ``--page details`` text, in the page's order."""
    kernels: list[Kernel] = []
    section, state = "", ""  # state: "" outside a table, "head", "rows"
    cols: tuple[int, int] = (0, 0)  # where the unit and the value columns start
    for line in text.splitlines():
        m = _HEADER.match(line)
        if m:
            kernels.append(Kernel(m["name"], _triple(m["grid"]), _triple(m["block"]), m["cc"]))
            section, state = "", ""
            continue
        if not kernels:
            continue
        m = _SECTION.match(line)
        if m:
            section, state = m["name"], ""
            continue
        rule = _RULE.match(line)
        if rule:
            state = {"": "head", "head": "rows", "rows": ""}[state]
            cols = (rule.start(2), rule.start(3))
            continue
        if state == "rows" and section:
            name, unit, value = (line[: cols[0]].strip(), line[cols[0] : cols[1]].strip(),
                                 line[cols[1] :].strip())  # fmt: skip
            if name and value:
                kernels[-1].metrics.setdefault((section, name), (unit, value))
    return kernels


def read(path: Path) -> list[Kernel]:
    try:
        text = path.read_text(errors="replace")
    except OSError as e:
        raise NcuPageError(f"{path}: expected a readable Nsight Compute page, got {e}") from None
    kernels = parse(text)
    if not kernels:
        raise NcuPageError(
            f"{path}: expected an `ncu --page details` text with at least one kernel header "
            f"('  name (gx, gy, gz)x(bx, by, bz), Context ..., CC x.y'), found none"
        )
    return kernels


def rows(paths: list[Path]) -> list[dict[str, object]]:
    """One row per kernel per page: the file's stem, the kernel, its grid, COLUMNS."""
    out: list[dict[str, object]] = []
    for path in paths:
        for k in read(path):
            row: dict[str, object] = {
                "page": path.stem,
                "kernel": k.short_name,
                "grid": "x".join(map(str, k.grid)),
                "block": k.block[0] * k.block[1] * k.block[2],
            }
            for heading, section, metric in COLUMNS:
                row[heading] = k.figure(heading, section, metric)
            top = sorted(k.stalls().items(), key=lambda kv: -kv[1])[:TOP_STALLS]
            row["top stalls (cycles / issue)"] = (
                ", ".join(f"{r} {v:g}" for r, v in top) if top else None
            )
            out.append(row)
    return out


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(
        prog="ninfer-bench ncu-table",
        description="The figures docs/perf quotes, from Nsight Compute --page details texts\n"
        "(tools/device.sh ncufull's ncu_<point>.txt): one row per kernel.",
        formatter_class=HelpFormatter,
    )
    ap.add_argument("pages", nargs="+", type=Path, help="ncu --page details text files")
    ap.add_argument("--json", action="store_true", help="JSON rows instead of a table")
    ap.add_argument("--keep-going", action="store_true",
                    help="a page without a kernel is reported and left out (exit 1), not the "
                         "end of the table (a device call's failed point)")  # fmt: skip
    args = ap.parse_args(argv)
    table: list[dict[str, object]] = []
    bad: list[str] = []
    for page in args.pages:
        try:
            table += rows([page])
        except NcuPageError as e:
            if not args.keep_going:
                print(f"ninfer-bench ncu-table: error: {e}", file=sys.stderr)
                return 2
            bad.append(str(e))
    if args.json:
        print(json.dumps(table, indent=1, ensure_ascii=False))
    elif table:
        from tabulate import tabulate

        print(tabulate(table, headers="keys", tablefmt="github", missingval="—", intfmt=","))
    for why in bad:
        print(f"ninfer-bench ncu-table: left out: {why}", file=sys.stderr)
    return 1 if bad else 0
