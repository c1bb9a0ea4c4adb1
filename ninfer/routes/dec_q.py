"""Launcher of kernels/dec_q.cu: decode-regime tensor-core GEMV, T <= 64.

One block = KW warps on the same 16*MT weight rows, each warp a disjoint run of 64-k
slabs; the T tile is 8*NT tokens. The tile per T range is data (``TILES``), chosen by
measurement on the H200 (docs/perf/decode_h200.md).
"""

from __future__ import annotations

from dataclasses import dataclass

from .problem import QTYPE_ID, Problem

NAME = "dec_q"
T_MAX = 64


@dataclass(frozen=True)
class Tile:
    t_max: int  # the largest T this tile serves (inclusive); the T tile is 8 * nt
    nt: int  # 8-token MMA column tiles
    mt: int  # 16-row MMA tiles per warp
    kw: int  # warps per block, splitting K
    u: int  # slabs loaded before the first use (loads in flight per warp)

    @property
    def rows(self) -> int:
        return 16 * self.mt

    @property
    def threads(self) -> int:
        return 32 * self.kw


TILES: tuple[Tile, ...] = (
    Tile(8, 1, 1, 4, 4),
    Tile(16, 2, 1, 4, 4),
    Tile(32, 4, 1, 4, 2),
    Tile(64, 8, 1, 4, 1),
)


T_EDGES: tuple[int, ...] = tuple(tl.t_max for tl in TILES[:-1])


def tile(t: int) -> Tile:
    for tl in TILES:
        if t <= tl.t_max:
            return tl
    return TILES[-1]


def expr(qtype_id: int, tl: Tile) -> str:
    return f"dec_q<{qtype_id}, {tl.nt}, {tl.mt}, {tl.kw}, {tl.u}>"


def instance(p: Problem) -> str:
    return expr(QTYPE_ID[p.qtype], tile(p.t))


INSTANCES: tuple[str, ...] = tuple(expr(q, tl) for q in sorted(QTYPE_ID.values()) for tl in TILES)


def block(p: Problem) -> tuple[int, int, int]:
    return (tile(p.t).threads, 1, 1)


def grid(p: Problem) -> tuple[int, int, int]:
    tl = tile(p.t)
    return ((p.n + tl.rows - 1) // tl.rows, (p.t + 8 * tl.nt - 1) // (8 * tl.nt), 1)


def workspace_bytes(p: Problem) -> int:
    return 0
