"""The route selector: one declarative table per architecture (DESIGN §6).

Dispatch, the conformance tests (seams and neighbours) and docs/routes.md all read
these tables; nothing else encodes a route boundary.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from types import ModuleType
from typing import TypedDict

from ..errors import UnsupportedProblem
from ..formats.qtype import QType
from ..policy import Policy
from . import dec_q, dq_gemm, dq_rs
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
    def launcher(self) -> ModuleType:
        return LAUNCHERS[self.name]


LAUNCHERS: dict[str, ModuleType] = {m.NAME: m for m in (dec_q, dq_gemm, dq_rs)}

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
# dq_gemm (decode to BF16 + cuBLAS), both timed on the suites' 13 shapes, every format
# (docs/perf/prefill_h200/crossover_dq_rs_051a952.json, T = 65 ... 512;
# crossover_dq_rs_257_512_1c5b4a8.json, T = 288 ... 512 on the three N >= 14336 weights
# after the tail-box change). dq_rs makes one block per 128 rows x 128 or 256 tokens, K
# shared by up to 4 blocks when the tiles alone leave over half the SMs idle; its time
# steps with whole waves of blocks:
# - N >= 14336, T <= 256, every format: 0.34-0.71 of dq_gemm's time (112 - 272 row
#   blocks: 1-3 waves of 256-token tiles). T = 257 ... 512 is a second wave of the same
#   tiles (dq_rs flat, ~122-128 us on [14336,5120] Q4), while dq_gemm grows with T: Q4,
#   NVFP4 and BF16 win at every T measured (0.64-0.96); Q5, Q6 and W8, whose decode is
#   dearer, lose or tie at T = 288 (0.94-1.11) and 384 (0.87-1.05) and win at 448 / 512
#   (0.78-0.94). Past 512 a third wave: T = 640 1.00 (Q4), T = 896 1.00-1.05.
# - 4608 <= N < 14336 with K >= 4608 ([4608,4608], [6144,5120], [5120,6144 ... 17408]),
#   T <= 128, split K: 0.41-0.98 (Q5 [4608,4608] the 0.98). At T = 129 ... 256 (two
#   128-token tiles, no split) Q4 and NVFP4 keep winning on N >= 5120 (0.76-0.93) and
#   tie at [4608,4608] (0.95-1.04); Q5, Q6 and W8 lose or tie there (0.94-1.36), so they
#   go to dq_gemm below N = 8192. On [8448 / 11264 / 12288, 5120]
#   (crossover_dq_rs_gap_b7bd6db.json: Q4, Q6, W8, NVFP4, T = 65 ... 256) dq_rs wins
#   everywhere (0.45-0.81; Q6 and W8 at T > 128 0.64-0.73).
# - BF16 (whose dq_gemm pays a full copy of the weight), 4608 <= N < 14336, T <= 256:
#   0.39-0.97.
# - Smaller weights (N <= 4304 or K <= 4096): dq_rs mostly loses (0.94-1.98; a call
#   costs it at least ~16 us).
_RS_N, _RS_MID, _RS_DEAR_N = 14336, 4608, 8192
_QUANT = ALL_QTYPES - {QType.BF16}
_RS_CHEAP = frozenset({QType.Q4, QType.NVFP4})
_RS_DEAR = _QUANT - _RS_CHEAP  # Q5, Q6, W8
_RS = "fused wgmma, weight decoded into registers (sm_90a)"
_DQ = "decode + cuBLAS"


class _NRange(TypedDict):
    n_min: int
    n_max: int


_MID = _NRange(n_min=_RS_MID, n_max=_RS_N - 1)  # 4608 <= N < 14336
_SM90_PREFILL = (
    # N >= 14336
    Route("dq_rs", 65, 512, _RS_CHEAP | _BF16, n_min=_RS_N, note=_RS),
    Route("dq_rs", 65, 256, _RS_DEAR, n_min=_RS_N, note=_RS),
    Route("dq_gemm", 257, 384, _RS_DEAR, n_min=_RS_N, note=_DQ),
    Route("dq_rs", 385, 512, _RS_DEAR, n_min=_RS_N, note=_RS),
    Route("dq_gemm", 513, None, n_min=_RS_N, note=_DQ),
    # 4608 <= N < 14336
    Route("dq_rs", 65, 128, _QUANT, **_MID, k_min=_RS_MID, note=_RS + ", split K"),
    Route("dq_rs", 129, 256, _RS_CHEAP, **_MID, k_min=_RS_MID, note=_RS),
    Route("dq_rs", 129, 256, _RS_DEAR, n_min=_RS_DEAR_N, n_max=_RS_N - 1, k_min=_RS_MID, note=_RS),
    Route(
        "dq_gemm", 129, 256, _RS_DEAR, n_min=_RS_MID, n_max=_RS_DEAR_N - 1, k_min=_RS_MID, note=_DQ
    ),
    Route("dq_gemm", 65, 256, _QUANT, **_MID, k_max=_RS_MID - 1, note=_DQ),
    Route("dq_rs", 65, 256, _BF16, **_MID, note=_RS),
    # N < 4608, and every T > 256 below N = 14336
    Route("dq_gemm", 65, 256, n_max=_RS_MID - 1, note=_DQ),
    Route("dq_gemm", 257, None, n_max=_RS_N - 1, note=_DQ),
)
_SM90 = (
    Route("dec_q", 1, 16, note="tensor-core GEMV: W decoded from global into A fragments"),
    Route("dq_gemm", 17, 32, _W8, n_max=_W8_N, note="W8, N <= 6144: decode + cuBLAS"),
    Route("dec_q", 17, 32, _W8, n_min=_W8_N + 1, note="W8, large N"),
    Route("dq_gemm", 17, 32, ALL_QTYPES - _W8, n_max=_SMALL_N, note="N <= 3456: decode + cuBLAS"),
    Route("dec_q", 17, 32, ALL_QTYPES - _W8, n_min=_SMALL_N + 1, note="larger N"),
    Route("dq_gemm", 33, dec_q.T_MAX, _DQ_EARLY, n_max=_N_SPLIT, note="small N: decode + cuBLAS"),
    Route("dec_q", 33, dec_q.T_MAX, _DQ_EARLY, n_min=_N_SPLIT + 1, note="large N: wide-token tile"),
    Route("dq_gemm", 33, dec_q.T_MAX, _BF16, n_max=_BF16_N, note="BF16, N <= 5120: decode + GEMM"),
    Route("dec_q", 33, dec_q.T_MAX, _BF16, n_min=_BF16_N + 1, note="BF16, larger N: wide tile"),
    *_SM90_PREFILL,
)

# Keyed by the lowest compute capability each table serves; a device uses the table of
# the largest key <= its own. sm_80, sm_100 and sm_120 use the portable routes (their
# crossover is not measured); sm_90 has its own entries, and only sm_90 may run dq_rs
# (sm_90a code: without the 100 key, sm_100 would have fallen into the sm_90 table).
ROUTE_TABLES: dict[int, tuple[Route, ...]] = {
    80: _PORTABLE,
    90: _SM90,
    100: _PORTABLE,
    120: _PORTABLE,
}

MIN_CC = min(ROUTE_TABLES)


def table_for(cc: int) -> tuple[Route, ...]:
    keys = [k for k in ROUTE_TABLES if k <= cc]
    if not keys:
        raise UnsupportedProblem(
            f"compute capability {cc // 10}.{cc % 10} is below the oldest supported (sm_{MIN_CC})"
        )
    return ROUTE_TABLES[max(keys)]


def select(p: Problem) -> Route:
    for route in table_for(p.cc):
        if route.supports(p):
            return route
    raise UnsupportedProblem(
        f"no route for {p.qtype.name} policy={p.policy.value} N={p.n} K={p.k} T={p.t} on sm_{p.cc}"
    )


def seams(cc: int) -> list[int]:
    """Both sides of every T where the route or its kernel tile changes, plus a neighbour each.

    The conformance suite tests these; a launcher lists the last T of each inner tile in
    ``T_EDGES`` (a tile change inside a route is a seam too).
    """
    out: set[int] = set()
    for r in table_for(cc):
        edges = [r.t_min - 1, r.t_max, *getattr(r.launcher, "T_EDGES", ())]
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
        h.update(repr(LAUNCHERS[name].INSTANCES).encode())
        # Host-side choices that change what runs without touching kernels/ (tile per T
        # range, band size): canonical text, like the tables.
        h.update(LAUNCHERS[name].TUNING.encode())
    return h.hexdigest()[:16]
