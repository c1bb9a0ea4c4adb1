"""Benchmark fixtures: valid random planes filled on the GPU (never zeros, never NaN/Inf).

Building a 1 GB weight this way costs no CPU time. Codes are uniform random bytes (every
byte is a valid code); scales are random positive values in a narrow range so outputs
stay finite; padding columns hold the zero code, as pack() writes them.
"""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np

from ..formats.layout import PLANES
from ..formats.packed import PackedWeight
from ..formats.qtype import QType, k_padded
from ..formats.tiling import tile
from ..runtime.cupy_env import require_cupy

# The byte that decodes to 0 in each code plane, for the padding columns (per format).
_ZERO_BYTE: dict[tuple[QType, str], int] = {
    (QType.Q4, "qs"): 0x88,  # nibbles 8, 8: code - 8 = 0
    (QType.Q5, "qs"): 0x00,  # low 0 with high bit 1: 16 - 16 = 0
    (QType.Q5, "qh"): 0xFF,
    (QType.Q6, "qs"): 0x00,  # low 0 with high bits 2: 32 - 32 = 0
    (QType.Q6, "qh"): 0xAA,
    (QType.W8, "qs"): 0x00,
    (QType.NVFP4, "qs"): 0x00,
}


def random_device_weight(qtype: QType, n: int, k: int, seed: int = 0) -> PackedWeight:
    cp = require_cupy()
    rng = cp.random.default_rng(seed)
    k_pad = k_padded(k)
    planes: dict[str, Any] = {}
    for p in PLANES[qtype]:
        shape = p.shape(n, k_pad)
        if qtype is QType.BF16:
            arr = (rng.standard_normal(shape, dtype=cp.float32) * 0.05 + 0.001).astype(
                ml_dtypes.bfloat16
            )
            arr[:, k:] = 0
        elif p.name == "scales" and qtype is QType.NVFP4:
            arr = rng.integers(0x20, 0x48, size=shape, dtype=cp.uint8)  # E4M3 0.0156 .. 0.75
        elif p.name == "scales":
            arr = (rng.random(shape, dtype=cp.float32) * 0.01 + 0.001).astype(cp.float16)
        else:
            arr = rng.integers(0, 256, size=shape, dtype=cp.uint8)
            if p.dtype == np.dtype(np.int8):
                arr = arr.view(cp.int8)
            if k < k_pad:
                first = k // (k_pad // shape[1]) if shape[1] != k_pad else k
                arr[:, first:] = np.array(_ZERO_BYTE[(qtype, p.name)], np.uint8).view(p.dtype)
        # Drawn row-major, stored band-tiled (formats/tiling.py), as pack() stores.
        planes[p.name] = tile(cp.ascontiguousarray(arr), p.tiling, k_pad)
    ts = 1.0 / (6.0 * 448.0) if qtype is QType.NVFP4 else 1.0
    return PackedWeight(qtype, n, k, planes, ts, int(cp.cuda.Device().id))


def random_activations(t: int, k: int, seed: int = 1) -> Any:
    cp = require_cupy()
    rng = cp.random.default_rng(seed)
    return (rng.standard_normal((t, k), dtype=cp.float32) + 0.01).astype(ml_dtypes.bfloat16)
