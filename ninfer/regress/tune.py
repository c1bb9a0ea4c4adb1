"""Tune a GPU's route table: time every candidate route on the suites' shapes over a T
grid (rounds in fresh processes, as the gate measures), then write the table from what
won, with the measurements beside it (record and replay: the table can be rebuilt from
its record without a GPU).

The table's N and K bounds come from fixed ladders, ``N_EDGES`` and ``K_EDGES``: the
conformance suite has a shape on each side of every one (tests/gpu/cases.py::SHAPES,
checked by tests/cpu/test_routes.py), so every bound a tuned table can have is tested on
the GPU. A cell of the ladders takes, at each grid T, the route whose time is least over
the cell's measured shapes (the geometric mean of each one's time over that shape's
best); a cell with no measured shape copies the nearest one that has. Between two grid
T the boundary is their geometric midpoint, or, where it comes first, the first T after
which the earlier route changes kernel instance (a tile edge: it was measured on its tile
at the earlier T, and its time steps past the edge); never past the last T the earlier
route can run.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..formats.qtype import QType
from ..policy import Policy
from ..routes.problem import Problem
from ..routes.table import LAUNCHERS, Route, RouteTable

N_EDGES = (2048, 4096, 4608, 8192, 14336)
K_EDGES = (2048, 4608, 10240)
# Both sides of the kernels' tile edges (8, 16, 32, 64, 128 tokens) and of the shipped
# table's seams, doubling past them.
T_GRID = (1, 4, 8, 16, 24, 32, 48, 64, 96, 128, 256, 512, 1024, 1536, 2048)
TIE = 0.005  # relative: within this, the route of the previous grid T keeps the cell (fewer rows)
T_TOP = 2**31 - 1  # the kernels' int32 T
RECORD_SCHEMA = "ninfer.tune_record"


@dataclass(frozen=True, order=True)
class Shape:
    qtype: QType
    n: int
    k: int

    def __str__(self) -> str:
        return f"[{self.n},{self.k}]"


# (shape, T) -> route -> time (µs, the statistic of its rounds)
Measured = Mapping[tuple[Shape, int], Mapping[str, float]]


def suite_shapes(points: Iterable[Any], qtypes: Iterable[QType] = QType) -> list[Shape]:
    """Every format on the distinct [N, K] of a suite's points: a table serves every format,
    and the suites hold some formats only."""
    nk = {(p.n, p.k) for p in points}
    return sorted({Shape(q, n, k) for q in qtypes for n, k in nk}, key=_order)


def _order(s: Shape) -> tuple[int, int, int]:
    return (list(QType).index(s.qtype), s.n, s.k)


def candidates(s: Shape, t: int, cc: int) -> list[str]:
    """The routes whose kernels can run this problem on this architecture."""
    p = Problem(s.qtype, Policy.A16, s.n, s.k, t, cc)
    return [name for name, lc in sorted(LAUNCHERS.items()) if lc.supports(p)]


def last_t(route: str, s: Shape, cc: int) -> int | None:
    """The largest T ``route`` can run for this shape (None: any)."""
    lc = LAUNCHERS[route]

    def ok(t: int) -> bool:
        return lc.supports(Problem(s.qtype, Policy.A16, s.n, s.k, t, cc))

    if ok(T_TOP):
        return None
    lo, hi = 1, T_TOP  # ok(lo) is the caller's premise; not ok(hi)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if ok(mid) else (lo, mid)
    return lo


def _spans(edges: Sequence[int]) -> list[tuple[int, int | None]]:
    lows = [1, *edges]
    return [(lo, (lows[i + 1] - 1) if i + 1 < len(lows) else None) for i, lo in enumerate(lows)]


def _cell(v: int, edges: Sequence[int]) -> int:
    return sum(v >= e for e in edges)


def _choose(shapes: list[Shape], t: int, measured: Measured, prev: str | None) -> str | None:
    """The route with the least geometric-mean slowdown over ``shapes`` at ``t`` (among
    those measured on every one of them); None where none is."""
    times = [measured.get((s, t)) for s in shapes]
    if any(not m for m in times):
        return None
    common = set.intersection(*(set(m) for m in times if m))
    if not common:
        return None
    score = {
        r: sum(math.log(m[r] / min(m.values())) for m in times if m) / len(shapes) for r in common
    }
    best = min(sorted(score), key=score.__getitem__)
    if prev in score and score[prev] <= score[best] + math.log1p(TIE):
        return prev
    return best


Segments = tuple[tuple[str, int, int | None], ...]


def first_step(route: str, shapes: Sequence[Shape], lo: int, hi: int, cc: int) -> int | None:
    """The first T in [lo, hi) after which ``route``'s kernel instance changes on any of
    ``shapes`` (None: the same instance to ``hi``)."""
    lc = LAUNCHERS[route]
    for s in shapes:
        cap = last_t(route, s, cc)
        if cap is not None:
            hi = min(hi, cap)
    steps = []
    for s in shapes:
        inst = [
            lc.instance(Problem(s.qtype, Policy.A16, s.n, s.k, t, cc)) for t in range(lo, hi + 1)
        ]
        steps += [lo + i for i in range(len(inst) - 1) if inst[i] != inst[i + 1]]
    return min(steps, default=None)


def segments(shapes: list[Shape], grid: Sequence[int], measured: Measured, cc: int) -> Segments:
    """A cell's T ranges: the chosen route at each grid T, boundaries between grid points
    at their geometric midpoint or the earlier route's first tile edge, whichever comes
    first (never past the earlier route's last T)."""
    picks: list[tuple[int, str]] = []
    prev = None
    for t in grid:
        r = _choose(shapes, t, measured, prev)
        if r is not None:
            picks.append((t, r))
            prev = r
    if not picks:
        raise ValueError(f"no route measured on {', '.join(map(str, shapes))}")
    runs: list[list[Any]] = []  # [route, first grid T, last grid T]
    for t, r in picks:
        if runs and runs[-1][0] == r:
            runs[-1][2] = t
        else:
            runs.append([r, t, t])
    rep = shapes[0]
    out: list[tuple[str, int, int | None]] = []
    lo = 1
    for i, (r, _, t_last) in enumerate(runs):
        cap = last_t(r, rep, cc)
        if i + 1 < len(runs):
            t_next = runs[i + 1][1]
            # Past its edge the earlier route runs another tile, one not measured there: the
            # sweep at 3c02416 found dec_q at T = 17 ... 19 (up to the midpoint 19 of 16 and
            # 24) 1.03-3.6x slower than the next route at 20 on nine shapes
            # (docs/perf/decode_h200.md). An edge past the midpoint leaves the midpoint.
            hi = min(max(math.isqrt(t_last * t_next), t_last), t_next - 1)
            edge = first_step(r, shapes, t_last, t_next - 1, cc)
            hi = hi if edge is None else min(hi, edge)
            hi = hi if cap is None else min(hi, cap)
        else:
            hi = cap
        out.append((r, lo, hi))
        if hi is None:
            break
        lo = hi + 1
    if out[-1][2] is not None:
        # The last grid winner stops short of the kernels' T range: after it, the route
        # measured fastest at the largest grid T among those that run any T.
        out.append((_any_t_route(rep, grid, measured, cc), out[-1][2] + 1, None))
    return tuple(out)


def _any_t_route(s: Shape, grid: Sequence[int], measured: Measured, cc: int) -> str:
    for t in reversed(grid):
        m = measured.get((s, t)) or {}
        fit = [r for r in sorted(m, key=m.__getitem__) if last_t(r, s, cc) is None]
        if fit:
            return fit[0]
    raise ValueError(f"no route that runs every T was measured on {s}")


def synthesize(
    measured: Measured, cc: int, grid: Sequence[int] = T_GRID
) -> tuple[tuple[Route, ...], dict[str, Any]]:
    """The table's rows and evidence from the measurements (one evidence entry a format)."""
    rows: list[Route] = []
    evidence: dict[str, Any] = {}
    ns, ks = _spans(N_EDGES), _spans(K_EDGES)
    for q in QType:
        shapes = sorted({s for s, _ in measured if s.qtype is q}, key=_order)
        if not shapes:
            continue
        key = f"tune-{q.value}"
        cells: dict[tuple[int, int], list[Shape]] = {}
        for s in shapes:
            cells.setdefault((_cell(s.n, N_EDGES), _cell(s.k, K_EDGES)), []).append(s)
        segs: dict[tuple[int, int], Segments] = {}
        for i in range(len(ns)):
            for j in range(len(ks)):
                # The cell itself where it has shapes, else the nearest that has.
                near = min(cells, key=lambda c: (abs(c[0] - i) + abs(c[1] - j), -c[0], -c[1]))
                segs[(i, j)] = segments(cells[near], grid, measured, cc)
        for (n0, n1), (k0, k1), sg in _merge(segs, ns, ks):
            rows += [Route(r, t0, t1, frozenset({q}), Policy.A16, n0, n1, k0, k1, key)
                     for r, t0, t1 in sg]  # fmt: skip
        evidence[key] = {"finding": _finding(q, cells, grid, measured, cc)}
    return tuple(rows), evidence


def _merge(
    segs: Mapping[tuple[int, int], Segments],
    ns: list[tuple[int, int | None]],
    ks: list[tuple[int, int | None]],
) -> list[tuple[tuple[int, int | None], tuple[int, int | None], Segments]]:
    """Ladder cells as rectangles: equal neighbours along K merged, then equal N rows."""
    by_n: list[list[tuple[int, int, Segments]]] = []
    for i in range(len(ns)):
        groups: list[list[Any]] = []
        for j in range(len(ks)):
            if groups and groups[-1][2] == segs[(i, j)]:
                groups[-1][1] = j
            else:
                groups.append([j, j, segs[(i, j)]])
        by_n.append([(a, b, s) for a, b, s in groups])
    out = []
    i = 0
    while i < len(ns):
        i2 = i
        while i2 + 1 < len(ns) and by_n[i2 + 1] == by_n[i]:
            i2 += 1
        for j0, j1, sg in by_n[i]:
            out.append(((ns[i][0], ns[i2][1]), (ks[j0][0], ks[j1][1]), sg))
        i = i2 + 1
    return out


def _finding(
    q: QType, cells: Mapping[Any, list[Shape]], grid: Sequence[int], m: Measured, cc: int
) -> str:
    parts = []
    for shapes in cells.values():
        for s in shapes:
            sg = segments([s], grid, m, cc)
            parts.append(f"{s} " + ", ".join(f"{r} {_span(a, b)}" for r, a, b in sg))
    return (
        f"{q.name}: each N x K cell of the ladders takes, T by T, the route fastest over its "
        f"measured shapes (nearest cell where it has none). Alone, each shape would take: "
        + "; ".join(parts)
        + "."
    )


def _span(a: int, b: int | None) -> str:
    return f"T >= {a}" if b is None else f"T {a}-{b}"


# --- the record ------------------------------------------------------------------------


def record_doc(measured: Measured, meta: Mapping[str, Any]) -> dict[str, Any]:
    pts = [
        {"qtype": s.qtype.value, "n": s.n, "k": s.k, "t": t,
         "us": {r: round(v, 4) for r, v in sorted(m.items())}}
        for (s, t), m in sorted(measured.items(), key=lambda it: (_order(it[0][0]), it[0][1]))
    ]  # fmt: skip
    return {"schema": RECORD_SCHEMA, "version": 1, **meta, "points": pts}


def read_record(doc: Any, where: str) -> tuple[dict[tuple[Shape, int], dict[str, float]], Any]:
    """(measurements, the record) from a tune record; ValueError naming ``where``."""
    try:
        if doc.get("schema") != RECORD_SCHEMA or doc.get("version") != 1:
            raise ValueError(f"expected schema {RECORD_SCHEMA!r} version 1")
        out: dict[tuple[Shape, int], dict[str, float]] = {}
        for p in doc["points"]:
            us = {str(r): float(v) for r, v in p["us"].items()}
            if not us or any(r not in LAUNCHERS or not v > 0 for r, v in us.items()):
                raise ValueError(f"point {p}: expected route times > 0")
            out[(Shape(QType(p["qtype"]), int(p["n"]), int(p["k"])), int(p["t"]))] = us
        return out, doc
    except (KeyError, TypeError, AttributeError, ValueError) as e:
        raise ValueError(f"{where}: not a tune record ({e})") from None


def kept_ts(old: Measured, shapes: Iterable[Shape], grid: Sequence[int]) -> list[int]:
    """The T of an earlier record outside the new grid's range, on these shapes."""
    lo, hi, wanted = min(grid), max(grid), set(shapes)
    return sorted({t for s, t in old if s in wanted and not lo <= t <= hi})


def kept_times(
    old: Measured,
    rec: Mapping[str, Any],
    where: str,
    cc: int,
    gpu: str,
    shapes: Iterable[Shape],
    grid: Sequence[int],
) -> tuple[dict[tuple[Shape, int], dict[str, float]], dict[str, Any]]:
    """An earlier record's times for a re-tune of part of the grid (say T <= 64 after a
    decode change): every T outside the new grid's range, on every shape tuned now. ``old``
    and ``rec`` are read_record's of the record named ``where``.

    (the times, what was kept). ValueError naming ``where``: another GPU model, or a shape
    the record lacks at a kept T (its ladder cell would lose those T: tune the whole grid).
    The routes that could run a kept point but have no time there (a route added since)
    are listed as ``unmeasured``: the table cannot pick them at those T.
    """
    if int(rec.get("cc", -1)) != cc or rec.get("gpu") != gpu:
        raise ValueError(
            f"{where}: measured on {rec.get('gpu')} (sm_{rec.get('cc')}), expected {gpu} (sm_{cc})"
        )
    shapes = sorted(set(shapes), key=_order)
    ts = kept_ts(old, shapes, grid)
    lacking = [s for s in shapes if any((s, t) not in old for t in ts)]
    if lacking:
        names = ", ".join(f"{s.qtype.value} {s}" for s in lacking[:4])
        raise ValueError(
            f"{where}: no times for {len(lacking)} shape(s) at T {ts} ({names}): tune the whole grid"
        )
    times = {(s, t): dict(old[(s, t)]) for s in shapes for t in ts}
    unmeasured = sorted(
        {r for (s, t), us in times.items() for r in candidates(s, t, cc) if r not in us}
    )
    kept: dict[str, Any] = {
        "record": where, "commit": rec.get("commit"), "created": rec.get("created"), "t": ts,
        "unmeasured": unmeasured, **({"kept": rec["kept"]} if "kept" in rec else {}),
    }  # fmt: skip
    return times, kept


def table_from(measured: Measured, meta: Mapping[str, Any], data: str) -> RouteTable:
    """The tuned table: rows and evidence from ``measured``; ``data`` names the record."""
    cc = int(meta["cc"])
    grid = sorted({t for _, t in measured})
    rows, found = synthesize(measured, cc, grid)
    kept = meta.get("kept")
    kept = kept if kept and kept["t"] else None  # a grid over the record's whole range keeps none
    sources = [data] + ([kept["record"]] if kept and kept["record"] != data else [])
    evidence = {k: {"data": sources, "finding": v["finding"]} for k, v in sorted(found.items())}
    tuned = {
        "gpu": meta["gpu"],
        "sms": meta["sms"],
        "method": f"ninfer-regress tune, {meta['rounds']} rounds of fresh processes, "
        f"{meta['statistic']}, T grid {grid[0]}-{grid[-1]} ({len(grid)} values)"
        + (
            f"; T {', '.join(map(str, kept['t']))} kept from {kept['record']} "
            f"({str(kept['commit'])[:7]}, {kept['created']})"
            + (
                f", where {', '.join(kept['unmeasured'])} had no time"
                if kept.get("unmeasured")
                else ""
            )
            if kept
            else ""
        ),
        "commit": meta["commit"],
        "kernel_fingerprint": meta["kernel_fingerprint"],
        "created": meta["created"],
    }
    return RouteTable(cc, rows, evidence, tuned)
