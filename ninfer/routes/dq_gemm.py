"""Launcher of kernels/dq_gemm.cu + cuBLAS: the prefill route (large T).

Per band of weight rows: one kernel decodes the band into the workspace as row-major
BF16 [rows, K_pad], then ``cublasGemmEx`` (BF16 in, FP32 compute, BF16 out) writes
``out[:, n0:n0+rows] = x · band^T``. Bands bound the workspace whatever N is.
Numerics: docs/routes.md ("dq_gemm"): each weight is rounded once to BF16.
"""

from __future__ import annotations

import ctypes
import threading
from dataclasses import dataclass
from typing import Any

from ..formats.packed import PackedWeight
from ..formats.qtype import QType, k_padded
from ..runtime.compile import Kernels
from .abi import Abi, fields
from .launcher import KernelLaunch, cuda_api, on_device
from .problem import QTYPE_ID, Problem

NAME = "dq_gemm"
BLOCK = 256
TILE_CHUNKS = 16  # DQ_CH in kernels/dq_gemm.cu: 32-k chunks per block tile (16 rows x 512 k)

# Band budget: the weight is decoded in bands of about BAND_BYTES of BF16 (N cut into
# equal 128-row multiples), double-buffered: the decode of band b+1 runs on a side
# stream and may overlap the GEMM of band b (on the caller's stream). The band bounds
# the workspace (two bands; one when a single band holds the weight) whatever N is:
# the 27B output head would need 2.5 GB decoded at once. Measured on the H200
# (tools/tune_dq_gemm.py at 423e328; docs/perf/prefill_h200/tune_dq_gemm.json@8fe804d):
# one whole-weight band is 5-10 % faster at T = 128 and within +-5 % at T = 1024; 24 MiB
# bands lose up to 17 %.
BAND_BYTES = 48 << 20
BAND_ALIGN = 128

# Formats whose decoded weight is rounded to BF16 (scale x code has up to 19 significant
# bits); NVFP4 (e4m3 x e2m1, tensor scale as alpha) and BF16 are exact. The conformance
# oracle rounds the same weights (tests/gpu/cases.py).
ROUNDS_WEIGHT: frozenset[QType] = frozenset({QType.Q4, QType.Q5, QType.Q6, QType.W8})

INSTANCES: tuple[str, ...] = tuple(f"dq_gemm<{q}>" for q in sorted(QTYPE_ID.values()))


@dataclass(frozen=True)
class DqGemmTuning:
    band_bytes: int = BAND_BYTES
    band_align: int = BAND_ALIGN

    def text(self) -> str:
        return f"band_bytes={self.band_bytes} band_align={self.band_align} double_buffered"


DEFAULT = DqGemmTuning()


def instance(p: Problem) -> str:
    return f"dq_gemm<{QTYPE_ID[p.qtype]}>"


