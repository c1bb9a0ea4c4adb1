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
from dataclasses import dataclass
from typing import Any

from ..formats.packed import PackedWeight
from ..runtime.compile import get_kernel
from ..runtime.interop import DevArray
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


@dataclass
class _Plan:
    func: int  # CUfunction
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    shared: int
    params: _Params
    argv: Any  # void*[11] pointing into params
    device: int


_MAX_PLANS = 4096
_local = threading.local()  # plans per thread: a plan's parameter block is mutable
_kernels: dict[tuple[int, str, str], Any] = {}


def _kernel(device: int, mod: Any, expr: str) -> Any:
    key = (device, mod.NAME, expr)
    fn = _kernels.get(key)
    if fn is None:
        fn = get_kernel(device, mod.NAME, expr, mod.INSTANCES)
        _kernels[key] = fn
    return fn


def _plan(route: Route, p: Problem, w: PackedWeight) -> _Plan:
    import cupy

    mod = route.launcher
    dev = w.device_id
    assert dev is not None
    with cupy.cuda.Device(dev):
        fn = _kernel(dev, mod, mod.instance(p))
        shared = int(mod.shared_bytes(p))
        if shared > 48 * 1024 and fn.max_dynamic_shared_size_bytes < shared:
            fn.max_dynamic_shared_size_bytes = shared
        func = int(fn.kernel.ptr)
    qs, qh, sc = w.plane_ptrs
    prm = _Params(qs, qh, sc, w.tensor_scale, p.n, p.k, w.k_pad, 0, 0, p.t, 0)
    argv = (ctypes.c_void_p * len(_Params._fields_))(
        *[ctypes.addressof(prm) + getattr(_Params, f[0]).offset for f in _Params._fields_]
    )
    return _Plan(func, mod.grid(p), mod.block(p), shared, prm, argv, dev)


def launch(
    route: Route, p: Problem, w: PackedWeight, x: DevArray, out: DevArray, stream: int
) -> None:
    plans = getattr(_local, "plans", None)
    if plans is None:
        plans = _local.plans = {}
    key = (route.name, p, w.plane_ptrs, w.tensor_scale)
    plan = plans.get(key)
    if plan is None:
        if len(plans) >= _MAX_PLANS:  # weights come and go in a long-lived process
            plans.clear()
        plan = plans[key] = _plan(route, p, w)
    prm = plan.params
    prm.x = x.ptr
    prm.out = out.ptr
    # 16-byte x loads need a 16-byte aligned base and a row pitch of whole 16 bytes.
    prm.xvec = int(x.ptr % 16 == 0 and (p.k * 2) % 16 == 0)
    _launch_kernel(plan, stream)


_cuda: Any = None


def _launch_kernel(plan: _Plan, stream: int) -> None:
    global _cuda
    if _cuda is None:
        from cupy.cuda import driver, runtime

        _cuda = (driver, runtime)
    driver, runtime = _cuda
    g, b = plan.grid, plan.block
    if runtime.getDevice() != plan.device:
        # cuLaunchKernel runs in the current context: the weight's device must be current.
        with _device(plan.device):
            driver.launchKernel(
                plan.func, *g, *b, plan.shared, stream, ctypes.addressof(plan.argv), 0
            )
        return
    driver.launchKernel(plan.func, *g, *b, plan.shared, stream, ctypes.addressof(plan.argv), 0)


def _device(dev: int) -> Any:
    import cupy

    return cupy.cuda.Device(dev)
