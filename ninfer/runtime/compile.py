"""Run-time compilation through CuPy (NVRTC), cached per (device, arch, source, options)."""

from __future__ import annotations

import functools
import threading
from typing import Any

from .cupy_env import require_cupy
from .sources import assembled_source, source_hash

OPTIONS: tuple[str, ...] = ("-std=c++17",)


class KernelCompileError(RuntimeError):
    """NVRTC rejected a kernel; the message carries its log."""


_cache: dict[tuple[int, str, str, str, tuple[str, ...], tuple[str, ...]], Any] = {}
_lock = threading.Lock()


@functools.cache
def device_arch(device_id: int) -> str:
    cp = require_cupy()
    return str(cp.cuda.Device(device_id).compute_capability)  # e.g. "90"


def get_kernel(
    device_id: int,
    source: str,
    name_expr: str,
    all_exprs: tuple[str, ...],
    extra_options: tuple[str, ...] = (),
) -> Any:
    """The compiled ``name_expr`` of ``kernels/<source>.cu`` for ``device_id``.

    All of ``all_exprs`` (the route's template instances) are compiled in one module
    the first time, so later calls never compile (and stay capture-safe).
    ``extra_options``: a route's own NVRTC options (dq_rs: ``-arch=sm_90a``).
    """
    arch = device_arch(device_id)
    options = OPTIONS + extra_options
    key = (device_id, arch, source, source_hash(source), options, all_exprs)
    mod = _cache.get(key)
    if mod is None:
        with _lock:
            mod = _cache.get(key)
            if mod is None:
                mod = _compile(device_id, source, all_exprs, options)
                _cache[key] = mod
    return mod.get_function(name_expr)


def _compile(device_id: int, source: str, exprs: tuple[str, ...], options: tuple[str, ...]) -> Any:
    cp = require_cupy()
    with cp.cuda.Device(device_id):
        mod = cp.RawModule(code=assembled_source(source), options=options, name_expressions=exprs)
        try:
            mod.compile()
        except cp.cuda.compiler.CompileException as e:
            raise KernelCompileError(
                f"NVRTC failed on kernels/{source}.cu for sm_{device_arch(device_id)}:\n{e}"
            ) from e
    return mod
