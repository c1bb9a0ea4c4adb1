"""TMA tensor maps: ``cuTensorMapEncodeTiled`` from the driver library CuPy already uses.

Routes that copy with the Hopper bulk-tensor engine (``dq_rs``) encode their maps here;
a map is 128 opaque bytes that travels by value in a kernel's parameters.
"""

from __future__ import annotations

import ctypes
import functools
import threading
from typing import Any

# cuTensorMapEncodeTiled enums (cuda.h).
UINT64, BF16 = 4, 9
SWIZZLE_NONE, SWIZZLE_128B = 0, 3
L2_PROMO_128B = 2
TensorMap = ctypes.c_uint64 * 16  # CUtensorMap: 128 opaque bytes


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
        self.map = TensorMap.from_address((ctypes.addressof(self.buf) + 63) & ~63)
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
                0, swizzle, L2_PROMO_128B, 0,
            )  # fmt: skip
            if rc != 0:
                raise RuntimeError(
                    f"cuTensorMapEncodeTiled failed with CUresult {rc} "
                    f"(address {ptr:#x}, dims {dims}, pitch {pitch}, box {box})"
                )
            return TensorMap(*self.map)


@functools.cache
def _driver() -> _Driver:
    return _Driver()


def encode_2d(
    ptr: int, dtype: int, dims: tuple[int, int], pitch: int, box: tuple[int, int], swizzle: int
) -> Any:
    """A 2-D tensor map (dims innermost first, pitch in bytes); out-of-bounds boxes read
    zero. Needs the NVIDIA driver (libcuda), not a device."""
    return _driver().encode(ptr, dtype, dims, pitch, box, swizzle)


def band_map(plane: Any, box_bytes: int) -> Any:
    """A band-tiled weight plane (formats.md: bands of 16 rows, each contiguous) as
    [bands][band bytes / 8] 8-byte words; a box is ``box_bytes`` of each of 8 bands (bands
    past the plane read zero). An empty map where the format has no such plane."""
    if plane is None or box_bytes == 0:
        return TensorMap()
    bands = int(plane.shape[0]) // 16
    pitch = int(plane.nbytes) // bands
    return encode_2d(
        int(plane.data.ptr), UINT64, (pitch // 8, bands), pitch, (box_bytes // 8, 8), SWIZZLE_NONE
    )