def band_rows(p: Problem, tuning: DqGemmTuning = DEFAULT) -> int:
    """Rows per band: about ``band_bytes`` of BF16, balanced over the bands, aligned."""
    row_bytes = 2 * k_padded(p.k)
    bands = max(1, round(p.n * row_bytes / tuning.band_bytes))
    rows = -(-p.n // bands)
    return min(-(-rows // tuning.band_align) * tuning.band_align, -(-p.n // 16) * 16)


def workspace_bytes(p: Problem, tuning: DqGemmTuning = DEFAULT) -> int:
    rows = band_rows(p, tuning)
    slots = 1 if rows >= p.n else 2
    return slots * rows * 2 * k_padded(p.k)


ABI = Abi(
    NAME,
    (
        ("qs", "const u8*", ctypes.c_uint64),
        ("qh", "const u8*", ctypes.c_uint64),
        ("sc", "const u8*", ctypes.c_uint64),
        ("kpad", "int", ctypes.c_int32),
        ("n0", "int", ctypes.c_int32),
        ("rows", "int", ctypes.c_int32),
        ("ws", "bf16_t*", ctypes.c_uint64),
    ),
    {"DQ_CH": TILE_CHUNKS},
)


class _Params(ctypes.Structure):
    _fields_ = fields(ABI.params)


# cudaDataType / cublasComputeType_t / cublasOperation_t / cublasGemmAlgo_t (cublas_api.h).
_CUDA_R_16BF = 14
_CUBLAS_COMPUTE_32F = 68
_CUBLAS_OP_N, _CUBLAS_OP_T = 0, 1
_CUBLAS_GEMM_DEFAULT = -1


class _Cublas:
    """cuBLAS through ctypes on the library CuPy already loaded.

    CuPy's wrapper refuses every cuBLAS call while a stream captures; cuBLAS itself
    supports capture, and linear() must be capturable (DESIGN §3).
    """

    def __init__(self) -> None:
        from cupy_backends.cuda.libs import cublas  # loads libcublas into the process

        del cublas
        lib = None
        for name in ("libcublas.so.13", "libcublas.so.12", "libcublas.so"):  # by soname:
            try:  # the copy already loaded is the one returned
                lib = ctypes.CDLL(name)
                break
            except OSError:
                continue
        if lib is None:
            raise RuntimeError("dq_gemm: libcublas is not loadable through ctypes")
        self.lib = lib
        lib.cublasCreate_v2.argtypes = [ctypes.POINTER(ctypes.c_void_p)]
        lib.cublasSetStream_v2.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
        lib.cublasGemmEx.argtypes = [
            ctypes.c_void_p, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int,
            ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int, ctypes.c_int,
            ctypes.c_void_p, ctypes.c_int, ctypes.c_int,
            ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int, ctypes.c_int,
            ctypes.c_int, ctypes.c_int,
        ]  # fmt: skip
        self.handles: dict[int, int] = {}
        self.locks: dict[int, threading.Lock] = {}

    def handle(self, device: int) -> tuple[int, threading.Lock]:
        """Our own handle per device (CuPy's is shared with its own calls); create it
        with the device current."""
        h = self.handles.get(device)
        if h is None:
            ptr = ctypes.c_void_p()
            _check(self.lib.cublasCreate_v2(ctypes.byref(ptr)), "cublasCreate")
            h = self.handles[device] = int(ptr.value or 0)
            self.locks[device] = threading.Lock()
        return h, self.locks[device]


def _check(status: int, what: str) -> None:
    if status != 0:
        raise RuntimeError(f"dq_gemm: {what} failed with cuBLAS status {status}")


_cublas: _Cublas | None = None


def _lib() -> _Cublas:
    global _cublas
    if _cublas is None:
        _cublas = _Cublas()
    return _cublas


class DqPlan:
    """The launches of one (weight, T): per band a decode and a GEMM.

    Built once per (weight, T, policy) like launcher.KernelPlan; ``bind`` makes each
    band's parameters and GEMM arguments for a set of buffers (``DqLaunch``). With several
    bands, band b decodes into workspace slot b % 2 on a side stream that first waits for
    the caller's stream; the GEMM of band b waits for its decode, and the decode of band
    b + 2 waits for the GEMM of band b (same slot). The caller's stream waits for every
    decode, so the side stream rejoins it (a CUDA-graph capture requirement).
    """

    def __init__(self, p: Problem, w: PackedWeight, fn: Any, tuning: DqGemmTuning) -> None:
        import cupy

        dev = w.device_id
        if dev is None:
            raise TypeError("dq_gemm: a plan needs a device weight")
        lib = _lib()
        with cupy.cuda.Device(dev):
            self.func = int(fn.kernel.ptr)
            self.handle, self.cublas_lock = lib.handle(dev)
            self.side = cupy.cuda.Stream(non_blocking=True)
            self.ev_start = cupy.cuda.Event(disable_timing=True)
            self.ev_dq = [cupy.cuda.Event(disable_timing=True) for _ in range(2)]
            self.ev_mm = [cupy.cuda.Event(disable_timing=True) for _ in range(2)]
        self.lib = lib.lib
        self.device = dev
        self.n, self.k, self.t, self.kpad = p.n, p.k, p.t, w.k_pad
        self.rows = band_rows(p, tuning)
        self.slot_bytes = self.rows * 2 * w.k_pad
        qs, qh, sc = w.plane_ptrs
        self.params = _Params(qs, qh, sc, w.k_pad, 0, 0, 0)
        # Host-side alpha / beta (cuBLAS's default pointer mode): NVFP4's tensor scale
        # is applied by the GEMM in FP32, as the other routes apply it.
        self.alpha = ctypes.c_float(w.tensor_scale if p.qtype is QType.NVFP4 else 1.0)
        self.beta = ctypes.c_float(0.0)
        self.lock = threading.Lock()

    def bind(self, x_ptr: int, out_ptr: int, ws_ptr: int) -> DqLaunch:
        bands = []
        for b, n0 in enumerate(range(0, self.n, self.rows)):
            rows = min(self.rows, self.n - n0)
            ws = ws_ptr + (b % 2) * self.slot_bytes
            prm = _Params.from_buffer_copy(self.params)
            prm.n0, prm.rows, prm.ws = n0, rows, ws
            gx, gy = -(-rows // 16), -(-(self.kpad // 32) // TILE_CHUNKS)
            decode = KernelLaunch(self.func, (gx, gy, 1), (BLOCK, 1, 1), 0, prm, self.device)
            # Column-major view: out^T [N, T] (ldc N) = band [K_pad, rows]^T · x^T [K, T].
            gemm = (
                self.handle, _CUBLAS_OP_T, _CUBLAS_OP_N, rows, self.t, self.k,
                ctypes.addressof(self.alpha), ws, _CUDA_R_16BF, self.kpad,
                x_ptr, _CUDA_R_16BF, self.k,
                ctypes.addressof(self.beta), out_ptr + 2 * n0, _CUDA_R_16BF, self.n,
                _CUBLAS_COMPUTE_32F, _CUBLAS_GEMM_DEFAULT,
            )  # fmt: skip
            bands.append((decode, gemm))
        return DqLaunch(self, bands)

    def run(self, x_ptr: int, out_ptr: int, stream: int, ws_ptr: int) -> None:
        self.bind(x_ptr, out_ptr, ws_ptr).launch(stream)


class DqLaunch:
    """A plan's bands for one set of buffers. One band (the weight fits ``band_bytes``)
    runs on the caller's stream: decode, then GEMM, nothing to overlap. Several run as
    ``DqPlan`` says, the decodes on its side stream. The plan's lock covers its events,
    the handle's lock the handle's stream."""

    __slots__ = ("bands", "plan")

    def __init__(self, plan: DqPlan, bands: list[tuple[KernelLaunch, tuple[Any, ...]]]) -> None:
        self.plan, self.bands = plan, bands

    def launch(self, stream: int) -> None:
        _, runtime = cuda_api()
        pl = self.plan
        if runtime.getDevice() != pl.device:
            on_device(pl.device, self.launch, stream)
            return
        lib, side = pl.lib, pl.side.ptr
        with pl.lock, pl.cublas_lock:
            _check(lib.cublasSetStream_v2(pl.handle, stream), "cublasSetStream")
            if len(self.bands) == 1:
                dec, gemm = self.bands[0]
                dec.enqueue(stream)
                _check(lib.cublasGemmEx(*gemm), "cublasGemmEx")
                return
            runtime.eventRecord(pl.ev_start.ptr, stream)
            runtime.streamWaitEvent(side, pl.ev_start.ptr)
            for b, (dec, gemm) in enumerate(self.bands):
                slot = b % 2
                if b >= 2:  # the slot's previous GEMM must have read it
                    runtime.streamWaitEvent(side, pl.ev_mm[slot].ptr)
                dec.enqueue(side)
                runtime.eventRecord(pl.ev_dq[slot].ptr, side)
                runtime.streamWaitEvent(stream, pl.ev_dq[slot].ptr)
                _check(lib.cublasGemmEx(*gemm), "cublasGemmEx")
                runtime.eventRecord(pl.ev_mm[slot].ptr, stream)


class DqGemm:
    """The decode + cuBLAS route's launcher (see the module docstring)."""

    name = NAME
    archs: tuple[str, ...] | None = None
    nvrtc_options: tuple[str, ...] = ()
    rounds_weight = ROUNDS_WEIGHT
    tuning = DEFAULT
    abi = ABI

    def instances(self, tuning: DqGemmTuning | None = None) -> tuple[str, ...]:
        return INSTANCES

    def instance(self, p: Problem, tuning: DqGemmTuning | None = None) -> str:
        return instance(p)

    def t_edges(self, tuning: DqGemmTuning | None = None) -> tuple[int, ...]:
        return ()

    def supports(self, p: Problem) -> bool:
        return True  # any T, and cuBLAS runs on every architecture

    def workspace_bytes(self, p: Problem, tuning: DqGemmTuning | None = None) -> int:
        return workspace_bytes(p, tuning or self.tuning)

    def plan(
        self, p: Problem, w: PackedWeight, kernels: Kernels, tuning: DqGemmTuning | None = None
    ) -> DqPlan:
        dev = w.device_id
        if dev is None:
            raise TypeError("dq_gemm: a plan needs a device weight")
        fn = kernels.get(dev, NAME, instance(p), INSTANCES, self.nvrtc_options)
        return DqPlan(p, w, fn, tuning or self.tuning)


LAUNCHER = DqGemm()
