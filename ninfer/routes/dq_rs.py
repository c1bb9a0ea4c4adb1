"""Launcher of kernels/dq_rs.cu: the sm_90a prefill route (wgmma, A decoded into registers).

One kernel per call: tiles of 128 weight rows x 128 NB tokens, the weight planes and x
copied by TMA (tensor maps encoded here through libcuda), the weight decoded by the
warps that multiply it. Numerics are dq_gemm's (docs/routes.md, "dq_rs").

x must be 16-byte aligned with a row pitch of whole 16 bytes (TMA's rule); other x is
first copied, by a 2-D copy on the caller's stream, into the workspace with a padded
pitch. The workspace (the public query) is sized for that copy.
"""

from __future__ import annotations

import ctypes
import sys
import threading
from typing import Any

from ..formats.packed import PackedWeight
from ..formats.qtype import QType
from .problem import QTYPE_ID, Problem

NAME = "dq_rs"
# wgmma, TMA and setmaxnreg exist on sm_90a only: the kernel is compiled for it (NVRTC
# option), and only the sm_90 route table lists this route.
NVRTC_OPTIONS: tuple[str, ...] = ("-arch=sm_90a",)
ARCHS: tuple[str, ...] = ("sm_90a",)

STAGES = 4  # S: ring slots of (x stage, weight stage), kernels/dq_rs.cu
THREADS = 384  # two consumer warpgroups + the copy warpgroup
ROWS = 128  # RS_BM: weight rows per tile
# Tokens per tile: 128 (NB = 1) or 256 (NB = 2, half the decode per MMA, but half the
# tiles). A 256-token tile costs about NB2_COST times a 128-token one, so NB = 2 is taken
# when its waves of tiles over the SMs, times that, are fewer than NB = 1's. Measured on
# the H200 (Q4; docs/perf/prefill_h200/fused/ws_logs/rs_nb2.log), NB = 1 vs NB = 2 in us:
# [14336,5120] T = 128: 52.5 vs 73.8 (one wave each: the 1.4); T = 256: 99.8 vs 69.0;
# T = 1024: 333.6 vs 269.7; [6144,5120] T = 256: 51.1 vs 67.1; T = 512: 97.9 vs 68.0.
NB2_COST = 1.4
NB2_FROM = 129  # NB = 2 never pays below (one 128-token tile covers T)
T_EDGES = (NB2_FROM - 1,)
NB_FORCE: int | None = None  # tests: run one tile size on every shape
# Split K: a weight with fewer tiles than half the SMs has each tile shared by up to
# KSPLIT_MAX blocks (at least 4 stage pairs each); their FP32 partials go through the
# workspace, sized for SPLIT_TILES tiles at most.
KSPLIT_MAX = 4
SPLIT_TILES = 64
KSPLIT_FORCE: int | None = None  # tests

# Bytes of one 16-row band per 64-k stage: (codes, high bits, scales); RsBand<QT>.
BAND: dict[QType, tuple[int, int, int]] = {
    QType.Q4: (512, 0, 64),
    QType.Q5: (512, 256, 64),
    QType.Q6: (512, 512, 64),
    QType.W8: (1024, 0, 128),
    QType.NVFP4: (512, 0, 128),
    QType.BF16: (2048, 0, 0),
}

# dq_gemm's numerics: the oracle rounds these formats' weights once to BF16 as well.
ROUNDS_WEIGHT: frozenset[QType] = frozenset({QType.Q4, QType.Q5, QType.Q6, QType.W8})

INSTANCES: tuple[str, ...] = tuple(
    f"dq_rs<{q}, {STAGES}, {nb}>" for q in sorted(QTYPE_ID.values()) for nb in (1, 2)
)
TUNING = (
    f"stages={STAGES} nb2_from={NB2_FROM} nb2_cost={NB2_COST} rows={ROWS} "
    f"ksplit_max={KSPLIT_MAX} split_tiles={SPLIT_TILES}"
)

