"""The largest adjacent step of each ``sweep_<q>.json`` in a folder (a ``--sweep`` run).

    python tools/sweep_steps.py FOLDER

One line per file: the first, a middle and the last T with their medians, and the
largest step median(T2)/median(T1) - 1 between adjacent measured T.
"""

from __future__ import annotations

import itertools
import json
import sys
from pathlib import Path


def largest_step(points: list[dict]) -> tuple[float, int, int]:
    """(step, T1, T2) of the largest median(T2)/median(T1) - 1 over adjacent measured T."""
    med = {p["t"]: p["median_us"] for p in points}
    return max((med[b] / med[a] - 1, a, b) for a, b in itertools.pairwise(sorted(med)))


def main(argv: list[str]) -> int:
    for f in sorted(Path(argv[0]).glob("sweep_*.json")):
        pts = json.loads(f.read_text())["points"]
        med = {p["t"]: p["median_us"] for p in pts}
        ts = sorted(med)
        mid = ts[len(ts) // 4]
        step, a, b = largest_step(pts)
        print(f"{f.stem}: T{ts[0]} {med[ts[0]]:.2f} T{mid} {med[mid]:.2f} T{ts[-1]} {med[ts[-1]]:.2f} us; "
              f"largest step {100 * step:+.1f}% at T {a}->{b}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
