"""The route selector: one declarative table per architecture (DESIGN §6).

Dispatch, the conformance tests (seams and neighbours) and docs/routes.md all read
these tables; nothing else encodes a route boundary.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import TypedDict

from ..errors import UnsupportedProblem
from ..formats.qtype import QType
from ..policy import Policy
from . import dec_q, dq_gemm, dq_rs
from .launcher import Launcher
from .problem import Problem

ALL_QTYPES = frozenset(QType)


@dataclass(frozen=True)
class Route:
    """A host launcher for one regime. ``name`` is kernels/<name>.cu and routes/<name>.py."""

    name: str
    t_min: int
    t_max: int | None  # inclusive; None: unbounded
    qtypes: frozenset[QType] = ALL_QTYPES
    compute: Policy = Policy.A16
    n_min: int = 1  # weight rows N this entry serves, inclusive
    n_max: int | None = None
    k_min: int = 1  # weight columns K, inclusive
    k_max: int | None = None
    note: str = field(default="", compare=False)

    def supports(self, p: Problem) -> bool:
        return (
            p.qtype in self.qtypes
            and p.compute is self.compute
            and p.t >= self.t_min
            and (self.t_max is None or p.t <= self.t_max)
            and p.n >= self.n_min
            and (self.n_max is None or p.n <= self.n_max)
            and p.k >= self.k_min
            and (self.k_max is None or p.k <= self.k_max)
        )

    @property
    def launcher(self) -> Launcher:
        return LAUNCHERS[self.name]


LAUNCHERS: dict[str, Launcher] = {m.LAUNCHER.name: m.LAUNCHER for m in (dec_q, dq_gemm, dq_rs)}

_PORTABLE = (
    Route("dec_q", 1, dec_q.T_MAX, note="tensor-core GEMV: W decoded from global into A fragments"),
    Route(
        "dq_gemm",
        dec_q.T_MAX + 1,
        None,
        note="weight band decoded to BF16 in the workspace, then cuBLAS",
    ),
)

# sm_90, measured on the H200 (docs/perf/decode_h200/crossover.json, both routes timed at
# T = 17 ... 64 on the suites' shapes): at T = 33 ... 64 decoding the weight and calling
# cuBLAS beats dec_q's wide-token tile 1.4-4x on every weight with N <= 8192 (all five
# quantized formats measured; crossover_q5_q6_nvfp4.json: 0.24-0.63), where the tile
# makes too few blocks (80 at N = 5120); at N >= 14336 dec_q stays ahead. BF16 (whose
# "decode" is a copy) gains only on small weights: 0.48-0.98 of dec_q's time for
# N <= 5120, 1.05-1.14 at [6144,5120], 1.4-1.7 at N >= 14336.
_N_SPLIT = 8192
_BF16 = frozenset({QType.BF16})
_BF16_N = 5120
_DQ_EARLY = ALL_QTYPES - {QType.BF16}
# At T = 17 ... 32 (the same files; crossover_q5_q6_nvfp4.json for the other three
# formats): decode + cuBLAS wins on every W8 weight with N <= 6144 (0.39-0.98 of dec_q's
# time: 2.5x on [2048,4096], 2-8 % on [6144,5120], 1.3x on [5120,17408]) and, for every
# other format, on weights with N <= 3456 (0.54-0.98); at N = 4304 / 4608 those tie or
# lose at T = 17 (0.97-1.11).
_W8 = frozenset({QType.W8})
_W8_N, _SMALL_N = 6144, 3456
# T >= 65 on sm_90: dq_rs (one kernel, the weight decoded into wgmma's registers) against
# dq_gemm (decode to BF16 + cuBLAS), both timed on the suites' 13 shapes, every format,
# T = 65 ... 1024 (docs/perf/prefill_h200/crossover_dq_rs_persistent_b04da00.json: dq_rs
# on its persistent grid; ratios are dq_rs / dq_gemm time), and again past T = 256 with
# the fragment-order kernel (b9c0e3b's; crossover_long_*_63122b2.json: the big and mid
# weights and the 27B head [248320,5120], T = 384 ... 2048; crossover_heads_e353264.json:
# the K = 2048 heads, T = 1024 ... 2048):
# - "Big" weights, N >= 14336 or (N >= 4608 and K >= 10240): dq_rs wins at T <= 256 in
#   every format (0.33-0.67) and at T = 768 / 1024 (0.64-0.87 / 0.75-0.96, W8 the
#   highest). At T = 1536 every format but W8 still wins (0.86-0.99); W8 ties or loses
#   (1.00-1.04). At T = 2048 the K = 2048 heads tie or lose in every format but NVFP4
#   (0.99-1.11; NVFP4 0.94-0.95) and the others tie or win (0.89-1.01; W8 1.02-1.07).
#   So dq_rs to T = 1536 (W8 to 1024 until its decode's PRMT form, below). (Since then
#   [16384,5120], and [14336,5120] up to T = 512, run one whole tile per block, as at
#   2210cc1: DP_FILL and SK_LONG in routes/dq_rs.py; the same times or lower.)
# - "Mid" weights, 4608 <= N < 14336 with 4608 <= K < 10240 ([4608,4608], [5120,6144],
#   [6144,5120]): every format wins or ties at T <= 256 (0.52-0.95; [4608,4608] at
#   T = 192 / 256 0.98-1.06 but NVFP4 and BF16), NVFP4 and BF16 to 1024 too (0.75-1.01).
#   Q4, Q5, Q6 win or tie at T = 512 / 768 (0.80-1.00) and tie at 384 / 1024 (0.93-1.09,
#   most 0.95-1.01): dq_rs to 1024. W8 wins or ties at 512 / 768 (0.87-1.00), ties at
#   384 (0.98-1.09) and lost at 1024 (1.00-1.05) until its PRMT decode (below). The ties
#   at T = 384 include [4608,4608]'s Q4 and W8 at 1.09 (W8 1.04 since the PRMT decode; the
#   suites' vision_merger_fc1 weight; 257 ... 383 unmeasured): kept for one boundary per
#   format rather than a third T range. (At
#   T = 1024 a [5120,6144] grid is two waves of 128 x 256 tiles, the second 28 of 132:
#   768 is one.)
# - BF16 with 4608 <= N < 14336 and K < 4608 keeps 2a4c83c's entry (T <= 256; no
#   suite shape measures it).
# - Smaller weights (N <= 4304, or K <= 4096): dq_rs loses (1.00-2.5; a call costs it at
#   least ~16 us), but for NVFP4 / BF16 [2048,4096] at T <= 128 (0.91-0.99), left to
#   dq_gemm.
# Past those T, dq_gemm.
_RS_N, _RS_MID, _RS_BIG_K = 14336, 4608, 10240
# W8 since its decode's PRMT form (common.cuh's i8_float; before it, to 1024 on big
# weights and 768 on mid ones): the same crossover for W8 alone, in dd08940's tree (the
# PRMT decode and split_blocks' grids; docs/perf/prefill_h200/crossover_w8_prmt_*.json),
# reads 0.95-0.98 of dq_gemm's time at T = 1536 on the five big weights with K >= 5120 and
# 0.92-0.98 at T = 1024 on the three mid ones ([4608,4608] at T = 384: 1.04, the tie kept
# above). W8 on the K = 2048 heads, which lost at T = 1536 before it (1.02 / 1.04,
# crossover_heads_e353264), wins there since (with 257fb0c's kernel: 0.79 / 0.87 at
# T = 1024 / 1536 on [131072,2048], 0.82 / 0.89 on [248320,2048];
# crossover_heads_w8_257fb0c.json), so the heads follow the other big weights.
_RS_BIG_T = 1536  # dq_rs's last T on big weights
_RS_MID_T = 1024  # the same on mid weights
_QUANT = ALL_QTYPES - {QType.BF16}
_RS = "fused wgmma, weight decoded into registers (sm_90a)"
_DQ = "decode + cuBLAS"


class _Box(TypedDict, total=False):
    n_min: int
    n_max: int
    k_min: int
    k_max: int


def _minus(r: Route, cut: Route) -> list[Route]:
    """r's entries for the problems it serves outside ``cut``'s box (its T range, formats,
    N and K): rectangles in (N, K) with r's name and note. r's T range must lie inside
    cut's or apart from it (the early tables' T ranges do)."""
    inside_t = cut.t_min <= r.t_min and (
        cut.t_max is None or (r.t_max is not None and r.t_max <= cut.t_max)
    )
    apart_t = (cut.t_max is not None and r.t_min > cut.t_max) or (
        r.t_max is not None and r.t_max < cut.t_min
    )
    if apart_t:
        return [r]
    if not inside_t:
        raise ValueError(f"{r} straddles the T range of {cut}")
    inf = 1 << 62
    rn, rk = (r.n_min, r.n_max or inf), (r.k_min, r.k_max or inf)
    cn, ck = (cut.n_min, cut.n_max or inf), (cut.k_min, cut.k_max or inf)
    q = r.qtypes & cut.qtypes
    if not q or rn[0] > cn[1] or cn[0] > rn[1] or rk[0] > ck[1] or ck[0] > rk[1]:
        return [r]
    boxes = [  # (N range, K range) pieces of r's rectangle outside cut's
        ((rn[0], cn[0] - 1), rk),
        ((cn[1] + 1, rn[1]), rk),
        ((max(rn[0], cn[0]), min(rn[1], cn[1])), (rk[0], ck[0] - 1)),
        ((max(rn[0], cn[0]), min(rn[1], cn[1])), (ck[1] + 1, rk[1])),
    ]
    out = [replace(r, qtypes=r.qtypes - q)] if r.qtypes - q else []
    for (n0, n1), (k0, k1) in boxes:
        if n0 <= n1 and k0 <= k1:
            out.append(
                replace(
                    r,
                    qtypes=q,
                    n_min=n0,
                    n_max=None if n1 == inf else n1,
                    k_min=k0,
                    k_max=None if k1 == inf else k1,
                )
            )
    return out


def _carve(routes: tuple[Route, ...], cuts: tuple[Route, ...]) -> tuple[Route, ...]:
    """``cuts`` (disjoint) over ``routes``: each cut, and the routes outside all of them."""
    for cut in cuts:
        routes = tuple(piece for r in routes for piece in _minus(r, cut))
    # Pieces that differ only in their formats (cut by two cuts' format sets) as one entry,
    # with each piece's note (notes take no part in equality).
    merged: dict[Route, Route] = {}
    for r in routes:
        key = replace(r, qtypes=ALL_QTYPES)
        if key in merged:
            m = merged[key]
            note = m.note if r.note in m.note.split("; ") else f"{m.note}; {r.note}"
            r = replace(r, qtypes=m.qtypes | r.qtypes, note=note)
        merged[key] = r
    return (*cuts, *merged.values())


_BIG_N = _Box(n_min=_RS_N)  # N >= 14336
_BIG_K = _Box(n_min=_RS_MID, n_max=_RS_N - 1, k_min=_RS_BIG_K)  # 4608 <= N < 14336, K >= 10240
_MID = _Box(n_min=_RS_MID, n_max=_RS_N - 1, k_min=_RS_MID, k_max=_RS_BIG_K - 1)
_LOW_K = _Box(n_min=_RS_MID, n_max=_RS_N - 1, k_max=_RS_MID - 1)
_SM90_PREFILL = (
    # big weights (N >= 14336, or 4608 <= N < 14336 with K >= 10240) and mid weights
    *(
        r
        for box, t_last in ((_BIG_N, _RS_BIG_T), (_BIG_K, _RS_BIG_T), (_MID, _RS_MID_T))
        for r in (
            Route("dq_rs", 65, t_last, **box, note=_RS),
            Route("dq_gemm", t_last + 1, None, **box, note=_DQ),
        )
    ),
    # 4608 <= N < 14336 with K < 4608
    Route("dq_rs", 65, 256, _BF16, **_LOW_K, note=_RS),
    Route("dq_gemm", 257, None, _BF16, **_LOW_K, note=_DQ),
    Route("dq_gemm", 65, None, _QUANT, **_LOW_K, note=_DQ),
    # N < 4608
    Route("dq_gemm", 65, None, n_max=_RS_MID - 1, note=_DQ),
)
# T = 17 ... 64 on weights with N >= 4608 and K >= 4608: dq_rs (one 128-token tile, its
# time flat in T) against the routes above, timed on the suites' 13 shapes, every format,
# each output checked against the other route's (docs/perf/prefill_h200/: T = 33 / 48 /
# 64 in dq_rs_tiles_cw3_4fd2742.json, its rs_1x2 column: the kernel's main loop as
# landed, its output staging swizzled differently; T = 9 ... 64 on the 8 shapes with
# N, K >= 4608 in dq_rs_tiles_T9_64_37049e0.json, the landed kernel, whose T = 33 / 64
# times repeat 4fd2742's within 3 %; ratios are dq_rs's time / the table route's):
# - T = 33 ... 64: 0.35-0.77 on every such weight and format. On the smaller weights it
#   loses (1.01-1.71: a call costs it at least ~15 us) but for NVFP4 / BF16 [2048,4096]
#   (0.89-0.97), left as they were, as at T >= 65.
# - T = 17 ... 32, N < 14336: 0.40-0.89 in every format.
# - T = 17 ... 32, N >= 14336: NVFP4 and BF16 0.67-0.96. Q4, Q5, Q6 and W8 tie or lose at
#   T = 17 and 24 on [14336,5120] and [16384,5120] (1.00-1.06; [34816,5120] 0.82-1.11)
#   and win at T = 32 (0.76-0.99): they keep dec_q to T = 32.
# - T <= 16: dec_q's tiles, left as they are (dq_rs wins there on the K >= 10240 weights
#   but BF16, 0.60-0.95, and loses on the quantized N >= 14336 ones, 1.12-1.49).
# Big-N weights with K < 4608 (the K = 2048 heads) were not measured at T <= 64: they
# keep the routes before it.
_EARLY_RS_K = _RS_MID
_RS_WIDE = frozenset({QType.NVFP4, QType.BF16})  # dq_rs from T = 17 on N >= 14336
_RS_NARROW = ALL_QTYPES - _RS_WIDE
_SM90_EARLY = _carve(
    (  # before dq_rs (docs/perf/decode_h200/crossover*.json)
        Route("dq_gemm", 17, 32, _W8, n_max=_W8_N, note="W8, N <= 6144: decode + cuBLAS"),
        Route("dec_q", 17, 32, _W8, n_min=_W8_N + 1, note="W8, large N"),
        Route(
            "dq_gemm", 17, 32, ALL_QTYPES - _W8, n_max=_SMALL_N, note="N <= 3456: decode + cuBLAS"
        ),
        Route("dec_q", 17, 32, ALL_QTYPES - _W8, n_min=_SMALL_N + 1, note="larger N"),
        Route(
            "dq_gemm", 33, dec_q.T_MAX, _DQ_EARLY, n_max=_N_SPLIT, note="small N: decode + cuBLAS"
        ),
        Route(
            "dec_q", 33, dec_q.T_MAX, _DQ_EARLY, n_min=_N_SPLIT + 1, note="large N: wide-token tile"
        ),
        Route(
            "dq_gemm", 33, dec_q.T_MAX, _BF16, n_max=_BF16_N, note="BF16, N <= 5120: decode + GEMM"
        ),
        Route("dec_q", 33, dec_q.T_MAX, _BF16, n_min=_BF16_N + 1, note="BF16, larger N: wide tile"),
    ),
    (
        Route(
            "dq_rs", 17, dec_q.T_MAX, n_min=_RS_MID, n_max=_RS_N - 1, k_min=_EARLY_RS_K, note=_RS
        ),
        Route("dq_rs", 17, dec_q.T_MAX, _RS_WIDE, n_min=_RS_N, k_min=_EARLY_RS_K, note=_RS),
        Route("dq_rs", 33, dec_q.T_MAX, _RS_NARROW, n_min=_RS_N, k_min=_EARLY_RS_K, note=_RS),
    ),
)
_SM90 = (
    Route("dec_q", 1, 16, note="tensor-core GEMV: W decoded from global into A fragments"),
    *_SM90_EARLY,
    *_SM90_PREFILL,
)

# Keyed by the lowest compute capability each table serves; a device uses the table of
# the largest key <= its own. sm_80, sm_100 and sm_120 use the portable routes (their
# crossover is not measured); sm_90 has its own entries, and only sm_90 may run dq_rs
# (sm_90a code: without the 100 key, sm_100 would have fallen into the sm_90 table).
ROUTE_TABLES: Mapping[int, tuple[Route, ...]] = MappingProxyType(
    {
        80: _PORTABLE,
        90: _SM90,
        100: _PORTABLE,
        120: _PORTABLE,
    }
)

MIN_CC = min(ROUTE_TABLES)


Tables = Mapping[int, tuple[Route, ...]]


def table_for(cc: int, tables: Tables = ROUTE_TABLES) -> tuple[Route, ...]:
    keys = [k for k in tables if k <= cc]
    if not keys:
        raise UnsupportedProblem(
            f"compute capability {cc // 10}.{cc % 10} is below the oldest supported "
            f"(sm_{min(tables, default=MIN_CC)})"
        )
    return tables[max(keys)]


def select(p: Problem, tables: Tables = ROUTE_TABLES) -> Route:
    """The first entry of the device's table that serves ``p``; its launcher must be able
    to run it (a table that names a route for problems its kernel cannot run is a bug in
    the table, not a reason to fall through to another row)."""
    for route in table_for(p.cc, tables):
        if route.supports(p):
            if not route.launcher.supports(p):
                raise UnsupportedProblem(
                    f"the sm_{p.cc} table sends {p.qtype.name} N={p.n} K={p.k} T={p.t} to "
                    f"{route.name}, which cannot run it"
                )
            return route
    raise UnsupportedProblem(
        f"no route for {p.qtype.name} policy={p.policy.value} N={p.n} K={p.k} T={p.t} on sm_{p.cc}"
    )


def seams(cc: int, tables: Tables = ROUTE_TABLES) -> list[int]:
    """Both sides of every T where the route or its kernel tile changes, plus a neighbour each.

    The conformance suite tests these; a launcher lists the last T of each inner tile in
    ``t_edges()`` (a tile change inside a route is a seam too).
    """
    out: set[int] = set()
    for r in table_for(cc, tables):
        edges = [r.t_min - 1, r.t_max, *r.launcher.t_edges()]
        for edge in edges:
            if edge is not None and edge >= 1:
                out.update(t for t in (edge - 1, edge, edge + 1, edge + 2) if t >= 1)
    return sorted(out)


def fingerprint() -> str:
    """Hash of kernels/ plus the selector tables: "route code changed" vs "same code slower"."""
    from ..runtime.sources import kernels_digest

    h = hashlib.sha256(kernels_digest().encode())
    # Canonical text only: repr() of a frozenset follows the per-process string-hash
    # seed, which made the fingerprint differ between two runs of the same code.
    for cc, routes in sorted(ROUTE_TABLES.items()):
        for r in routes:
            qtypes = ",".join(sorted(q.value for q in r.qtypes))
            h.update(
                f"{cc}:{r.name}:{r.t_min}:{r.t_max}:{qtypes}:{r.compute.value}:"
                f"{r.n_min}:{r.n_max}:{r.k_min}:{r.k_max};".encode()
            )
    for name in sorted(LAUNCHERS):
        h.update(repr(LAUNCHERS[name].instances()).encode())
        # Host-side choices that change what runs without touching kernels/ (tile per T
        # range, band size): canonical text, like the tables.
        h.update(LAUNCHERS[name].tuning.text().encode())
    return h.hexdigest()[:16]