# cuTensorMapEncodeTiled enums (cuda.h).
_DT_UINT64, _DT_BF16 = 4, 9
_SWIZZLE_NONE, _SWIZZLE_128B = 0, 3
_L2_PROMO_128B = 2
_MAP = ctypes.c_uint64 * 16  # CUtensorMap: 128 opaque bytes


def choose_nb(p: Problem, sms: int) -> int:
    """128-token (1) or 256-token (2) tiles for ``sms`` multiprocessors."""
    if NB_FORCE is not None:
        return NB_FORCE
    if p.t < NB2_FROM:
        return 1
    rows = -(-p.n // ROWS)

    def waves(tokens: int) -> int:
        return -(-(rows * -(-p.t // tokens)) // sms)

    return 2 if waves(256) * NB2_COST < waves(128) else 1


REFERENCE_SMS = 132  # the H200's: the tile ``instance`` names when no device is given


def instance(p: Problem, nb: int | None = None) -> str:
    """The kernel instance for ``p`` (``nb``: the tile the plan chose for its device)."""
    nb = choose_nb(p, REFERENCE_SMS) if nb is None else nb
    return f"dq_rs<{QTYPE_ID[p.qtype]}, {STAGES}, {nb}>"


def tiles(p: Problem, nb: int) -> int:
    return -(-p.n // ROWS) * -(-p.t // (128 * nb))


def choose_ksplit(p: Problem, nb: int, sms: int, kpad: int) -> int:
    """Blocks per tile along K: enough to fill the SMs when the tiles alone do not. The
    workspace holds KSPLIT_MAX partials for SPLIT_TILES tiles at most, forced or not."""
    n_tiles, pairs = tiles(p, nb), kpad // 128
    if n_tiles > SPLIT_TILES:
        return 1
    if KSPLIT_FORCE is not None:
        return max(1, min(KSPLIT_FORCE, KSPLIT_MAX, pairs))
    if 2 * n_tiles > sms:
        return 1
    return max(1, min(KSPLIT_MAX, sms // n_tiles, pairs // 4))


def tail_rows(t: int, box_t: int) -> int:
    """Rows of x the last token tile loads: its rows below T rounded up to 8 (whole 1 KB
    swizzle atoms), or 0 when that is the whole box (the full map serves it)."""
    rem = t - (-(-t // box_t) - 1) * box_t
    rows = min(box_t, -(-rem // 8) * 8)
    return 0 if rows == box_t else rows


def k_pitch(k: int) -> int:
    """Elements per row of the workspace copy of x: K rounded up to 8 (16 bytes)."""
    return -(-k // 8) * 8


def _x_copy_bytes(p: Problem) -> int:
    return -(-(p.t * k_pitch(p.k) * 2) // 256) * 256


def _split_bytes(p: Problem) -> int:
    """Tile counters, then FP32 partials: [tile][z][16 NB float4][256 threads]."""
    need = 0
    for nb in (1, 2):
        n = tiles(p, nb)
        if n <= SPLIT_TILES:
            need = max(need, KSPLIT_MAX * n * 16 * nb * 256 * 16)
    return 4 * SPLIT_TILES + need if need else 0


def workspace_bytes(p: Problem) -> int:
    """A copy of x with a 16-byte row pitch (used only when x is not aligned), and the
    split-K counters and partials where the weight has few tiles."""
    return _x_copy_bytes(p) + _split_bytes(p)


def shared_bytes(p: Problem, nb: int) -> int:
    codes, high, scales = BAND[p.qtype]
    stage = nb * 128 * 64 * 2 + 8 * (codes + high + scales)
    return 1024 + STAGES * stage + 16 * STAGES + 16


def grid(p: Problem, nb: int, ksplit: int = 1) -> tuple[int, int, int]:
    return (-(-p.n // ROWS), -(-p.t // (128 * nb)), ksplit)


class _Params(ctypes.Structure):
    # kernels/dq_rs.cu: (xmap, xtail, wcodes, whigh, wscale, tensor_scale, N, kpad, out, T,
    # part, cnt, ksplit, tail_rows)
    _fields_ = [
        ("xmap", _MAP),
        ("xtail", _MAP),
        ("wcodes", _MAP),
        ("whigh", _MAP),
        ("wscale", _MAP),
        ("tensor_scale", ctypes.c_float),
        ("n", ctypes.c_int32),
        ("kpad", ctypes.c_int32),
        ("out", ctypes.c_uint64),
        ("t", ctypes.c_int32),
        ("part", ctypes.c_uint64),
        ("cnt", ctypes.c_uint64),
        ("ksplit", ctypes.c_int32),
        ("tail_rows", ctypes.c_int32),
    ]


class _Driver:
    """cuTensorMapEncodeTiled from the driver library CuPy already uses."""

    def __init__(self) -> None:
        lib = ctypes.CDLL("libcuda.so.1")
        fn = lib.cuTensorMapEncodeTiled
        fn.restype = ctypes.c_int
        fn.argtypes = [
            ctypes.c_void_p, ctypes.c_int, ctypes.c_uint32, ctypes.c_void_p,
            ctypes.POINTER(ctypes.c_uint64), ctypes.POINTER(ctypes.c_uint64),
            ctypes.POINTER(ctypes.c_uint32), ctypes.POINTER(ctypes.c_uint32),
            ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int,
        ]  # fmt: skip
        self.encode_tiled = fn
        # The map must be 64-byte aligned and a ctypes array is only 16-byte aligned:
        # encode into an aligned view of a larger buffer, then copy.
        self.buf = ctypes.create_string_buffer(192)
        self.map = _MAP.from_address((ctypes.addressof(self.buf) + 63) & ~63)
        self.lock = threading.Lock()

    def encode(
        self,
        ptr: int,
        dtype: int,
        dims: tuple[int, int],
        pitch: int,
        box: tuple[int, int],
        swizzle: int,
    ) -> Any:
        """A 2-D map (dims innermost first, pitch in bytes); out-of-bounds boxes read zero."""
        with self.lock:
            rc = self.encode_tiled(
                ctypes.addressof(self.map), dtype, 2, ctypes.c_void_p(ptr),
                (ctypes.c_uint64 * 2)(*dims), (ctypes.c_uint64 * 1)(pitch),
                (ctypes.c_uint32 * 2)(*box), (ctypes.c_uint32 * 2)(1, 1),
                0, swizzle, _L2_PROMO_128B, 0,
            )  # fmt: skip
            if rc != 0:
                raise RuntimeError(
                    f"dq_rs: cuTensorMapEncodeTiled failed with CUresult {rc} "
                    f"(address {ptr:#x}, dims {dims}, pitch {pitch}, box {box})"
                )
            return _MAP(*self.map)


_driver: _Driver | None = None


def _drv() -> _Driver:
    global _driver
    if _driver is None:
        _driver = _Driver()
    return _driver


def plane_map(plane: Any, box_bytes: int) -> Any:
    """A weight plane as [bands][band bytes / 8] 8-byte words; a box is one stage's block of
    8 bands (bands past the plane read zero)."""
    if plane is None or box_bytes == 0:
        return _MAP()
    bands = int(plane.shape[0]) // 16
    pitch = int(plane.nbytes) // bands
    return _drv().encode(
        int(plane.data.ptr),
        _DT_UINT64,
        (pitch // 8, bands),
        pitch,
        (box_bytes // 8, 8),
        _SWIZZLE_NONE,
    )


class RsPlan:
    """The launch of one (weight, T): the weight's maps once, x's map per x address.

    x's map holds its address, so it is encoded per distinct (address, pitch) and kept
    (a call with the same buffers reuses it; the map travels by value in the kernel's
    parameters, so a captured graph keeps its own copy).
    """

    X_MAPS = 16  # distinct x buffers remembered per plan

    def __init__(self, p: Problem, w: PackedWeight) -> None:
        import cupy

        from .launch import _kernel, arg_pointers

        dev = w.device_id
        assert dev is not None
        with cupy.cuda.Device(dev):
            sms = int(cupy.cuda.Device(dev).attributes["MultiProcessorCount"])
            self.nb = choose_nb(p, sms)
            fn = _kernel(dev, sys.modules[__name__], instance(p, self.nb))
            self.shared = shared_bytes(p, self.nb)
            if fn.max_dynamic_shared_size_bytes < self.shared:
                fn.max_dynamic_shared_size_bytes = self.shared
            self.func = int(fn.kernel.ptr)
        codes, high, scales = BAND[p.qtype]
        pl = w.planes
        self.params = _Params(
            _MAP(),
            _MAP(),
            plane_map(w.codes, codes),
            plane_map(pl.get("qh"), high),
            plane_map(pl.get("scales"), scales),
            w.tensor_scale if p.qtype is QType.NVFP4 else 1.0,
            p.n,
            w.k_pad,
            0,
            p.t,
            0,
            0,
            1,
            0,
        )
        self.argv = arg_pointers(self.params)
        self.argv_ptr = ctypes.addressof(self.argv)
        self.ksplit = choose_ksplit(p, self.nb, sms, w.k_pad)
        self.params.ksplit = self.ksplit
        self.grid = grid(p, self.nb, self.ksplit)
        self.n_tiles = tiles(p, self.nb)
        self.x_copy = _x_copy_bytes(p)
        self.device = dev
        self.t, self.k = p.t, p.k
        self.box_t = 128 * self.nb
        self.tail_rows = tail_rows(p.t, self.box_t)
        self.params.tail_rows = self.tail_rows
        self.x_maps: dict[tuple[int, int], tuple[Any, Any]] = {}
        self.lock = threading.Lock()

    def x_map(self, ptr: int, pitch: int) -> tuple[Any, Any]:
        """x's map with the full box and the last token tile's (tail_rows tall, or none)."""
        key = (ptr, pitch)
        m = self.x_maps.get(key)
        if m is None:
            if len(self.x_maps) >= self.X_MAPS:
                self.x_maps.clear()
            dims = (self.k, self.t)
            main = _drv().encode(ptr, _DT_BF16, dims, pitch, (64, self.box_t), _SWIZZLE_128B)
            tail = (
                _drv().encode(ptr, _DT_BF16, dims, pitch, (64, self.tail_rows), _SWIZZLE_128B)
                if self.tail_rows
                else _MAP()
            )
            m = self.x_maps[key] = (main, tail)
        return m

    def run(self, x_ptr: int, out_ptr: int, stream: int, ws_ptr: int) -> None:
        import cupy
        from cupy.cuda import driver, runtime

        with cupy.cuda.Device(self.device), self.lock:
            pitch = 2 * self.k
            if x_ptr % 16 or pitch % 16:
                # TMA reads rows of whole 16 bytes from a 16-byte aligned base: stage x.
                padded = 2 * k_pitch(self.k)
                runtime.memcpy2DAsync(
                    ws_ptr,
                    padded,
                    x_ptr,
                    pitch,
                    pitch,
                    self.t,
                    runtime.memcpyDeviceToDevice,
                    stream,
                )
                x_ptr, pitch = ws_ptr, padded
            prm = self.params
            prm.xmap, prm.xtail = self.x_map(x_ptr, pitch)
            prm.out = out_ptr
            if self.ksplit > 1:  # counters from zero: the workspace is the caller's memory
                prm.cnt = ws_ptr + self.x_copy
                prm.part = prm.cnt + 4 * SPLIT_TILES
                runtime.memsetAsync(prm.cnt, 0, 4 * self.n_tiles, stream)
            driver.launchKernel(
                self.func, *self.grid, THREADS, 1, 1, self.shared, stream, self.argv_ptr, 0
            )


def make_plan(p: Problem, w: PackedWeight) -> Any:
    return RsPlan(p, w)
