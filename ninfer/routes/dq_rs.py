"""Launcher of kernels/dq_rs.cu: the sm_90a prefill route (wgmma, A decoded into registers).

One kernel per call: tiles of 128 weight rows x 128 NB tokens on a persistent grid, the
weight planes and x copied by TMA (tensor maps encoded here through libcuda), the weight
decoded by the warps that multiply it. Numerics are dq_gemm's (docs/routes.md, "dq_rs").

x must be 16-byte aligned with a row pitch of whole 16 bytes (TMA's rule); other x is
first copied, by a 2-D copy on the caller's stream, into the workspace with a padded
pitch. out is stored by TMA under the same rule (16-byte aligned, N a multiple of 8);
other out by the consumers' own element stores. The workspace (the public query) is
sized for that copy, the tile counters and two FP32 partial tiles per block.
"""

from __future__ import annotations

import ctypes
import functools
import itertools
import threading
from dataclasses import dataclass
from typing import Any

from ..formats.packed import PackedWeight
from ..formats.qtype import QType
from ..runtime.compile import Kernels
from ..runtime.tma import BF16, SWIZZLE_128B, TensorMap, band_map, encode_2d
from .abi import Abi, fields
from .launcher import KernelLaunch, StagedLaunch, staged_x, x_copy_bytes
from .problem import QTYPE_ID, Problem

NAME = "dq_rs"
# wgmma, TMA and setmaxnreg exist on sm_90a only: the kernel is compiled for it (NVRTC
# option), and only the sm_90 route table lists this route.
NVRTC_OPTIONS: tuple[str, ...] = ("-arch=sm_90a",)
ARCHS: tuple[str, ...] = ("sm_90a",)

# S: ring slots of (x stage, weight stage), kernels/dq_rs.cu: the deepest of STAGE_DEPTHS
# that fits in a block's shared memory (even: a loop body alternates the two fragment
# sets): 8 for Q4, Q5, Q6 and NVFP4 and 6 for W8 and BF16 at NB = 1, 4 at NB = 2. The
# decode is not hidden under the MMAs, so the copies' latency shows and the deepest ring
# wins (evidence: docs/perf/prefill_h200/dq_rs_ablate_42b3b1f.json@8fe804d, `ring8`).
STAGE_DEPTHS: tuple[int, ...] = (8, 6, 4)
SHARED_MAX = 232448  # bytes of shared memory a block may opt into on sm_90 (227 KB)
THREADS = 384  # two consumer warpgroups + the copy warpgroup
ROWS = 128  # RS_BM: weight rows per tile
# Tokens per tile: 128 (NB = 1) or 256 (NB = 2: half the decode per MMA). A 256-token tile
# costs about 1.4 times a 128-token one, so past 128 tokens NB = 2 needs fewer tile-times
# whatever T is (2 x 1.4 < 3 at T = 257); the persistent grid spreads them over the SMs
# (evidence: docs/perf/prefill_h200/fused/ws_logs/rs_nb2.log@8fe804d).
NB2_FROM = 129
# The persistent grid (Stream-K; kernels/dq_rs.cu): at most one block per SM, up to
# BLOCKS_MAX (the partial slots in the workspace: two per block). Every block takes the
# same number of stage pairs (at least MIN_PAIRS: a run shorter than the ring's fill is
# mostly latency), except where whole tiles fill the SMs well: at least DP_FILL of their
# waves, or DP_FILL_SHORT with runs under SK_LONG pairs; there each block takes whole tiles
# (no partials), since split runs lose a little per pair, and split grids win 1.3-2.3x
# where whole tiles fill the SMs badly (evidence: docs/perf/prefill_h200/
# dq_rs_blocks_08593cd.txt@8fe804d and crossover_dq_rs_persistent_b04da00.json).
# A split grid's block count: each tile a run touches costs the block about SEG_PAIRS stage
# pairs more (the ring's drain, the partial's store or the sum of the others', the output's
# store), so where fewer blocks touch fewer tiles per run the host takes them
# (split_blocks), when the worst run's cost falls by SEG_GAIN at least (evidence, the
# tuning's `blocks` forced on six shapes: docs/perf/prefill_h200/
# dq_rs_blocks_segments.txt@8fe804d).
BLOCKS_MAX = 132  # the H100 / H200 SXM count: fewer blocks on a larger part, never more
DP_FILL = 0.9
DP_FILL_SHORT = 0.8
SK_LONG = 100
MIN_PAIRS = 4
SEG_PAIRS = 5
SEG_GAIN = 0.015

