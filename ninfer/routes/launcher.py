"""The launcher protocol every route implements, and the one-kernel launch plan.

A route module (``routes/<name>.py``) holds one ``Launcher`` instance, ``LAUNCHER``: the
kernel instances it compiles, its tuning (a frozen dataclass whose defaults are the
measured choices; a dispatcher may be given another), the T at which its tile changes,
what it requires of a problem, its workspace and its plan. The dispatcher
(``ninfer/ops/dispatch.py``) owns every cache; a launcher keeps none.

A *plan* (kernel handle, grid, block, shared memory, packed parameters) is built once
per (weight planes, problem, tuning). ``plan.bind(x, out, workspace)`` makes a *launch*:
the plan's parameter block with those addresses written in (and whatever else they
decide: x's alignment flag, dq_rs's tensor maps), which ``launch(stream)`` hands to
``cuLaunchKernel`` as is. The dispatcher keeps a launch per (weight, T, policy, buffers),
so a repeated call writes nothing and takes no lock: CuPy's generic kernel call costs
tens of microseconds of Python per launch with eleven arguments, and host dispatch of
``linear()`` is a budgeted cost (DESIGN §3; docs/perf/decode_h200.md, host dispatch).
"""

from __future__ import annotations

import ctypes
import functools
from typing import Any, Protocol

from ..formats.packed import PackedWeight
from ..formats.qtype import QType
from ..runtime.compile import Kernels
from .abi import Abi, Param, fields
from .problem import Problem


class Tuning(Protocol):
    """A launcher's host-side choices: a frozen dataclass; ``text()`` is its canonical
    form for the kernel fingerprint (only the fields that change what runs)."""

    def text(self) -> str: ...


class Launch(Protocol):
    def launch(self, stream: int) -> None:
        """Enqueue the call on ``stream`` (a raw handle): no checks, no writes, no sync."""
        ...


class Plan(Protocol):
    def bind(self, x_ptr: int, out_ptr: int, ws_ptr: int) -> Launch:
        """The launch for these buffers (addresses the dispatcher has checked)."""
        ...

    def run(self, x_ptr: int, out_ptr: int, stream: int, ws_ptr: int) -> None:
        """``bind(x_ptr, out_ptr, ws_ptr).launch(stream)``."""
        ...


class Launcher(Protocol):
    name: str  # kernels/<name>.cu, routes/<name>.py, tests/gpu/test_<name>.py
    archs: tuple[str, ...] | None  # the -arch targets its code is for; None: any
    nvrtc_options: tuple[str, ...]
    rounds_weight: frozenset[QType]  # formats whose decoded weight is rounded to BF16
    tuning: Any  # the measured default (a Tuning)
    abi: Abi  # its kernel's parameters and the constants shared with it (abi.py)

    def instances(self, tuning: Any = None) -> tuple[str, ...]: ...

    def instance(self, p: Problem, tuning: Any = None) -> str:
        """The template instance (one of ``instances``) that runs ``p``."""
        ...

    def t_edges(self, tuning: Any = None) -> tuple[int, ...]:
        """The last T of each inner tile: seams the conformance suite tests."""
        ...

    def supports(self, p: Problem) -> bool:
        """What the kernel itself can run (architecture, T range), whatever a table says."""
        ...

    def workspace_bytes(self, p: Problem, tuning: Any = None) -> int: ...

    def plan(self, p: Problem, w: PackedWeight, kernels: Kernels, tuning: Any = None) -> Plan:
        """The launch(es) for this weight and problem. A plan keeps the planes' addresses,
        never the weight object: the dispatcher's cache must not keep a weight alive."""
        ...


# The one-kernel routes' common signature (checked against the kernel: abi.py).
COMMON_PARAMS: tuple[Param, ...] = (
    ("qs", "const u8*", ctypes.c_uint64),
    ("qh", "const u8*", ctypes.c_uint64),
    ("sc", "const u8*", ctypes.c_uint64),
    ("tensor_scale", "float", ctypes.c_float),
    ("n", "int", ctypes.c_int32),
    ("k", "int", ctypes.c_int32),
    ("kpad", "int", ctypes.c_int32),
    ("x", "const bf16_t*", ctypes.c_uint64),
    ("out", "bf16_t*", ctypes.c_uint64),
    ("t", "int", ctypes.c_int32),
    ("xvec", "int", ctypes.c_int32),
)


class _Params(ctypes.Structure):
    _fields_ = fields(COMMON_PARAMS)


def arg_pointers(params: ctypes.Structure) -> Any:
    """cuLaunchKernel's ``kernelParams``: one pointer per field of ``params``, in order.

    The array points into ``params``, so writing a field changes the next launch; keep
    both alive as long as the plan.
    """
    base = ctypes.addressof(params)
    fields = type(params)._fields_
    return (ctypes.c_void_p * len(fields))(
        *[base + getattr(type(params), f[0]).offset for f in fields]
    )


