"""``ninfer-bench cliffs RECORD...``: T cliffs in sweeps (issue 26, "no cliffs").

Along a sweep of T on one shape and format, more tokens never need less time, and one
more step of T adds a small share of the work. So, per (format, policy, N, K):

- *faster with more T*: a T whose median is more than ``FASTER`` (3 %) below that of
  some smaller T (the worst such smaller T is named): the smaller T's route, or its
  tile, is the slower choice there;
- *step*: two adjacent T of the sweep whose medians differ by more than ``STEP`` (20 %).
  A step where the extra work itself requires more (a wider tile's padding, a new wave
  of blocks) is for the reader to name: the report prints the routes on both sides.

Reads any ninfer-bench records (``--sweep`` ones are what it is for); exit 1 when it
finds one, 0 when none, 2 on an unreadable record.
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import record

FASTER = 0.03
STEP = 0.20


@dataclass(frozen=True)
class Cliff:
    kind: str  # "faster" | "step"
    shape: str  # "q4 a16 [6144,5120]"
    t_from: int
    t_to: int
    us_from: float
    us_to: float
    route_from: str
    route_to: str

    def __str__(self) -> str:
        change = self.us_to / self.us_from - 1
        routes = (
            self.route_from
            if self.route_from == self.route_to
            else f"{self.route_from} -> {self.route_to}"
        )
        return (
            f"{self.shape}: T {self.t_from} -> {self.t_to}: {self.us_from:.2f} -> {self.us_to:.2f} us "
            f"({change:+.1%}, {self.kind}; {routes})"
        )


def find(points: list[dict[str, Any]], faster: float = FASTER, step: float = STEP) -> list[Cliff]:
    """Every cliff among ``points`` (a record's points; several T of a shape make a sweep)."""
    sweeps: dict[str, dict[int, dict[str, Any]]] = defaultdict(dict)
    for p in points:
        shape = f"{p['qtype']} {p['policy']} [{p['n']},{p['k']}]"
        sweeps[shape].setdefault(p["t"], p)  # the first record wins a duplicate T
    return [c for shape, by_t in sweeps.items() for c in _sweep(shape, by_t, faster, step)]


def _sweep(shape: str, by_t: dict[int, dict[str, Any]], faster: float, step: float) -> list[Cliff]:
    ts = sorted(by_t)
    us = [float(by_t[t]["median_us"]) for t in ts]
    route = [str(by_t[t].get("route", "?")) for t in ts]

    def cliff(kind: str, j: int, i: int) -> Cliff:
        return Cliff(kind, shape, ts[j], ts[i], us[j], us[i], route[j], route[i])

    out: list[Cliff] = []
    slowest = 0  # index of the slowest smaller T so far
    faster_than: dict[int, int] = {}  # a slow T -> the fastest larger T below it
    for i in range(1, len(ts)):
        if us[i] < (1 - faster) * us[slowest]:
            k = faster_than.get(slowest)
            if k is None or us[i] < us[k]:
                faster_than[slowest] = i
        if abs(us[i] / us[i - 1] - 1) > step:
            out.append(cliff("step", i - 1, i))
        if us[i] > us[slowest]:
            slowest = i
    return out + [cliff("faster", j, i) for j, i in sorted(faster_than.items())]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="ninfer-bench cliffs", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    ap.add_argument("records", type=Path, nargs="+", help="ninfer-bench --json-out records")
    ap.add_argument("--faster", type=float, default=FASTER,
                    help="flag a T this much faster than a smaller T (default: %(default)s)")  # fmt: skip
    ap.add_argument("--step", type=float, default=STEP,
                    help="flag adjacent T whose times differ by more (default: %(default)s)")  # fmt: skip
    a = ap.parse_args(argv)
    points: list[dict[str, Any]] = []
    for path in a.records:
        try:
            points += record.load_results(path).points
        except (OSError, ValueError) as e:
            print(f"ninfer-bench cliffs: error: {e}", file=sys.stderr)
            return 2
    found = find(points, a.faster, a.step)
    for c in found:
        print(c)
    shapes = len({(p["qtype"], p["policy"], p["n"], p["k"]) for p in points})
    print(f"{len(found)} cliff(s) over {shapes} shape(s), {len(points)} points")
    return 1 if found else 0