# Bytes of one 16-row band per 64-k stage: (codes, high bits, scales); RsBand<QT>.
BAND: dict[QType, tuple[int, int, int]] = {
    QType.Q4: (512, 0, 64),
    QType.Q5: (512, 128, 64),
    QType.Q6: (512, 256, 64),
    QType.W8: (1024, 0, 128),
    QType.NVFP4: (512, 0, 128),
    QType.BF16: (2048, 0, 0),
}

# dq_gemm's numerics: the oracle rounds these formats' weights once to BF16 as well.
ROUNDS_WEIGHT: frozenset[QType] = frozenset({QType.Q4, QType.Q5, QType.Q6, QType.W8})


@dataclass(frozen=True)
class DqRsTuning:
    """The tile, ring and grid rules (the module's constants are the measured defaults).
    ``nb`` and ``blocks`` force one token tile and one block count on every problem
    (experiments and tests; None: the rules decide)."""

    stage_depths: tuple[int, ...] = STAGE_DEPTHS
    nb2_from: int = NB2_FROM
    blocks_max: int = BLOCKS_MAX
    dp_fill: float = DP_FILL
    dp_fill_short: float = DP_FILL_SHORT
    sk_long: int = SK_LONG
    min_pairs: int = MIN_PAIRS
    seg_pairs: int = SEG_PAIRS
    seg_gain: float = SEG_GAIN
    nb: int | None = None
    blocks: int | None = None

    def text(self) -> str:
        return (
            f"stages={'/'.join(map(str, self.stage_depths))} nb2_from={self.nb2_from} "
            f"rows={ROWS} blocks_max={self.blocks_max} dp_fill={self.dp_fill} "
            f"dp_fill_short={self.dp_fill_short} sk_long={self.sk_long} "
            f"min_pairs={self.min_pairs} seg_pairs={self.seg_pairs} seg_gain={self.seg_gain} "
            "persistent"
            + (f" nb={self.nb}" if self.nb is not None else "")
            + (f" blocks={self.blocks}" if self.blocks is not None else "")
        )


DEFAULT = DqRsTuning()


def stages(qtype: QType, nb: int, tuning: DqRsTuning = DEFAULT) -> int:
    """Ring slots for a format and tile: the deepest of ``stage_depths`` that fits (the
    last always does)."""
    depths = tuning.stage_depths
    for s in depths[:-1]:
        if shared_bytes_for(qtype, nb, s) <= SHARED_MAX:
            return s
    return depths[-1]


def shared_bytes_for(qtype: QType, nb: int, s: int) -> int:
    """Dynamic shared memory of dq_rs<qtype, s, nb>: 1 KB of alignment slack, s (x stage,
    W stage), the output staging tile, 2 s mbarriers and a 16-byte word."""
    codes, high, scales = BAND[qtype]
    stage = nb * 128 * 64 * 2 + 8 * (codes + high + scales)
    return 1024 + s * stage + 128 * ROWS * 2 + 16 * s + 16


def instances(tuning: DqRsTuning = DEFAULT) -> tuple[str, ...]:
    return tuple(
        f"dq_rs<{qid}, {stages(q, nb, tuning)}, {nb}>"
        for q, qid in sorted(QTYPE_ID.items(), key=lambda item: item[1])
        for nb in (1, 2)
    )


INSTANCES: tuple[str, ...] = instances()


def choose_nb(p: Problem, tuning: DqRsTuning = DEFAULT) -> int:
    """128-token (1) or 256-token (2) tiles."""
    if tuning.nb is not None:
        return tuning.nb
    return 1 if p.t < tuning.nb2_from else 2


def instance(p: Problem, tuning: DqRsTuning = DEFAULT) -> str:
    nb = choose_nb(p, tuning)
    return f"dq_rs<{QTYPE_ID[p.qtype]}, {stages(p.qtype, nb, tuning)}, {nb}>"


