"""``PackedWeight``: the planes of one packed weight, on the host or on a GPU."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .layout import PLANES
from .qtype import K_ALIGN, QType, k_padded, weight_bytes
from .tiling import ROWS

# The kernels take N, K, K_pad and T as int32 (routes/launcher.py ``_Params``); a larger
# value would wrap in the parameter block, not fail. N and K are bounded so that their
# padded extents (N to a band of ROWS, K to K_pad) fit as well.
INT32_MAX = 2**31 - 1
N_MAX = INT32_MAX // ROWS * ROWS
K_MAX = INT32_MAX // K_ALIGN * K_ALIGN


def _extent(name: str, value: Any, limit: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name}: expected an int, got {type(value).__name__}")
    v = int(value)
    if v < 1:
        raise ValueError(f"{name}: expected {name} >= 1, got {v}")
    if v > limit:
        raise ValueError(f"{name}: expected {name} <= {limit} (the kernels take int32), got {v}")
    return v


@dataclass(frozen=True)
class PackedWeight:
    """A packed ``[N, K]`` weight. Planes are NumPy arrays (host) or CuPy arrays (device).

    ``device_id`` None means a host weight: every plane a ``numpy.ndarray``. An int means
    a device weight: every plane a C-contiguous CuPy array on that device. Construction
    checks this once, so ``linear()`` can trust ``is_device`` and the plane spans on
    every call. ``tensor_scale`` is NVFP4's FP32 per-tensor scale (1.0 for the others).
    """

    qtype: QType
    n: int
    k: int
    planes: Mapping[str, Any]
    tensor_scale: float = 1.0
    device_id: int | None = field(default=None)

    def __post_init__(self) -> None:
        # Normalised to int: n and k key the dispatch caches and fill int32 parameters.
        object.__setattr__(self, "n", _extent("N", self.n, N_MAX))
        object.__setattr__(self, "k", _extent("K", self.k, K_MAX))
        dev = self.device_id
        if dev is not None:
            if isinstance(dev, bool) or not isinstance(dev, (int, np.integer)):
                raise TypeError(f"device_id: expected an int or None, got {type(dev).__name__}")
            if dev < 0:
                raise ValueError(f"device_id: expected a device index >= 0, got {dev}")
            object.__setattr__(self, "device_id", int(dev))
        expected = PLANES[self.qtype]
        names = tuple(p.name for p in expected)
        if tuple(self.planes) != names:
            raise ValueError(
                f"{self.qtype.name} planes: expected {names}, got {tuple(self.planes)}"
            )
        for p in expected:
            arr = self.planes[p.name]
            self._check_placement(p.name, arr)
            want = p.shape(self.n, self.k_pad)
            if tuple(arr.shape) != want or np.dtype(arr.dtype) != p.dtype:
                raise ValueError(
                    f"{self.qtype.name} plane {p.name!r}: expected {p.dtype}{list(want)}, "
                    f"got {np.dtype(arr.dtype)}{list(arr.shape)}"
                )
        if not np.isfinite(self.tensor_scale) or self.tensor_scale <= 0:
            raise ValueError(f"tensor_scale: expected finite > 0, got {self.tensor_scale}")

    def _check_placement(self, name: str, arr: Any) -> None:
        where = f"{self.qtype.name} plane {name!r}"
        if self.device_id is None:
            if not isinstance(arr, np.ndarray):
                raise TypeError(
                    f"{where}: expected a host numpy.ndarray (device_id None), "
                    f"got {type(arr).__name__}"
                )
            return
        # What plane_ptrs / plane_spans and the launchers read: a CuPy MemoryPointer.
        mem = getattr(arr, "data", None)
        got = getattr(mem, "device_id", None)
        if isinstance(arr, np.ndarray) or got is None or not hasattr(mem, "ptr"):
            kind = (
                "a host numpy.ndarray (use to_device())"
                if isinstance(arr, np.ndarray)
                else type(arr).__name__
            )
            raise TypeError(
                f"{where}: expected a CuPy array on device {self.device_id}, got {kind}"
            )
        if got != self.device_id:
            raise ValueError(f"{where}: expected device {self.device_id}, got device {got}")
        if not arr.flags.c_contiguous:
            # Kernels address a plane as one dense block from its base pointer.
            raise ValueError(f"{where}: expected a C-contiguous array, got strides {arr.strides}")

    @property
    def k_pad(self) -> int:
        return k_padded(self.k)

    @property
    def nbytes(self) -> int:
        """Model weight bytes of DESIGN §4 (what a kernel must read)."""
        return weight_bytes(self.qtype, self.n, self.k)

    @property
    def storage_bytes(self) -> int:
        """Bytes the planes occupy (BF16 stores its K padding, the formula does not count it)."""
        return int(sum(int(a.nbytes) for a in self.planes.values()))

    @property
    def codes(self) -> Any:
        """The plane of codes (``qs``), or of values (``w``) for BF16: every format has one."""
        return self.planes.get("qs", self.planes.get("w"))

    @functools.cached_property
    def plane_ptrs(self) -> tuple[int, int, int]:
        """Device addresses of (codes or values, high bits, scales); 0 where a plane is absent.

        The planes never change after construction, so the launch path reads these (and
        ``plane_spans``) once per weight instead of once per call.
        """
        if not self.is_device:
            raise TypeError("plane_ptrs: expected a device PackedWeight, got a host one")
        pl = self.planes

        def ptr(a: Any) -> int:
            return 0 if a is None else int(a.data.ptr)

        return (ptr(self.codes), ptr(pl.get("qh")), ptr(pl.get("scales")))

    @functools.cached_property
    def plane_spans(self) -> tuple[tuple[str, int, int], ...]:
        """(name, first byte, one past the last byte) of every device plane."""
        if not self.is_device:
            raise TypeError("plane_spans: expected a device PackedWeight, got a host one")
        return tuple(
            (name, int(a.data.ptr), int(a.data.ptr) + int(a.nbytes))
            for name, a in self.planes.items()
        )

    @property
    def is_device(self) -> bool:
        return self.device_id is not None

    def to_device(self, device: int | None = None) -> PackedWeight:
        """Copy the planes to a CUDA device (the current one by default) with CuPy."""
        from ..runtime.cupy_env import require_cupy

        cp = require_cupy()
        dev = cp.cuda.Device(device) if device is not None else cp.cuda.Device()
        with dev:
            planes = {name: cp.ascontiguousarray(cp.asarray(a)) for name, a in self.planes.items()}
        return PackedWeight(self.qtype, self.n, self.k, planes, self.tensor_scale, int(dev.id))

    def to_host(self) -> PackedWeight:
        if not self.is_device:
            return self
        planes = {name: a.get() for name, a in self.planes.items()}
        return PackedWeight(self.qtype, self.n, self.k, planes, self.tensor_scale, None)

    def decode(self, full: bool = False) -> np.ndarray:
        """Exact values as float64 ``[N, K]`` (``[N, K_pad]`` with ``full``): the spec."""
        from .decode import decode_planes

        host = self.to_host()
        w = decode_planes(self.qtype, host.planes, self.n, self.k_pad, self.tensor_scale)
        return w if full else w[:, : self.k]
