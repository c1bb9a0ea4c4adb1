"""The one place a route's kernel is launched (argument marshalling shared by routes)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..formats.packed import PackedWeight
from ..runtime.compile import get_kernel
from ..runtime.interop import DevArray
from .problem import Problem
from .table import Route

_streams: dict[tuple[int, int], Any] = {}


def _external_stream(handle: int, device: int) -> Any:
    s = _streams.get((handle, device))
    if s is None:
        import warnings

        import cupy

        # A raw cudaStream_t from any framework: ExternalStream is the CuPy type for it
        # (Stream.from_external wants an object with the __cuda_stream__ protocol).
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            s = cupy.cuda.ExternalStream(handle, device)
        _streams[(handle, device)] = s
    return s


def _ptr(a: Any) -> np.uint64:
    return np.uint64(0 if a is None else a.data.ptr)


def launch(
    route: Route, p: Problem, w: PackedWeight, x: DevArray, out: DevArray, stream: int
) -> None:
    mod = route.launcher
    assert w.device_id is not None
    fn = get_kernel(w.device_id, mod.NAME, mod.instance(p), mod.INSTANCES)
    planes = w.planes
    first = planes.get("qs", planes.get("w"))
    # 16-byte x loads need a 16-byte aligned base and a row pitch of whole 16 bytes.
    xvec = int(x.ptr % 16 == 0 and (p.k * 2) % 16 == 0)
    args = (
        _ptr(first),
        _ptr(planes.get("qh")),
        _ptr(planes.get("scales")),
        np.float32(w.tensor_scale),
        np.int32(p.n),
        np.int32(p.k),
        np.int32(w.k_pad),
        np.uint64(x.ptr),
        np.uint64(out.ptr),
        np.int32(p.t),
        np.int32(xvec),
    )
    with _external_stream(stream, w.device_id):
        fn(mod.grid(p), mod.block(p), args)
