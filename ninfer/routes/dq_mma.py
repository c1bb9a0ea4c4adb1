"""Launcher of kernels/dq_mma.cu: the portable fused route (sm_80 and up: mma.sync).

One kernel per call: tiles of 128 weight rows x 32 or 64 tokens, the weight decoded by the
warps that multiply it (dq_rs's decode and numerics, without wgmma or TMA), so that GPUs
without sm_90a (the users' RTX 5090, sm_120) need not decode to BF16 and call cuBLAS.
Where the tiles leave SMs idle, K is split between blocks (the workspace holds the FP32
partials and a counter per tile, zeroed on the caller's stream before the kernel).

x must have a 16-byte aligned base and a row pitch of whole 16 bytes (cp.async's rule);
other x is first copied, by a 2-D copy on the caller's stream, into the workspace with a
padded pitch.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from typing import Any

from ..formats.packed import PackedWeight
from ..formats.qtype import QType, k_padded
from ..runtime.compile import Kernels
from .abi import Abi, fields
from .dq_rs import BAND, ROUNDS_WEIGHT
from .launcher import COMMON_PARAMS, KernelLaunch, StagedLaunch, staged_x, x_copy_bytes
from .problem import QTYPE_ID, Problem

NAME = "dq_mma"
THREADS = 256  # MM_THREADS: 8 warps, one 16-row band each
ROWS = 128  # MM_ROWS
BK = 64  # MM_BK: k per ring stage
XS = 144  # MM_XS: bytes of one staged x row (64 k of BF16 + 16 of padding)
CS = 136  # MM_CS: BF16 elements of one staged output row
# The largest dynamic shared memory a block may opt into on sm_86, sm_89 and sm_120 (99
# KB; sm_80 and sm_90 allow more): one limit, so that a tile the H200 measures runs as is
# on the users' RTX 5090.
SHARED_MAX = 101376
# Ring slots: the deepest whose blocks fit two to an SM, else the deepest that fits a block.
# Two 4-deep blocks of the 64-token tile (55 KB each) fit the H200's and the A100's SMs but
# not the 100 KB of an sm_86/89/120 SM, where the 3-deep ring keeps two blocks: with that
# 100 KB emulated on the H200 (shared_per_sm), 3 deep was faster than 4 deep on 22 of the
# 23 points where this rule picks it and the two differ (Q4 [131072,5120] T = 64: 351.8
# against 415.1 us; Q5 [4304,1152] T = 64 1.8 % slower), experiments/issue26/
# mma2_h200.json. Where two blocks fit neither (W8 and BF16 at 64 tokens), 4 deep.
STAGE_DEPTHS: tuple[int, ...] = (4, 3)
BLOCK_RESERVED = 1024  # shared memory the driver keeps per block
# Shared memory an SM has for its blocks, by compute capability (the CUDA programming
# guide's table); an unknown GPU is taken to have the least of them.
SHARED_PER_SM: dict[int, int] = {
    80: 167936, 86: 102400, 87: 167936, 89: 102400, 90: 233472, 100: 233472, 120: 102400
}  # fmt: skip
# The RTX 5090's (sm_120): DqMmaTuning.shared_per_sm emulates it on the H200 (the
# function's carveout), so that the H200 measures the blocks per SM the users' GPU gets.
SHARED_PER_SM_5090 = SHARED_PER_SM[120]
# Tokens per tile -> (MT, NT) of kernels/dq_mma.cu: bands a warp multiplies, 8-token MMA
# tiles per warp; each warp one band and all of the tile's tokens. 32 tokens up to
# TOK32_MAX, then 64 (several token tiles above 64). The kernel's 128-token layout (MT = 2:
# each warp two bands and half the tokens) measured slower than 64-token tiles at T = 128
# on all 9 weights of the experiment (Q4 [14336,5120]: 133.2 against 95.4 us), and at T =
# 256 and 1024 on 6 and 8 of them; it is not instantiated (experiments/issue26/
# mma_h200.json, variants mma and mma64). K is split where the tiles fill under
# SPLIT_WAVES blocks per SM, each split at least MIN_SPLIT_STAGES stages of 64 k (not
# tuned).
TILES: dict[int, tuple[int, int]] = {32: (1, 4), 64: (1, 8)}
TOK32_MAX = 32
SPLIT_WAVES = 2.0
MIN_SPLIT_STAGES = 8
# SMs the workspace query assumes at most (the split count grows with the SM count; the
# query does not look at the device): the plan never splits for more.
SMS_MAX = 192


@dataclass(frozen=True)
class DqMmaTuning:
    """The tile, ring and split rules; ``tokens`` (a key of TILES), ``stages`` (one of
    STAGE_DEPTHS) and ``splits`` force one choice on every problem (experiments and tests;
    None: the rules decide). ``shared_per_sm``: the shared memory an SM gives the kernel's
    blocks (the function's carveout; None: the GPU's own, SHARED_PER_SM), to measure on
    one GPU the occupancy of another (SHARED_PER_SM_5090)."""

    tok32_max: int = TOK32_MAX
    split_waves: float = SPLIT_WAVES
    min_split_stages: int = MIN_SPLIT_STAGES
    tokens: int | None = None
    stages: int | None = None
    splits: int | None = None
    shared_per_sm: int | None = None

    def text(self) -> str:
        return (
            f"tok32_max={self.tok32_max} "
            f"split_waves={self.split_waves} min_split_stages={self.min_split_stages} "
            f"shared_max={SHARED_MAX}"
            + (f" tokens={self.tokens}" if self.tokens is not None else "")
            + (f" stages={self.stages}" if self.stages is not None else "")
            + (f" splits={self.splits}" if self.splits is not None else "")
            + (f" shared_per_sm={self.shared_per_sm}" if self.shared_per_sm is not None else "")
        )


DEFAULT = DqMmaTuning()


def slot_bytes(qtype: QType, tokens: int) -> int:
    """MmSlot<QT, TOK>::BYTES: one x stage and one weight stage of 8 bands."""
    return tokens * XS + 8 * sum(BAND[qtype])


def fits(qtype: QType, tokens: int, ring: int) -> bool:
    """A ring of ``ring`` slots at this tile within SHARED_MAX (one block's limit)."""
    return ring * slot_bytes(qtype, tokens) <= SHARED_MAX


def ring_bytes(qtype: QType, tokens: int, ring: int) -> int:
    """The kernel's dynamic shared memory: the ring, or the output staging if larger."""
    return max(ring * slot_bytes(qtype, tokens), tokens * CS * 2)


def per_sm(p: Problem, tuning: DqMmaTuning = DEFAULT) -> int:
    """Shared memory an SM has for the kernel's blocks: emulated, else by the GPU."""
    if tuning.shared_per_sm is not None:
        return tuning.shared_per_sm
    return SHARED_PER_SM.get(p.cc, min(SHARED_PER_SM.values()))


def stages(p: Problem, tokens: int, tuning: DqMmaTuning = DEFAULT) -> int | None:
    """Ring slots at this tile within SHARED_MAX: forced, else the deepest ring of which
    two blocks fit an SM, else the deepest that fits; None where none fits."""
    if tuning.stages is not None and tuning.stages not in STAGE_DEPTHS:
        raise ValueError(
            f"dq_mma: stages: expected one of {list(STAGE_DEPTHS)}, got {tuning.stages}"
        )
    depths = STAGE_DEPTHS if tuning.stages is None else (tuning.stages,)
    one = [s for s in depths if fits(p.qtype, tokens, s)]
    sm = per_sm(p, tuning)
    two = [s for s in one if 2 * (ring_bytes(p.qtype, tokens, s) + BLOCK_RESERVED) <= sm]
    return max(two or one, default=None)


def shared_bytes(p: Problem, tokens: int, tuning: DqMmaTuning = DEFAULT) -> int:
    """The dynamic shared memory of the plan's instance."""
    s = stages(p, tokens, tuning)
    if s is None:
        raise ValueError(
            f"dq_mma: no ring of {p.qtype.name} at {tokens} tokens fits {SHARED_MAX} B"
        )
    return ring_bytes(p.qtype, tokens, s)


def choose_tokens(p: Problem, tuning: DqMmaTuning = DEFAULT) -> int:
    """The token tile: forced, else by T; the largest whose ring fits, at most that."""
    if tuning.tokens is not None:
        if tuning.tokens not in TILES:
            raise ValueError(
                f"dq_mma: tokens: expected one of {sorted(TILES)}, got {tuning.tokens}"
            )
        want = tuning.tokens
    else:
        want = 32 if p.t <= tuning.tok32_max else 64
    return max(tok for tok in TILES if tok <= want and stages(p, tok, tuning) is not None)


def tiles(p: Problem, tokens: int) -> int:
    return -(-p.n // ROWS) * -(-p.t // tokens)


def splits(p: Problem, tokens: int, sms: int, kpad: int, tuning: DqMmaTuning = DEFAULT) -> int:
    """Blocks per tile along K: 1 where the tiles fill the SMs, else about ``split_waves``
    blocks per SM, each split ``min_split_stages`` stages at least."""
    stages_k = kpad // BK
    if tuning.splits is not None:
        return max(1, min(tuning.splits, stages_k))
    most = max(1, stages_k // tuning.min_split_stages)
    n = tiles(p, tokens)
    sms = min(sms, SMS_MAX)
    if n >= sms:
        return 1
    return max(1, min(most, round(sms * tuning.split_waves / n)))


def instance_for(qtype: QType, tokens: int, ring: int) -> str:
    mt, nt = TILES[tokens]
    return f"dq_mma<{QTYPE_ID[qtype]}, {mt}, {nt}, {ring}>"


def instances() -> tuple[str, ...]:
    """Every format, tile and ring depth that fits SHARED_MAX (the GPU picks the depth)."""
    return tuple(
        instance_for(q, tok, s)
        for q in sorted(QType, key=QTYPE_ID.__getitem__)
        for tok in TILES
        for s in STAGE_DEPTHS
        if fits(q, tok, s)
    )


def _counter_bytes(p: Problem, tokens: int) -> int:
    return -(-(4 * tiles(p, tokens)) // 256) * 256


def workspace_bytes(p: Problem, tuning: DqMmaTuning = DEFAULT) -> int:
    """A copy of x with a 16-byte row pitch (used only when x is not aligned), the tile
    counters and the FP32 partials of the most splits any GPU gets (SMS_MAX)."""
    tok = choose_tokens(p, tuning)
    kpad = k_padded(p.k)
    n_split = splits(p, tok, SMS_MAX, kpad, tuning)
    part = 0 if n_split == 1 else tiles(p, tok) * n_split * ROWS * tok * 4
    return x_copy_bytes(p.t, p.k) + _counter_bytes(p, tok) + part


def _abi() -> Abi:
    slots = {f"MmSlot<{QTYPE_ID[q]}, {t}>::BYTES": slot_bytes(q, t) for q in QType for t in TILES}
    return Abi(
        NAME,
        (
            # the common rows but xvec: x is always 16-byte aligned here (the host stages it)
            *(prm for prm in COMMON_PARAMS if prm[0] != "xvec"),
            ("xld", "int", ctypes.c_int32),
            ("part", "float*", ctypes.c_uint64),
            ("cnt", "u32*", ctypes.c_uint64),
            ("splits", "int", ctypes.c_int32),
        ),
        {**slots, "MM_ROWS": ROWS, "MM_BK": BK, "MM_THREADS": THREADS, "MM_XS": XS, "MM_CS": CS},
    )


ABI = _abi()


class _Params(ctypes.Structure):
    _fields_ = fields(ABI.params)


class MmaPlan:
    """The launch of one (weight, T): grid, tile and splits fixed; x, out and the
    workspace written in per buffer set (``bind``)."""

    def __init__(self, p: Problem, w: PackedWeight, fn: Any, tuning: DqMmaTuning) -> None:
        import cupy

        dev = w.device_id
        if dev is None:
            raise TypeError("dq_mma: a plan needs a device weight")
        tok = choose_tokens(p, tuning)
        with cupy.cuda.Device(dev):
            attrs = cupy.cuda.Device(dev).attributes  # queries every attribute: once
            sms = int(attrs["MultiProcessorCount"])
            self.shared = shared_bytes(p, tok, tuning)
            if self.shared > 48 * 1024 and fn.max_dynamic_shared_size_bytes < self.shared:
                fn.max_dynamic_shared_size_bytes = self.shared
            # Set on every plan, so that no emulation outlives its tuning (-1: the GPU's
            # default). The carveout belongs to the compiled function: the plan made last
            # decides for every plan of the process (an experiment runs one tuning a
            # process). The percent rounds down here and the driver up, to the next
            # carveout the SM supports (100 KB of the H200's 228).
            total = int(attrs["MaxSharedMemoryPerMultiprocessor"])
            fn.preferred_shared_memory_carveout = (
                -1
                if tuning.shared_per_sm is None
                else min(100, 100 * tuning.shared_per_sm // total)
            )
            self.func = int(fn.kernel.ptr)
        self.n_tiles = tiles(p, tok)
        self.splits = splits(p, tok, sms, w.k_pad, tuning)
        qs, qh, sc = w.plane_ptrs
        scale = w.tensor_scale if p.qtype is QType.NVFP4 else 1.0
        self.params = _Params(
            qs, qh, sc, scale, p.n, p.k, w.k_pad, 0, 0, p.t, p.k, 0, 0, self.splits
        )
        self.device = dev
        self.t, self.k = p.t, p.k
        self.x_copy = x_copy_bytes(p.t, p.k)
        self.counter_bytes = _counter_bytes(p, tok)

    def bind(self, x_ptr: int, out_ptr: int, ws_ptr: int) -> StagedLaunch:
        prm = _Params.from_buffer_copy(self.params)
        # cp.async reads 16-byte pieces at 16-byte addresses.
        stage, prm.x, pitch = staged_x(x_ptr, ws_ptr, self.t, self.k)
        prm.xld = pitch // 2
        prm.out = out_ptr
        zero = None
        if self.splits > 1:  # counters from zero: the workspace is the caller's memory
            prm.cnt = ws_ptr + self.x_copy
            prm.part = prm.cnt + self.counter_bytes
            zero = (prm.cnt, 0, 4 * self.n_tiles)
        grid = (self.n_tiles, self.splits, 1)
        kernel = KernelLaunch(self.func, grid, (THREADS, 1, 1), self.shared, prm, self.device)
        return StagedLaunch(kernel, stage, zero)

    def run(self, x_ptr: int, out_ptr: int, stream: int, ws_ptr: int) -> None:
        self.bind(x_ptr, out_ptr, ws_ptr).launch(stream)


class DqMma:
    """The portable fused route's launcher (see the module docstring)."""

    name = NAME
    archs: tuple[str, ...] | None = None
    nvrtc_options: tuple[str, ...] = ()
    rounds_weight = ROUNDS_WEIGHT  # dq_rs's decode: scale x code rounded once to BF16
    tuning = DEFAULT
    abi = ABI

    def instances(self, tuning: DqMmaTuning | None = None) -> tuple[str, ...]:
        return instances()

    def instance(self, p: Problem, tuning: DqMmaTuning | None = None) -> str:
        tn = tuning or self.tuning
        tok = choose_tokens(p, tn)
        ring = stages(p, tok, tn)
        if ring is None:  # choose_tokens takes only a tile whose ring fits
            raise ValueError(f"dq_mma: no ring of {p.qtype.name} at {tok} tokens")
        return instance_for(p.qtype, tok, ring)

    def t_edges(self, tuning: DqMmaTuning | None = None) -> tuple[int, ...]:
        tn = tuning or self.tuning
        return () if tn.tokens is not None else (tn.tok32_max,)

    def supports(self, p: Problem) -> bool:
        return p.cc >= 80  # mma.sync BF16, ldmatrix, cp.async

    def workspace_bytes(self, p: Problem, tuning: DqMmaTuning | None = None) -> int:
        return workspace_bytes(p, tuning or self.tuning)

    def plan(
        self, p: Problem, w: PackedWeight, kernels: Kernels, tuning: DqMmaTuning | None = None
    ) -> MmaPlan:
        tn = tuning or self.tuning
        if w.device_id is None:
            raise TypeError("dq_mma: a plan needs a device weight")
        fn = kernels.get(w.device_id, NAME, self.instance(p, tn), self.instances(tn), ())
        return MmaPlan(p, w, fn, tn)


LAUNCHER = DqMma()
