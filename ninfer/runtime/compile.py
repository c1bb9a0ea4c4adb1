"""Run-time compilation through CuPy (NVRTC): a cache of compiled modules per dispatcher.

The cache is content-addressed (device, arch, the assembled source's hash, options,
instance list), so two dispatchers may share one without ever being served a stale
module; a dispatcher that compiles other source text (an experiment's variant of a
kernel) passes its own ``source``, and its modules key on that text's hash.
"""

from __future__ import annotations

import functools
import hashlib
import threading
from collections.abc import Callable
from typing import Any

from .cupy_env import require_cupy
from .sources import assembled_source

OPTIONS: tuple[str, ...] = ("-std=c++17",)


class KernelCompileError(RuntimeError):
    """NVRTC rejected a kernel; the message carries its log."""


@functools.cache
def device_arch(device_id: int) -> str:
    cp = require_cupy()
    return str(cp.cuda.Device(device_id).compute_capability)  # e.g. "90"


class Kernels:
    """Compiled kernel functions, by (device, source, expression).

    All of a route's template instances are compiled in one module the first time, so
    later calls never compile (and stay capture-safe). ``source``: the text of
    ``kernels/<name>.cu`` to compile (default: the shipped, header-inlined source); it
    must return the same text for a name for the life of the cache.
    """

    def __init__(self, source: Callable[[str], str] = assembled_source) -> None:
        self.source = source
        self._modules: dict[tuple[int, str, str, str, tuple[str, ...], tuple[str, ...]], Any] = {}
        self._functions: dict[tuple[int, str, str, tuple[str, ...], tuple[str, ...]], Any] = {}
        self._lock = threading.Lock()

    def get(
        self, device_id: int, name: str, expr: str, exprs: tuple[str, ...], options: tuple[str, ...]
    ) -> Any:
        """The compiled ``expr`` of ``kernels/<name>.cu`` (one of ``exprs``) for ``device_id``;
        ``options``: the route's own NVRTC options (dq_rs: ``-arch=sm_90a``)."""
        fkey = (device_id, name, expr, exprs, options)
        fn = self._functions.get(fkey)
        if fn is None:
            fn = self._functions[fkey] = self._module(device_id, name, exprs, options).get_function(
                expr
            )
        return fn

    def _module(
        self, device_id: int, name: str, exprs: tuple[str, ...], options: tuple[str, ...]
    ) -> Any:
        text = self.source(name)
        opts = OPTIONS + options
        key = (device_id, device_arch(device_id), name, _hash(text), opts, exprs)
        mod = self._modules.get(key)
        if mod is None:
            with self._lock:
                mod = self._modules.get(key)
                if mod is None:
                    mod = self._modules[key] = _compile(device_id, name, text, exprs, opts)
        return mod


def _hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _compile(
    device_id: int, name: str, text: str, exprs: tuple[str, ...], options: tuple[str, ...]
) -> Any:
    cp = require_cupy()
    with cp.cuda.Device(device_id):
        mod = cp.RawModule(code=text, options=options, name_expressions=exprs)
        try:
            mod.compile()
        except cp.cuda.compiler.CompileException as e:
            raise KernelCompileError(
                f"NVRTC failed on kernels/{name}.cu for sm_{device_arch(device_id)}:\n{e}"
            ) from e
    return mod