def tiles(p: Problem, nb: int) -> int:
    return -(-p.n // ROWS) * -(-p.t // (128 * nb))


def blocks(p: Problem, nb: int, sms: int, kpad: int, tuning: DqRsTuning = DEFAULT) -> int:
    """Persistent blocks for ``sms`` multiprocessors: at most ``blocks_max``, and at most
    one per run unit (``sched_unit`` pairs) of the whole problem, so every block has a run."""
    n_tiles = tiles(p, nb)
    pairs = n_tiles * (kpad // 128)  # a multiple of sched_unit(kpad)
    if tuning.blocks is not None:
        return max(1, min(tuning.blocks, tuning.blocks_max, pairs // sched_unit(kpad)))
    sms = min(sms, tuning.blocks_max)
    waves = -(-n_tiles // sms)
    fill = n_tiles / (waves * sms)
    split = max(1, min(sms, pairs // tuning.min_pairs))
    long_runs = pairs >= tuning.sk_long * split
    if fill >= tuning.dp_fill or (fill >= tuning.dp_fill_short and not long_runs):
        # Whole tiles only when the runs cut no tile: a block count that divides the
        # tiles, in `waves` tiles per block at most (none: [34816,5120] at T = 1024, 1088
        # tiles, goes split).
        for g in range(-(-n_tiles // waves), sms + 1):
            if n_tiles % g == 0:
                return g
    return split_blocks(n_tiles, kpad, split, tuning.seg_pairs, tuning.seg_gain)


def run_cost(n_tiles: int, kpad: int, n_blocks: int, seg_pairs: int = SEG_PAIRS) -> int:
    """The longest run's cost in stage pairs: its pairs plus ``seg_pairs`` per tile it
    touches."""
    pairs = kpad // 128
    starts = [*run_starts(n_tiles, kpad, n_blocks), n_tiles * pairs]
    return max(
        (e - s) + seg_pairs * ((e - 1) // pairs - s // pairs + 1)
        for s, e in itertools.pairwise(starts)
    )


@functools.lru_cache(maxsize=1024)
def split_blocks(
    n_tiles: int, kpad: int, most: int, seg_pairs: int = SEG_PAIRS, seg_gain: float = SEG_GAIN
) -> int:
    """The split grid's block count: ``most`` (the most blocks the problem allows), or the
    count from most / 2 up whose longest run costs least, where that is at least
    ``seg_gain`` below most's (ties: the more blocks). About 1 ms of Python on 132 SMs:
    cached (a pure function of its arguments); T changes the tile count only every 128 NB
    tokens."""
    base = run_cost(n_tiles, kpad, most, seg_pairs)
    best, best_cost = most, base
    for g in range(most - 1, most // 2, -1):
        c = run_cost(n_tiles, kpad, g, seg_pairs)
        if c < best_cost:
            best, best_cost = g, c
    return best if best_cost <= base * (1 - seg_gain) else most


def sched_unit(kpad: int) -> int:
    """Stage pairs a block's run starts on a multiple of (RsSched::unit): 2 where a tile
    has an even number of pairs, so that its runs are whole laps of a 4-slot ring (a 6- or
    8-slot ring's last lap may be partly used: the kernel passes the unused slots)."""
    return 2 if (kpad // 128) % 2 == 0 else 1


def run_starts(n_tiles: int, kpad: int, n_blocks: int) -> list[int]:
    """The first (tile, pair) iteration of each block's run (RsSched::start)."""
    unit = sched_unit(kpad)
    units = n_tiles * (kpad // 128) // unit
    return [b * units // n_blocks * unit for b in range(n_blocks)]


def tail_rows(t: int, box_t: int) -> int:
    """Rows of x the last token tile loads: its rows below T rounded up to 8 (whole 1 KB
    swizzle atoms), or 0 when that is the whole box (the full map serves it)."""
    rem = t - (-(-t // box_t) - 1) * box_t
    rows = min(box_t, -(-rem // 8) * 8)
    return 0 if rows == box_t else rows


def _counter_bytes(p: Problem, tuning: DqRsTuning = DEFAULT) -> int:
    return -(-(4 * tiles(p, choose_nb(p, tuning))) // 256) * 256


def _split_bytes(p: Problem, tuning: DqRsTuning = DEFAULT) -> int:
    """Tile counters, then FP32 partials: [2 per block][16 NB float4][256 threads]."""
    nb = choose_nb(p, tuning)
    return _counter_bytes(p, tuning) + 2 * tuning.blocks_max * 16 * nb * 256 * 16


def workspace_bytes(p: Problem, tuning: DqRsTuning = DEFAULT) -> int:
    """A copy of x with a 16-byte row pitch (used only when x is not aligned), and the
    persistent grid's tile counters and partial slots."""
    return x_copy_bytes(p.t, p.k) + _split_bytes(p, tuning)


def shared_bytes(p: Problem, nb: int, tuning: DqRsTuning = DEFAULT) -> int:
    return shared_bytes_for(p.qtype, nb, stages(p.qtype, nb, tuning))


def _abi() -> Abi:
    band = {
        f"RsBand<QT_{q.name}>::{part}": v
        for q, sizes in BAND.items()
        for part, v in zip(("CODES", "QH", "SC"), sizes, strict=True)
    }
    shared = {
        f"RsShared<{QTYPE_ID[q]}, {stages(q, nb)}, {nb}>::BYTES": shared_bytes_for(
            q, nb, stages(q, nb)
        )
        for q in QType
        for nb in (1, 2)
    }
    maps = [
        (m, "RsTensorMap", TensorMap)
        for m in ("xmap", "xtail", "wcodes", "whigh", "wscale", "omap")
    ]
    return Abi(
        NAME,
        (
            *maps,
            ("tensor_scale", "float", ctypes.c_float),
            ("n", "int", ctypes.c_int32),
            ("kpad", "int", ctypes.c_int32),
            ("out", "bf16_t*", ctypes.c_uint64),
            ("t", "int", ctypes.c_int32),
            ("part", "float4*", ctypes.c_uint64),
            ("cnt", "u32*", ctypes.c_uint64),
            ("tiles_x", "int", ctypes.c_int32),
            ("n_tiles", "int", ctypes.c_int32),
            ("tail_rows", "int", ctypes.c_int32),
            ("otma", "int", ctypes.c_int32),
        ),
        {**band, "RS_BM": ROWS, "RS_BK": 64, **shared},
    )


ABI = _abi()


class _Params(ctypes.Structure):
    _fields_ = fields(ABI.params)


class RsPlan:
    """The launch of one (weight, T): the weight's maps once, x's and out's per address.

    x's and out's maps hold their addresses, so each is encoded per distinct address (x:
    and pitch) and kept (a call with the same buffers reuses them; the maps travel by
    value in the kernel's parameters, so a captured graph keeps its own copies).
    """

    X_MAPS = 16  # distinct x buffers remembered per plan

    def __init__(self, p: Problem, w: PackedWeight, fn: Any, tuning: DqRsTuning) -> None:
        import cupy

        dev = w.device_id
        if dev is None:
            raise TypeError("dq_rs: a plan needs a device weight")
        with cupy.cuda.Device(dev):
            sms = int(cupy.cuda.Device(dev).attributes["MultiProcessorCount"])
            self.nb = choose_nb(p, tuning)
            self.n_tiles = tiles(p, self.nb)
            self.shared = shared_bytes(p, self.nb, tuning)
            if fn.max_dynamic_shared_size_bytes < self.shared:
                fn.max_dynamic_shared_size_bytes = self.shared
            self.func = int(fn.kernel.ptr)
        codes, high, scales = BAND[p.qtype]
        pl = w.planes
        self.params = _Params(
            TensorMap(),
            TensorMap(),
            band_map(w.codes, codes),
            band_map(pl.get("qh"), high),
            band_map(pl.get("scales"), scales),
            TensorMap(),
            w.tensor_scale if p.qtype is QType.NVFP4 else 1.0,
            p.n,
            w.k_pad,
            0,
            p.t,
            0,
            0,
            -(-p.n // ROWS),
            self.n_tiles,
            0,
            0,
        )
        self.blocks = blocks(p, self.nb, sms, w.k_pad, tuning)
        # Runs that all start on a tile (whole tiles per block, no partials): the
        # counters go unused.
        starts = run_starts(self.n_tiles, w.k_pad, self.blocks)
        self.splits = any(i % (w.k_pad // 128) for i in starts)
        self.x_copy = x_copy_bytes(p.t, p.k)
        self.counter_bytes = _counter_bytes(p, tuning)
        self.device = dev
        self.t, self.k, self.n = p.t, p.k, p.n
        self.box_t = 128 * self.nb
        self.tail_rows = tail_rows(p.t, self.box_t)
        self.params.tail_rows = self.tail_rows
        self.x_maps: dict[tuple[int, int], tuple[Any, Any]] = {}
        self.o_maps: dict[int, Any] = {}
        self.lock = threading.Lock()

    def x_map(self, ptr: int, pitch: int) -> tuple[Any, Any]:
        """x's map with the full box and the last token tile's (tail_rows tall, or none)."""
        key = (ptr, pitch)
        m = self.x_maps.get(key)
        if m is None:
            if len(self.x_maps) >= self.X_MAPS:
                self.x_maps.clear()
            dims = (self.k, self.t)
            main = encode_2d(ptr, BF16, dims, pitch, (64, self.box_t), SWIZZLE_128B)
            tail = (
                encode_2d(ptr, BF16, dims, pitch, (64, self.tail_rows), SWIZZLE_128B)
                if self.tail_rows
                else TensorMap()
            )
            m = self.x_maps[key] = (main, tail)
        return m

    def o_map(self, ptr: int) -> Any:
        """out's map: [T][N] BF16, a box one consumer warpgroup's 64 rows x 128 tokens in
        the 128-byte swizzle its staging uses (kernels/dq_rs_store.cuh, cs_at); None where TMA
        cannot store out (an address or row pitch not of whole 16 bytes)."""
        if ptr % 16 or (2 * self.n) % 16:
            return None
        m = self.o_maps.get(ptr)
        if m is None:
            if len(self.o_maps) >= self.X_MAPS:
                self.o_maps.clear()
            dims = (self.n, self.t)
            m = self.o_maps[ptr] = encode_2d(ptr, BF16, dims, 2 * self.n, (64, 128), SWIZZLE_128B)
        return m

    def bind(self, x_ptr: int, out_ptr: int, ws_ptr: int) -> StagedLaunch:
        with self.lock:  # the map caches
            # TMA reads rows of whole 16 bytes from a 16-byte aligned base.
            stage, x_ptr, pitch = staged_x(x_ptr, ws_ptr, self.t, self.k)
            prm = _Params.from_buffer_copy(self.params)
            prm.xmap, prm.xtail = self.x_map(x_ptr, pitch)
            prm.out = out_ptr
            omap = self.o_map(out_ptr)
            prm.otma = omap is not None
            if omap is not None:
                prm.omap = omap
            zero = None
            if self.splits:  # counters from zero: the workspace is the caller's memory
                prm.cnt = ws_ptr + self.x_copy
                prm.part = prm.cnt + self.counter_bytes
                zero = (prm.cnt, 0, 4 * self.n_tiles)
        head = (self.func, self.blocks, 1, 1, THREADS, 1, 1, self.shared)
        return StagedLaunch(KernelLaunch(head[0], head[1:4], head[4:7], head[7], prm, self.device),
                            stage, zero)  # fmt: skip

    def run(self, x_ptr: int, out_ptr: int, stream: int, ws_ptr: int) -> None:
        self.bind(x_ptr, out_ptr, ws_ptr).launch(stream)


class DqRs:
    """The sm_90a prefill route's launcher (see the module docstring)."""

    name = NAME
    archs: tuple[str, ...] | None = ARCHS
    nvrtc_options = NVRTC_OPTIONS
    rounds_weight = ROUNDS_WEIGHT
    tuning = DEFAULT
    abi = ABI

    def instances(self, tuning: DqRsTuning | None = None) -> tuple[str, ...]:
        return instances(tuning or self.tuning)

    def instance(self, p: Problem, tuning: DqRsTuning | None = None) -> str:
        return instance(p, tuning or self.tuning)

    def t_edges(self, tuning: DqRsTuning | None = None) -> tuple[int, ...]:
        tn = tuning or self.tuning
        return () if tn.nb is not None else (tn.nb2_from - 1,)

    def supports(self, p: Problem) -> bool:
        return p.cc == 90  # sm_90a code: wgmma, TMA and setmaxnreg run on sm_90 alone

    def workspace_bytes(self, p: Problem, tuning: DqRsTuning | None = None) -> int:
        return workspace_bytes(p, tuning or self.tuning)

    def plan(
        self, p: Problem, w: PackedWeight, kernels: Kernels, tuning: DqRsTuning | None = None
    ) -> RsPlan:
        tn = tuning or self.tuning
        dev = w.device_id
        if dev is None:
            raise TypeError("dq_rs: a plan needs a device weight")
        fn = kernels.get(dev, NAME, instance(p, tn), self.instances(tn), self.nvrtc_options)
        return RsPlan(p, w, fn, tn)


LAUNCHER = DqRs()
