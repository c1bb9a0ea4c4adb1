"""Launcher of kernels/dec_q.cu: decode-regime tensor-core GEMV, T <= 64.

A block is ``wk`` k-groups x ``wr`` row-warps on 16*mt*wr weight rows and an 8*nt token
tile; weights and x stream through an ``s``-stage cp.async ring in dynamic shared
memory. The tile per T range is data (``TILES``), chosen by measurement on the H200
(docs/perf/decode_h200.md has the state it gives).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from ..formats.packed import PackedWeight
from ..formats.qtype import QType
from ..runtime.compile import Kernels
from .abi import Abi
from .launcher import COMMON_PARAMS, KernelPlan
from .problem import QTYPE_ID, Problem

NAME = "dec_q"
T_MAX = 64

# Shared-memory bytes of one ring stage (128 k) of one 16-row m-tile, per format:
# Dec<QT>::WBYTES in kernels/dec_q_decode.cuh (codes + high bits + scales).
WBYTES: dict[QType, int] = {
    QType.Q4: 1024 + 64,
    QType.Q5: 1024 + 256 + 64,
    QType.Q6: 1024 + 512 + 64,
    QType.W8: 2048 + 128,
    QType.NVFP4: 1024 + 128,
    QType.BF16: 4096,
}
XS = 272  # DEC_XS: bytes of one staged x row (128 k of BF16 + 16 bytes of padding)
ABI = Abi(
    NAME,
    COMMON_PARAMS,
    {"DEC_XS": XS, **{f"Dec<QT_{q.name}>::WBYTES": v for q, v in WBYTES.items()}},
)


@dataclass(frozen=True)
class Tile:
    t_max: int  # the largest T this tile serves (inclusive); the T tile is 8 * nt
    nt: int  # 8-token MMA column tiles
    mt: int  # 16-row MMA tiles per warp
    wr: int  # row-warps sharing one staged x tile
    wk: int  # k-groups splitting K (reduced in shared memory at the end)
    s: int  # ring stages (s - 1 in flight)
    n_min: int = 0  # the smallest N this tile serves: rows are tried in order
    n_max: int = 0  # the largest (0: no bound)

    def serves(self, t: int, n: int) -> bool:
        return t <= self.t_max and n >= self.n_min and (not self.n_max or n <= self.n_max)

    @property
    def rows(self) -> int:
        return 16 * self.mt * self.wr

    @property
    def threads(self) -> int:
        return 32 * self.wr * self.wk

    def grid(self, n: int, t: int) -> tuple[int, int, int]:
        return ((n + self.rows - 1) // self.rows, (t + 8 * self.nt - 1) // (8 * self.nt), 1)


# Per format, by T range (and N where a row says n_min or n_max), each within 99 KiB of shared
# memory: the fastest tile measured on the H200 (evidence:
# docs/perf/decode_h200/tune_tiled.json@8fe804d, from tools/tune_dec_q.py@423e328).
# The rows with n_min, since the one-LOP3 decode (docs/perf/decode_h200/tiles.json: tile
# variants in interleaved fresh-process rounds on one H200): on the 27B heads (N >= 131072) two m-tiles a warp
# over four k-groups at T <= 8 are 15-17 % faster for Q5, Q6 and NVFP4, and 128 rows a
# block at T <= 16 (x staged once for 4 row-warps) 9 % faster for Q4 and Q6. Under
# N ~ 16k both lose (fewer blocks than the SMs can hide latency with: Q5 [2048,4096]
# T=1 +35 %, Q4 [14336,5120] T=16 +25 %); between, not measured, the old tiles stay.
# Q4 at T <= 4 under N = 8192: one m-tile a warp over eight k-groups, half the serial
# stages a warp. At T = 1 (the fourth experiment of tiles.json) 5.5 % faster on
# [6144,5120] and 19 % on [5120,17408]; on [14336,5120] 8 % and on the head 17 % slower,
# so 8192 (between what was measured) is the seam. With the k-group barrier
# (experiments/issue26/q4_small_n_exp.yaml) at T = 2 and 4 as well: [5120,17408] -15 % and
# -6.5 %, [3456,1152] T = 2 -6.4 %; at T = 8 it lost 11-13 % ([6144,5120], [5120,17408]:
# x staged eight times a block), which keeps [8,1,2,1,4,3]. Every ring is 3 deep: 4 and 6
# (the third experiment) were faster nowhere and slower on 4 and 10 of 36 points.
_HEADS = 131072
_MID = 8192  # the N seam of the eight-k-group rows at T <= 4 (Q4, W8)
_TILES_4BIT = (
    Tile(8, 1, 2, 1, 4, 3, n_min=_HEADS),
    Tile(8, 1, 1, 1, 8, 3),
    Tile(16, 2, 2, 2, 2, 3),
    Tile(32, 4, 2, 2, 2, 3),
    Tile(64, 8, 1, 8, 1, 3),
)
_T16_HEADS = Tile(16, 2, 2, 4, 1, 3, n_min=_HEADS)
TILES: dict[QType, tuple[Tile, ...]] = {
    QType.Q4: (
        # The heads' 128-row tile from T = 7 (experiments/issue26/t5_11_exp.yaml,
        # heads_r128_t5: T = 8 9-16 % faster on both heads, from T = 5 10 % slower at T = 5
        # on [131072,5120]; tile_rows_exp.yaml, heads_t16_from7: T = 7 14.3 % faster on
        # [131072,2048], 6.8 % on [131072,5120] (unknown: [0.86, 1.01]), T = 5 and 6 the
        # same).
        Tile(6, 1, 2, 1, 4, 3, n_min=_HEADS),
        _T16_HEADS,
        Tile(7, 1, 2, 1, 4, 3, n_min=_MID),
        Tile(4, 1, 1, 1, 8, 3),
        Tile(8, 1, 2, 1, 4, 3),
        *_TILES_4BIT[2:],
    ),
    QType.Q5: _TILES_4BIT,
    # The Q6 heads' 128-row tile from T = 8 (tile_rows_exp.yaml, heads_t16_from7): T = 8
    # 11.3 % faster on [248320,2048], 7.3 % on [248320,5120].
    QType.Q6: (
        Tile(7, 1, 2, 1, 4, 3, n_min=_HEADS),
        _T16_HEADS,
        *_TILES_4BIT[1:],
    ),
    QType.NVFP4: _TILES_4BIT,
    QType.W8: (
        # Eight k-groups at T <= 4 (experiments/issue26/w8_t1_exp.yaml, with the k-group
        # barrier): at T = 1 7-25 % faster on [2048,4096], [2048,16384], [6144,5120],
        # [14336,5120], [34816,5120] and the head, [5120,17408] +3 % (unknown); at T = 2 and
        # 4 on N = 2048 and 14336 faster (8-21 %), on N = 5120 7-18 % slower: 78 KB of ring a
        # block at T = 4 holds two blocks an SM, and N / 16 = 320 blocks then need a second
        # wave. T = 2 ... 4 take it up to N = 2048, the largest N measured to gain there, and
        # from Q4's seam (6144 gained nothing, 14336 did).
        # To T = 7 from N = 8192 (t5_11_exp.yaml, w8_wk8_t7): T = 5 ... 7 6-11 % faster on
        # [14336,5120], [34816,5120] and [131072,5120]; T = 8 the same.
        Tile(7, 1, 1, 1, 8, 3, n_min=_MID),
        # From N = 8192, T = 8 on the 64-row tile of T = 9 ... 16 (tile_rows_exp.yaml,
        # w8_big_t8): 19.6 % faster on [14336,5120], 12.2 % on [34816,5120], 26.5 % on
        # [131072,5120]; T = 7, 9, 10 and 12 the same (T = 16, whose tile did not change,
        # unknown: +5.1 %, [0.90, 1.23]).
        Tile(16, 2, 2, 2, 2, 3, n_min=_MID),
        Tile(4, 1, 1, 1, 8, 3, n_max=2048),
        Tile(1, 1, 1, 1, 8, 3),
        # MT=1: twice the blocks of MT=2; small-N W8 heads ([2048,16384]) starve at N/32.
        Tile(8, 1, 1, 1, 4, 3),
        # To N = 6144, T = 9 ... 16 as one row-warp over four k-groups (t5_11_exp.yaml,
        # w8_t16_k4): 11-37 % faster at T = 9 ... 11 on [2048,4096], [5120,10240],
        # [5120,17408]; on [14336,5120] and up 22-54 % slower (x staged by 16-row blocks).
        # t5_11_check_exp.yaml (vm:dfb34b3e): [4608,4608] 6-15 % faster, [6144,5120] the
        # same; on [8192,5120] the old tile 15-25 % faster, hence the bound.
        Tile(16, 2, 1, 1, 4, 3, n_max=6144),
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


@dataclass(frozen=True)
class DecQTuning:
    """The tile per format and T range (each tile serves T up to its ``t_max``)."""

    tiles: Mapping[QType, tuple[Tile, ...]] = field(default_factory=lambda: dict(TILES))

    def text(self) -> str:
        return ";".join(
            f"{q.value}:"
            + ",".join(
                f"{t.t_max}/{t.nt}/{t.mt}/{t.wr}/{t.wk}/{t.s}"
                + (f"@{t.n_min}" if t.n_min else "")
                + (f"~{t.n_max}" if t.n_max else "")
                for t in self.tiles[q]
            )
            for q in sorted(self.tiles, key=lambda q: q.value)
        )

    def tile(self, qtype: QType, t: int, n: int) -> Tile:
        tiles = self.tiles[qtype]
        for tl in tiles:
            if tl.serves(t, n):
                return tl
        return tiles[-1]

    def row_points(self, qtype: QType) -> dict[Tile, list[tuple[int, int]]]:
        """Each row's lowest and highest T that select it, as (T, N), each at the smallest
        N that does; a row no (T, N) selects (shadowed by the rows before it) maps to [].

        N runs over partial bands just inside and outside every row's N bounds and 4656 (a
        partial band of 16 and of every block), so a row cut off by the bounds of another
        is found where it is in effect (the conformance suite runs these points)."""
        tiles = self.tiles[qtype]
        ns = {4656}
        for tl in tiles:
            ns |= {tl.n_min + 40, tl.n_min - 8} if tl.n_min else set()
            ns |= {tl.n_max - 8, tl.n_max + 40} if tl.n_max else set()
        candidates = sorted(ns)
        out: dict[Tile, list[tuple[int, int]]] = {}
        for tl in tiles:
            first = {}  # T -> the smallest N at which tile() picks this row
            for t in range(1, tl.t_max + 1):
                n = next((n for n in candidates if self.tile(qtype, t, n) == tl), None)
                if n is not None:
                    first[t] = n
            out[tl] = [(t, first[t]) for t in sorted({min(first), max(first)})] if first else []
        return out


DEFAULT = DecQTuning()


def tile(qtype: QType, t: int, n: int, tuning: DecQTuning = DEFAULT) -> Tile:
    return tuning.tile(qtype, t, n)


def expr(qtype_id: int, tl: Tile) -> str:
    return f"dec_q<{qtype_id}, {tl.nt}, {tl.mt}, {tl.wr}, {tl.wk}, {tl.s}>"


def _up128(n: int) -> int:
    # The kernel starts the weight blocks of a stage, and each warp's, on a 128-byte line.
    return -(-n // 128) * 128


def tile_shared_bytes(qtype: QType, t: int, tl: Tile) -> int:
    """The kernel's dynamic shared memory: the ring, or the final reduction if larger."""
    txa = min(8 * tl.nt, t)
    xw = _up128(tl.wk * txa * XS)  # the x tiles (the kernel's XW)
    stage = xw + tl.wr * tl.wk * _up128(tl.mt * WBYTES[qtype])  # a warp's blocks: WREG
    return max(tl.s * stage, tl.wk * tl.rows * 8 * tl.nt * 4)


