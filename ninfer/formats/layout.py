"""Plane layout of every format: names, dtypes and row widths (docs/formats.md).

All planes are row-major ``[N, cols]`` over the padded K (``K_pad``); row ``n`` of
every plane belongs to output row ``n``. This table is read by ``pack``, the NumPy
decoder, the device fixture and the op's validation alike.
"""

from __future__ import annotations

from dataclasses import dataclass

import ml_dtypes
import numpy as np

from .qtype import QType


@dataclass(frozen=True)
class Plane:
    name: str
    dtype: np.dtype
    per_row: int  # divisor: cols = K_pad // per_row * mult
    mult: int = 1

    def cols(self, k_pad: int) -> int:
        return k_pad // self.per_row * self.mult

    def shape(self, n: int, k_pad: int) -> tuple[int, int]:
        return (n, self.cols(k_pad))


_U8 = np.dtype(np.uint8)
_F16 = np.dtype(np.float16)

PLANES: dict[QType, tuple[Plane, ...]] = {
    # qs: two 4-bit codes per byte, k even in the low nibble.
    QType.Q4: (Plane("qs", _U8, 2), Plane("scales", _F16, 64)),
    # qh: bit 4 of each code, one bit per k, LSB first (k = 8*byte + bit).
    QType.Q5: (Plane("qs", _U8, 2), Plane("qh", _U8, 8), Plane("scales", _F16, 64)),
    # qh: bits 4..5 of each code, two bits per k, k%4 == 0 in bits 0..1.
    QType.Q6: (Plane("qs", _U8, 2), Plane("qh", _U8, 4), Plane("scales", _F16, 64)),
    QType.W8: (Plane("qs", np.dtype(np.int8), 1), Plane("scales", _F16, 32)),
    # qs: E2M1 nibbles as Q4; scales: one E4M3fn byte per 16 weights.
    QType.NVFP4: (Plane("qs", _U8, 2), Plane("scales", _U8, 16)),
    QType.BF16: (Plane("w", np.dtype(ml_dtypes.bfloat16), 1),),
}
