"""Zero-copy views of CuPy arrays and torch CUDA tensors, and stream resolution."""

from __future__ import annotations

import math
import sys
from typing import Any, NamedTuple

import numpy as np


class DevArray(NamedTuple):
    """What the op needs to know about an array: no reference to a framework type.

    A NamedTuple, not a dataclass: ``linear()`` builds two per call and a frozen
    dataclass costs microseconds of host dispatch each (docs/perf/decode_h200.md, target 7).
    """

    kind: str  # "cupy" | "torch"
    ptr: int
    shape: tuple[int, ...]
    strides: tuple[int, ...]  # in elements
    dtype: str  # "bfloat16", "float16", ...
    itemsize: int
    device: int

    @property
    def c_contiguous(self) -> bool:
        expect = 1
        for dim, st in zip(reversed(self.shape), reversed(self.strides), strict=True):
            if dim != 1 and st != expect:
                return False
            expect *= dim
        return True

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * self.itemsize

    def span(self) -> tuple[int, int]:
        """[first byte, one past the last byte] this view can touch."""
        if self.nbytes == 0:
            return (self.ptr, self.ptr)
        last = (
            sum((d - 1) * s for d, s in zip(self.shape, self.strides, strict=True)) * self.itemsize
        )
        return (self.ptr, self.ptr + last + self.itemsize)


def _is_torch(a: Any) -> bool:
    return type(a).__module__.startswith("torch") and hasattr(a, "data_ptr")


def _is_cupy(a: Any) -> bool:
    return type(a).__module__.startswith("cupy") and hasattr(a, "data") and hasattr(a, "device")


_CUPY_NDARRAY: Any = None


def _cupy_ndarray() -> Any:
    global _CUPY_NDARRAY
    if _CUPY_NDARRAY is None:
        try:
            import cupy

            _CUPY_NDARRAY = cupy.ndarray
        except ImportError:
            _CUPY_NDARRAY = ()
    return _CUPY_NDARRAY