class DecQ:
    """The decode route's launcher (see the module docstring)."""

    name = NAME
    archs: tuple[str, ...] | None = None
    nvrtc_options: tuple[str, ...] = ()
    rounds_weight: frozenset[QType] = frozenset()  # the group scale multiplies the FP32 sum
    tuning = DEFAULT
    abi = ABI

    def instances(self, tuning: DecQTuning | None = None) -> tuple[str, ...]:
        tiles = (tuning or self.tuning).tiles
        return tuple(
            dict.fromkeys(  # a tile shape may serve two rows (n_min, n_max)
                expr(QTYPE_ID[q], tl)
                for q in sorted(tiles, key=QTYPE_ID.__getitem__)
                for tl in tiles[q]
            )
        )

    def instance(self, p: Problem, tuning: DecQTuning | None = None) -> str:
        return expr(QTYPE_ID[p.qtype], (tuning or self.tuning).tile(p.qtype, p.t, p.n))

    def t_edges(self, tuning: DecQTuning | None = None) -> tuple[int, ...]:
        tiles = (tuning or self.tuning).tiles
        return tuple(sorted({tl.t_max for ts in tiles.values() for tl in ts[:-1]}))

    def supports(self, p: Problem) -> bool:
        return p.t <= T_MAX

    def workspace_bytes(self, p: Problem, tuning: DecQTuning | None = None) -> int:
        return 0

    def plan(
        self, p: Problem, w: PackedWeight, kernels: Kernels, tuning: DecQTuning | None = None
    ) -> KernelPlan:
        tn = tuning or self.tuning
        tl = tn.tile(p.qtype, p.t, p.n)
        dev = w.device_id
        if dev is None:
            raise TypeError("dec_q: a plan needs a device weight")
        fn = kernels.get(dev, NAME, self.instance(p, tn), self.instances(tn), self.nvrtc_options)
        shared = tile_shared_bytes(p.qtype, p.t, tl)
        return KernelPlan(fn, tl.grid(p.n, p.t), (tl.threads, 1, 1), shared, p, w)


LAUNCHER = DecQ()
