"""The one place a route's kernel is launched (argument marshalling shared by routes).

A launch *plan* (kernel handle, grid, block, shared memory, packed parameters) is built
once per (weight planes, problem) and cached; a call then writes the three values that
change (x, out, the x alignment flag) into the plan's parameter block and calls
``cuLaunchKernel`` directly. CuPy's generic kernel call costs tens of microseconds of
Python per launch with eleven arguments; this path keeps host dispatch of ``linear()``
within its budget (docs/perf/decode_h200.md, target 7).
"""

from __future__ import annotations

import ctypes
import threading
from typing import Any

from ..formats.packed import PackedWeight
from ..runtime.compile import get_kernel
from .problem import Problem
from .table import Route


class _Params(ctypes.Structure):
    # The kernels' common signature: (qs, qh, sc, tensor_scale, N, K, kpad, x, out, T, xvec).
    _fields_ = [
        ("qs", ctypes.c_uint64),
        ("qh", ctypes.c_uint64),
        ("sc", ctypes.c_uint64),
        ("tensor_scale", ctypes.c_float),
        ("n", ctypes.c_int32),
        ("k", ctypes.c_int32),
        ("kpad", ctypes.c_int32),
        ("x", ctypes.c_uint64),
        ("out", ctypes.c_uint64),
        ("t", ctypes.c_int32),
        ("xvec", ctypes.c_int32),
    ]


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


class Plan:
    """One prepared launch: kernel handle, grid, block, shared memory, packed parameters.

    ``run`` writes the values that change per call into the parameter block and calls
    ``cuLaunchKernel`` (which copies the parameters before returning); the lock keeps
    two threads launching the same plan from mixing their x and out.
    """

    def __init__(self, route: Route, p: Problem, w: PackedWeight) -> None:
        import cupy

        mod = route.launcher
        dev = w.device_id
        assert dev is not None
        with cupy.cuda.Device(dev):
            fn = _kernel(dev, mod, mod.instance(p))
            shared = int(mod.shared_bytes(p))
            if shared > 48 * 1024 and fn.max_dynamic_shared_size_bytes < shared:
                fn.max_dynamic_shared_size_bytes = shared
            self.func = int(fn.kernel.ptr)
        qs, qh, sc = w.plane_ptrs
        self.params = _Params(qs, qh, sc, w.tensor_scale, p.n, p.k, w.k_pad, 0, 0, p.t, 0)
        self.argv = arg_pointers(self.params)
        self.argv_ptr = ctypes.addressof(self.argv)
        self.grid = mod.grid(p)
        self.block = mod.block(p)
        self.shared = shared
        self.device = dev
        self.row_bytes_x = p.k * 2
        self.lock = threading.Lock()

    def run(self, x_ptr: int, out_ptr: int, stream: int, ws_ptr: int = 0) -> None:
        driver, runtime = _cuda_api()
        g, b = self.grid, self.block
        with self.lock:
            prm = self.params
            prm.x = x_ptr
            prm.out = out_ptr
            # 16-byte x loads need a 16-byte aligned base and a row pitch of whole 16 bytes.
            prm.xvec = int(x_ptr % 16 == 0 and self.row_bytes_x % 16 == 0)
            if runtime.getDevice() != self.device:
                # cuLaunchKernel runs in the current context: the weight's device must be current.
                import cupy

                with cupy.cuda.Device(self.device):
                    driver.launchKernel(self.func, *g, *b, self.shared, stream, self.argv_ptr, 0)
                return
            driver.launchKernel(self.func, *g, *b, self.shared, stream, self.argv_ptr, 0)


_kernels: dict[tuple[int, str, str], Any] = {}
_cuda: Any = None


def _cuda_api() -> Any:
    global _cuda
    if _cuda is None:
        from cupy.cuda import driver, runtime

        _cuda = (driver, runtime)
    return _cuda


def _kernel(device: int, mod: Any, expr: str) -> Any:
    key = (device, mod.NAME, expr)
    fn = _kernels.get(key)
    if fn is None:
        fn = get_kernel(device, mod.NAME, expr, mod.INSTANCES, getattr(mod, "NVRTC_OPTIONS", ()))
        _kernels[key] = fn
    return fn
