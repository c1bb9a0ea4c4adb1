"""``ninfer-bench targets RECORD...``: issue 26's numeric targets, point by point.

Each row of ``TARGETS`` says which points a target holds (format, T, the weight's bytes,
its shape), the value measured on each (READ_%, the time over a plain read of the same
bytes, cuBLAS BF16's time over ninfer's) and its bound. The peers come from the same
record (``--peer cublas``, ``--peer read``), so every figure was timed in one run beside
ninfer's. A point that a target holds but whose record lacks the peer it needs is
counted apart ("no data"), never as met. The other targets have their own commands:
the peer table (Deliver 7) is ``ninfer-bench peer-table``, the cliffs (Deliver 4)
``ninfer-bench cliffs``.

    ninfer-bench --suite all --peer cublas --peer read --json-out all.json
    ninfer-bench --suite-file experiments/issue26/targets.yaml --peer cublas --peer read \
        --json-out t.json
    ninfer-bench targets all.json t.json

Prints a Markdown table (target, point, route, ninfer's, cuBLAS's and the read's µs,
value, bound, met) and a count per target. A point in several records counts once: the
copy with the most peers beside it (the first of those). Exit 0 when every held point is
met, 1 when one is missed or lacks its peer, 2 on an unreadable record. No GPU.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import record
from ..formats.qtype import weight_bytes

MB = 1_000_000  # the "256 MB", "30 MB": decimal, as docs/perf prints weights
QUANTIZED = frozenset({"q4", "q5", "q6", "w8", "nvfp4"})
FOUR_BIT = frozenset({"q4", "nvfp4"})

Point = dict[str, Any]


def _weight(p: Point) -> int:
    return weight_bytes(p["qtype"], p["n"], p["k"])


def _peer_us(p: Point, peer: str) -> float | None:
    us = p.get("peers", {}).get(peer, {}).get("median_us")
    return None if us is None else float(us)


def _read_pct(p: Point) -> float | None:
    v = p.get("metrics", {}).get("READ_pct")
    return None if v is None else float(v)


def _over_read(p: Point) -> float | None:
    read = _peer_us(p, "read")
    return None if read is None else float(p["median_us"]) / read


def _vs_cublas(p: Point) -> float | None:
    cublas = _peer_us(p, "cublas")
    return None if cublas is None else cublas / float(p["median_us"])


@dataclass(frozen=True)
class Target:
    key: str  # "2.1": Deliver 2's first target
    what: str  # the words
    holds: Callable[[Point], bool]
    value: Callable[[Point], float | None]  # None: the record lacks what it needs
    bound: float
    at_least: bool  # met: value >= bound (else value <= bound)
    unit: str

    def met(self, v: float) -> bool:
        return v >= self.bound if self.at_least else v <= self.bound

    @property
    def rule(self) -> str:
        return f"{'≥' if self.at_least else '≤'} {self.bound:g}{self.unit}"


# Issue 26, "Deliver" 2, 3 and 5, as written there.
TARGETS: tuple[Target, ...] = (
    Target("2.1", "T = 1, every format, weights of 256 MB or more: READ_% ≥ 85",
           lambda p: p["t"] == 1 and _weight(p) >= 256 * MB, _read_pct, 85.0, True, " %"),
    Target("2.2", "T = 16, the same weights: READ_% ≥ 80",
           lambda p: p["t"] == 16 and _weight(p) >= 256 * MB, _read_pct, 80.0, True, " %"),
    Target("2.3", "[14336,5120] at T = 1: within 1.3× of a plain read of its bytes",
           lambda p: (p["n"], p["k"], p["t"]) == (14336, 5120, 1), _over_read, 1.3, False,
           "× read"),
    Target("3.1", "T ≤ 16, quantized: at least 1.0× cuBLAS BF16",
           lambda p: p["qtype"] in QUANTIZED and p["t"] <= 16, _vs_cublas, 1.0, True, "×"),
    Target("3.2", "T ≤ 16, 4-bit formats on weights of 30 MB or more: at least 1.6× cuBLAS BF16",
           lambda p: p["qtype"] in FOUR_BIT and p["t"] <= 16 and _weight(p) >= 30 * MB,
           _vs_cublas, 1.6, True, "×"),
    Target("5.1", "T = 256 … 1024, quantized, weights of 30 MB or more: at least 1.0× cuBLAS BF16",
           lambda p: p["qtype"] in QUANTIZED and 256 <= p["t"] <= 1024 and _weight(p) >= 30 * MB,
           _vs_cublas, 1.0, True, "×"),
    Target("5.2", "T = 256 … 1024, quantized, smaller weights: at least 0.9× cuBLAS BF16",
           lambda p: p["qtype"] in QUANTIZED and 256 <= p["t"] <= 1024 and _weight(p) < 30 * MB,
           _vs_cublas, 0.9, True, "×"),
)  # fmt: skip


def _us(v: float | None) -> str:
    return "—" if v is None else f"{v:.1f}"


def rows(points: list[Point]) -> tuple[list[str], dict[str, tuple[int, int, int]]]:
    """The table's lines and, per target, (met, missed, no data). A point measured twice
    (two records) counts once: the copy with the most peers, the first of those."""
    seen: dict[tuple[Any, ...], Point] = {}
    for p in points:
        key = (p["qtype"], p["policy"], p["n"], p["k"], p["t"])
        if key not in seen or len(p.get("peers", {})) > len(seen[key].get("peers", {})):
            seen[key] = p
    lines = [
        "| target | point | route | ninfer µs | cuBLAS BF16 µs | plain read µs | value | bound | met |",
        "| --- | --- | --- | ---: | ---: | ---: | ---: | --- | --- |",
    ]
    counts: dict[str, tuple[int, int, int]] = {}
    for tg in TARGETS:
        met = missed = none = 0
        for p in seen.values():
            if not tg.holds(p):
                continue
            v = tg.value(p)
            if v is None:
                state, none = "no data", none + 1
            elif tg.met(v):
                state, met = "met", met + 1
            else:
                state, missed = "**missed**", missed + 1
            point = (
                f"{p['qtype'].upper()} [{p['n']},{p['k']}] T={p['t']} ({_weight(p) / MB:.0f} MB)"
            )
            lines.append(
                f"| {tg.key} | {point} | {p.get('route', '?')} | {float(p['median_us']):.1f} | "
                f"{_us(_peer_us(p, 'cublas'))} | {_us(_peer_us(p, 'read'))} | "
                f"{'—' if v is None else f'{v:.2f}'} | {tg.rule} | {state} |"
            )
        counts[tg.key] = (met, missed, none)
    return lines, counts


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="ninfer-bench targets", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    ap.add_argument("records", type=Path, nargs="+", help="ninfer-bench --json-out records")
    a = ap.parse_args(argv)
    points: list[Point] = []
    made = set()
    for path in a.records:
        try:
            r = record.load_results(path)
        except (OSError, ValueError) as e:
            print(f"ninfer-bench targets: error: {e}", file=sys.stderr)
            return 2
        env = r.env
        made.add((env.get("commit"), env.get("kernel_fingerprint"), env.get("machine")))
        print(f"{path}: {env.get('gpu_name')} {env.get('machine')}, commit "
              f"{str(env.get('commit'))[:7]}, kernels {env.get('kernel_fingerprint')}")  # fmt: skip
        points += r.points
    if len(made) > 1:
        # Each figure still pairs ninfer with peers of its own run; across records, the
        # targets then describe different code or machines.
        print("note: the records differ in commit, kernels or machine")
    print()
    lines, counts = rows(points)
    print("\n".join(lines))
    print()
    for tg in TARGETS:
        met, missed, none = counts[tg.key]
        extra = f", {none} without the peer it needs" if none else ""
        print(f"{tg.key} {tg.what}: met on {met} of {met + missed} points{extra}")
    return 1 if any(missed or none for _, missed, none in counts.values()) else 0
