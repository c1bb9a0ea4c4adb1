"""Launcher of kernels/dec_q.cu: decode-regime tensor-core GEMV, T <= 64.

A block is ``wk`` k-groups x ``wr`` row-warps on 16*mt*wr weight rows and an 8*nt token
tile; weights and x stream through an ``s``-stage cp.async ring in dynamic shared
memory. The tile per T range is data (``TILES``), chosen by measurement on the H200
(docs/perf/decode_h200.md).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..formats.qtype import QType
from .problem import QTYPE_ID, Problem

NAME = "dec_q"
T_MAX = 64

# Shared-memory bytes of one ring stage (128 k) of one 16-row m-tile, per format:
# Dec<QT>::WBYTES in kernels/dec_q.cu (codes + high bits + scales).
WBYTES: dict[QType, int] = {
    QType.Q4: 1024 + 64,
    QType.Q5: 1024 + 256 + 64,
    QType.Q6: 1024 + 512 + 64,
    QType.W8: 2048 + 128,
    QType.NVFP4: 1024 + 128,
    QType.BF16: 4096,
}
XS = 272  # DEC_XS: bytes of one staged x row (128 k of BF16 + 16 bytes of padding)


@dataclass(frozen=True)
class Tile:
    t_max: int  # the largest T this tile serves (inclusive); the T tile is 8 * nt
    nt: int  # 8-token MMA column tiles
    mt: int  # 16-row MMA tiles per warp
    wr: int  # row-warps sharing one staged x tile
    wk: int  # k-groups splitting K (reduced in shared memory at the end)
    s: int  # ring stages (s - 1 in flight)

    @property
    def rows(self) -> int:
        return 16 * self.mt * self.wr

    @property
    def threads(self) -> int:
        return 32 * self.wr * self.wk

    def grid(self, n: int, t: int) -> tuple[int, int, int]:
        return ((n + self.rows - 1) // self.rows, (t + 8 * self.nt - 1) // (8 * self.nt), 1)


# Per format, by T range: measured on the H200 (tools/tune_dec_q.py; the table and the
# numbers are in docs/perf/decode_h200.md), each within 99 KiB of shared memory.
_TILES_4BIT = (
    Tile(8, 1, 1, 1, 8, 3),
    Tile(16, 2, 2, 2, 2, 3),
    Tile(32, 4, 2, 2, 2, 3),
    Tile(64, 8, 1, 8, 1, 3),
)
TILES: dict[QType, tuple[Tile, ...]] = {
    QType.Q4: (Tile(8, 1, 2, 1, 4, 3), *_TILES_4BIT[1:]),
    QType.Q5: _TILES_4BIT,
    QType.Q6: _TILES_4BIT,
    QType.NVFP4: _TILES_4BIT,
    QType.W8: (
        # MT=1: twice the blocks of MT=2; small-N W8 heads ([2048,16384]) starve at N/32.
        Tile(8, 1, 1, 1, 4, 3),
        Tile(16, 2, 2, 2, 2, 3),
        Tile(32, 4, 2, 4, 1, 3),
        Tile(64, 8, 1, 4, 1, 3),
    ),
    QType.BF16: (
        Tile(8, 1, 1, 1, 4, 3),
        Tile(16, 2, 1, 2, 2, 4),
        Tile(32, 4, 1, 4, 1, 4),
        Tile(64, 8, 1, 4, 1, 3),
    ),
}
TUNING = ";".join(
    f"{q.value}:" + ",".join(f"{t.t_max}/{t.nt}/{t.mt}/{t.wr}/{t.wk}/{t.s}" for t in TILES[q])
    for q in sorted(TILES, key=lambda q: q.value)
)
# Every format changes tile at the same T: one set of seams for the conformance suite.
T_EDGES: tuple[int, ...] = tuple(tl.t_max for tl in _TILES_4BIT[:-1])


def tile(qtype: QType, t: int) -> Tile:
    tiles = TILES[qtype]
    for tl in tiles:
        if t <= tl.t_max:
            return tl
    return tiles[-1]


def expr(qtype_id: int, tl: Tile) -> str:
    return f"dec_q<{qtype_id}, {tl.nt}, {tl.mt}, {tl.wr}, {tl.wk}, {tl.s}>"


def instance(p: Problem) -> str:
    return expr(QTYPE_ID[p.qtype], tile(p.qtype, p.t))


INSTANCES: tuple[str, ...] = tuple(
    expr(QTYPE_ID[q], tl) for q in sorted(TILES, key=QTYPE_ID.__getitem__) for tl in TILES[q]
)


def block(p: Problem) -> tuple[int, int, int]:
    return (tile(p.qtype, p.t).threads, 1, 1)


def grid(p: Problem) -> tuple[int, int, int]:
    return tile(p.qtype, p.t).grid(p.n, p.t)


def tile_shared_bytes(qtype: QType, t: int, tl: Tile) -> int:
    """The kernel's dynamic shared memory: the ring, or the final reduction if larger."""
    txa = min(8 * tl.nt, t)
    stage = tl.wk * txa * XS + tl.wr * tl.wk * tl.mt * WBYTES[qtype]
    return max(tl.s * stage, tl.wk * tl.rows * 8 * tl.nt * 4)


def shared_bytes(p: Problem) -> int:
    return tile_shared_bytes(p.qtype, p.t, tile(p.qtype, p.t))


def workspace_bytes(p: Problem) -> int:
    return 0