class KernelPlan:
    """One prepared launch of a kernel with the common signature (see the module
    docstring); ``bind`` copies the parameter block and writes x, out and the x
    alignment flag into the copy."""

    def __init__(
        self,
        fn: Any,
        grid: tuple[int, int, int],
        block: tuple[int, int, int],
        shared: int,
        p: Problem,
        w: PackedWeight,
    ) -> None:
        import cupy

        dev = w.device_id
        if dev is None:
            raise TypeError("a plan needs a device weight")
        with cupy.cuda.Device(dev):
            if shared > 48 * 1024 and fn.max_dynamic_shared_size_bytes < shared:
                fn.max_dynamic_shared_size_bytes = shared
            self.func = int(fn.kernel.ptr)
        qs, qh, sc = w.plane_ptrs
        self.params = _Params(qs, qh, sc, w.tensor_scale, p.n, p.k, w.k_pad, 0, 0, p.t, 0)
        self.grid = grid
        self.block = block
        self.shared = shared
        self.device = dev
        self.row_bytes_x = p.k * 2

    def bind(self, x_ptr: int, out_ptr: int, ws_ptr: int = 0) -> KernelLaunch:
        prm = _Params.from_buffer_copy(self.params)
        prm.x = x_ptr
        prm.out = out_ptr
        # 16-byte x loads need a 16-byte aligned base and a row pitch of whole 16 bytes.
        prm.xvec = int(x_ptr % 16 == 0 and self.row_bytes_x % 16 == 0)
        return KernelLaunch(self.func, self.grid, self.block, self.shared, prm, self.device)

    def run(self, x_ptr: int, out_ptr: int, stream: int, ws_ptr: int = 0) -> None:
        self.bind(x_ptr, out_ptr, ws_ptr).launch(stream)


class KernelLaunch:
    """One kernel, its parameters final: ``launch`` is one ``cuLaunchKernel`` (which
    copies the parameters before it returns, so launches from several threads need no
    lock)."""

    __slots__ = ("argv", "argv_ptr", "device", "head", "params")

    def __init__(
        self,
        func: int,
        grid: tuple[int, int, int],
        block: tuple[int, int, int],
        shared: int,
        params: ctypes.Structure,
        device: int,
    ) -> None:
        self.params = params  # argv points into it: both live as long as the launch
        self.argv = arg_pointers(params)
        self.argv_ptr = ctypes.addressof(self.argv)
        self.head = (func, *grid, *block, shared)
        self.device = device

    def launch(self, stream: int) -> None:
        _, runtime = cuda_api()
        if runtime.getDevice() != self.device:
            on_device(self.device, self.launch, stream)
            return
        self.enqueue(stream)

    def enqueue(self, stream: int) -> None:
        """The launch alone, for a caller that has made the device current."""
        cuda_api()[0].launchKernel(*self.head, stream, self.argv_ptr, 0)


def k_pitch(k: int) -> int:
    """Elements per row of the workspace copy of x: K rounded up to 8 (16 bytes)."""
    return -(-k // 8) * 8


def x_copy_bytes(t: int, k: int) -> int:
    """Workspace bytes of that copy, rounded up to 256 (what follows it stays aligned)."""
    return -(-(t * k_pitch(k) * 2) // 256) * 256


def staged_x(x_ptr: int, ws_ptr: int, t: int, k: int) -> tuple[tuple[int, ...] | None, int, int]:
    """Where a kernel that reads x in 16-byte pieces at 16-byte addresses (cp.async, TMA)
    finds it: (the 2-D copy into the workspace that StagedLaunch makes first, or None
    where x is read in place; x's address; its row pitch in bytes)."""
    pitch = 2 * k
    if x_ptr % 16 == 0 and pitch % 16 == 0:
        return None, x_ptr, pitch
    padded = 2 * k_pitch(k)
    return (ws_ptr, padded, x_ptr, pitch, pitch, t), ws_ptr, padded


class StagedLaunch:
    """A kernel with the copies it needs first, for one set of buffers (dq_rs, dq_mma): x
    staged into the workspace where the kernel cannot read it in place, and split tiles'
    counters zeroed (the workspace is the caller's memory), both on the caller's stream."""

    __slots__ = ("kernel", "params", "stage", "zero")

    def __init__(self, kernel: KernelLaunch, stage: tuple[int, ...] | None,
                 zero: tuple[int, int, int] | None) -> None:  # fmt: skip
        self.kernel, self.stage, self.zero = kernel, stage, zero
        self.params = kernel.params

    def launch(self, stream: int) -> None:
        _, runtime = cuda_api()
        k = self.kernel
        if runtime.getDevice() != k.device:
            on_device(k.device, self.launch, stream)
            return
        if self.stage is not None:
            runtime.memcpy2DAsync(*self.stage, runtime.memcpyDeviceToDevice, stream)
        if self.zero is not None:
            runtime.memsetAsync(*self.zero, stream)
        k.enqueue(stream)


def on_device(device: int, launch: Any, stream: int) -> None:
    """``launch(stream)`` with ``device`` current: cuLaunchKernel and the async copies run
    in the current context, which must be the weight's."""
    import cupy

    with cupy.cuda.Device(device):
        launch(stream)


@functools.cache
def cuda_api() -> Any:
    """CuPy's driver and runtime modules (imported once: they need CuPy)."""
    from cupy.cuda import driver, runtime

    return driver, runtime