def _elem_strides(
    shape: tuple[int, ...], strides: tuple[int, ...], item: int, what: str
) -> tuple[int, ...]:
    """Byte strides (CuPy's) as element strides, refusing any that flooring would change.

    A stride of 3 bytes for a 2-byte dtype would floor to 1 and pass as contiguous. The
    stride of an extent-1 axis never moves an address, so it may be anything.
    """
    for d, s in zip(shape, strides, strict=True):
        if s % item and d > 1:
            raise ValueError(
                f"{what}: expected byte strides that are multiples of the item size {item}, "
                f"got {strides}"
            )
    return tuple(s // item for s in strides)


def describe(a: Any, what: str) -> DevArray:
    """Describe a CuPy array or a torch CUDA tensor; TypeError for anything else."""
    if type(a) is _cupy_ndarray():  # the common case first, on the shortest path
        mem = a.data
        dt = a.dtype
        item = dt.itemsize
        st = a.strides
        for s in st:  # inline, not _elem_strides: this path is per call, per array
            if s % item:
                _elem_strides(a.shape, st, item, what)  # raises unless on an extent-1 axis
                break
        return DevArray(
            "cupy",
            mem.ptr,
            a.shape,
            tuple(s // item for s in st),
            dt.name,
            item,
            mem.device_id,
        )
    if isinstance(a, np.ndarray):
        raise TypeError(f"{what}: expected a CUDA array (CuPy or torch), got a host numpy.ndarray")
    if _is_torch(a):
        if not a.is_cuda:
            raise TypeError(f"{what}: expected a CUDA tensor, got a host torch tensor ({a.device})")
        if a.requires_grad:
            # The kernels write out in place behind autograd's back: no graph, no gradient.
            raise ValueError(
                f"{what}: expected a tensor without requires_grad (linear() has no autograd: "
                "call it under torch.no_grad() or pass .detach()), got requires_grad=True"
            )
        dtype = str(a.dtype).removeprefix("torch.")
        return DevArray(
            "torch",
            int(a.data_ptr()),
            tuple(a.shape),
            tuple(a.stride()),
            dtype,
            int(a.element_size()),
            int(a.device.index),
        )
    if _is_cupy(a):
        item = int(a.itemsize)
        shape = tuple(a.shape)
        return DevArray(
            "cupy",
            int(a.data.ptr),
            shape,
            _elem_strides(shape, tuple(a.strides), item, what),
            a.dtype.name,
            item,
            int(a.device.id),
        )
    raise TypeError(f"{what}: expected a CuPy array or a torch CUDA tensor, got {type(a).__name__}")


_TORCH_TENSOR: Any = None


def call_key(a: Any) -> tuple[Any, ...] | None:
    """What ``describe`` and the checks read of ``a``, as a hashable key: two calls whose
    arrays give equal keys pass or fail the same checks and launch on the same addresses.
    None for a type without a short path (every call of it goes the whole way)."""
    t = type(a)
    if t is _cupy_ndarray():
        m = a.data
        return (t, m.ptr, m.device_id, a.shape, a.strides, a.dtype)
    if t is _TORCH_TENSOR:
        # requires_grad can be switched on in place; a CPU tensor's device is -1.
        return (t, a.data_ptr(), a.get_device(), a.shape, a.stride(), a.dtype, a.requires_grad)
    if _TORCH_TENSOR is None and _is_torch(a):
        _remember_torch(t)
    return None


def _remember_torch(t: type) -> None:
    # A torch tensor exists, so torch is imported: no import on this path.
    global _TORCH_TENSOR
    torch = sys.modules.get("torch")
    if torch is not None and t is torch.Tensor:
        _TORCH_TENSOR = t


_GET_STREAM: Any = None


def _current_cupy_stream() -> Any:
    global _GET_STREAM
    if _GET_STREAM is None:
        import cupy

        _GET_STREAM = cupy.cuda.get_current_stream
    return _GET_STREAM


def resolve_stream(stream: Any, prefer_torch: bool, device: int | None = None) -> int:
    """A raw cudaStream_t handle for ``stream``, for a launch on ``device``.

    None: the current stream of ``device`` (the current device's when ``device`` is None)
    in the inputs' framework. A torch or CuPy stream that belongs to another device than
    ``device`` is a ValueError. Its device is not always known: a CuPy stream with
    ``device_id == -1`` (``Stream.null``, ``Stream.ptds``, an ``ExternalStream`` made
    without one) and a raw int handle carry none, so they pass unchecked; the caller
    vouches for a raw handle, as CUDA itself needs it to belong to the launch's device.
    """
    if stream is None:
        if prefer_torch:
            import torch

            return int(torch.cuda.current_stream(device).cuda_stream)
        return int(_current_cupy_stream()(-1 if device is None else device).ptr)
    if isinstance(stream, (int, np.integer)) and not isinstance(stream, bool):
        if stream < 0:
            raise ValueError(f"stream: expected a non-negative raw handle, got {stream}")
        return int(stream)
    if hasattr(stream, "cuda_stream"):  # torch.cuda.Stream / ExternalStream
        _check_stream_device(getattr(stream, "device_index", None), device)
        return int(stream.cuda_stream)
    if hasattr(stream, "ptr"):  # cupy.cuda.Stream / ExternalStream
        _check_stream_device(getattr(stream, "device_id", None), device)
        return int(stream.ptr)
    raise TypeError(
        f"stream: expected None, a CuPy stream, a torch stream or a raw handle, got {type(stream).__name__}"
    )


def _check_stream_device(got: Any, device: int | None) -> None:
    # None / -1: the stream does not say (see resolve_stream).
    if device is None or got is None or got == -1:
        return
    if int(got) != device:
        raise ValueError(
            f"stream: expected a stream of device {device} (the weight's), got one of device {got}"
        )
