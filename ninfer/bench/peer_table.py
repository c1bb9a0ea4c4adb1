"""``ninfer-bench peer-table RECORD``: ninfer against its best int peer, point by point.

Reads a bench record taken with int peers (``--peer tinygemm / fbgemm / gemlite``, and
``cublas`` as the BF16 reference) and prints a Markdown table: each point's median,
every peer's (with the kernel a library picked), the fastest int peer and ninfer's time
over it (<= 1: at least as fast), then the count met. docs/perf/peers_h200.md's peer
table is this command's output on ``peers_h200/peer_table.json``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from .. import record
from .peers import PEER_QTYPES

# The like-for-like peers a point is held to: those of some formats only (cuBLAS BF16,
# every format's peer, is the reference column).
INT_PEERS = tuple(PEER_QTYPES)


def rows(doc: dict[str, Any]) -> tuple[list[str], int, int]:
    """The table's lines, and the counts met and missed (points with an int peer only)."""
    out = [
        "| format | [N,K] | T | ninfer µs | cuBLAS BF16 | tinygemm | fbgemm (kernel) | "
        "gemlite (kernel) | best peer | ninfer / best | met |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: | --- |",
    ]
    met = missed = 0
    for p in doc["points"]:
        peers = p.get("peers", {})
        times = {n: e["median_us"] for n, e in peers.items() if "median_us" in e}
        ints = {n: times[n] for n in INT_PEERS if n in times}
        if not ints:
            continue
        best = min(ints, key=ints.__getitem__)
        ratio = p["median_us"] / ints[best]
        ok = ratio <= 1.0
        met, missed = met + ok, missed + (not ok)
        cells = [_cell(peers.get(n), times.get(n)) for n in ("cublas", *INT_PEERS)]
        out.append(
            f"| {p['qtype'].upper()} | [{p['n']},{p['k']}] | {p['t']} | {p['median_us']:.1f} | "
            + " | ".join(cells)
            + f" | {best} | {ratio:.2f} | {'met' if ok else '**missed**'} |"
        )
    return out, met, missed


def _cell(entry: dict[str, Any] | None, us: float | None) -> str:
    if us is None or entry is None:
        return "—"
    # "bf16i4bf16_shuffled" -> "shuffled"; "A16W4 GEMV_REVSPLITK [config] (autotuned)" ->
    # "GEMV_REVSPLITK": the kernel, not its tuning, is what a reader compares.
    kernel = str(entry.get("kernel", "")).replace("bf16i4bf16_", "").split(" [")[0]
    kernel = kernel.removeprefix("A16W4 ").removeprefix("A16W8 ")
    direct = "" if entry.get("execution") == "graph" else ", direct"
    return f"{us:.1f}" + (f" ({kernel}{direct})" if kernel or direct else "")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="ninfer-bench peer-table", description=__doc__)
    ap.add_argument("record", type=Path, help="a ninfer-bench --json-out record with peers")
    a = ap.parse_args(argv)
    try:
        doc = record.load_results(a.record).doc
    except (OSError, ValueError) as e:
        print(f"ninfer-bench peer-table: error: {e}", file=sys.stderr)
        return 2
    lines, met, missed = rows(doc)
    if met + missed == 0:
        print(
            f"ninfer-bench peer-table: error: {a.record}: no point has an int peer's time",
            file=sys.stderr,
        )
        return 2
    print("\n".join(lines))
    print(f"\nat least as fast as the best int peer on {met} of {met + missed} points")
    return 0
