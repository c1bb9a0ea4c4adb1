"""Plane layout of every format: names, dtypes, row widths, storage order (docs/formats.md).

Logically every plane is ``[N, cols]`` over the padded K (``K_pad``), row ``n`` for
output row ``n``; in storage, rows are padded to a band of 16 and the bytes are in the
band-tiled order of ``tiling.py`` (``Plane.tiling`` names the kind). This table is
read by ``pack``, the NumPy decoder, the device fixture and the op's validation alike.
"""

from __future__ import annotations

from dataclasses import dataclass

import ml_dtypes
import numpy as np

from .qtype import QType
from .tiling import n_stored


@dataclass(frozen=True)
class Plane:
    name: str
    dtype: np.dtype
    per_row: int  # divisor: cols = K_pad // per_row
    tiling: str  # storage order kind (tiling.py)

    def cols(self, k_pad: int) -> int:
        return k_pad // self.per_row

    def shape(self, n: int, k_pad: int) -> tuple[int, int]:
        """The stored array's shape: N padded to a whole band of 16 rows."""
        return (n_stored(n), self.cols(k_pad))


_U8 = np.dtype(np.uint8)
_F16 = np.dtype(np.float16)

PLANES: dict[QType, tuple[Plane, ...]] = {
    # qs: two 4-bit codes per byte, k even in the low nibble.
    QType.Q4: (Plane("qs", _U8, 2, "codes4"), Plane("scales", _F16, 64, "rows")),
    # qh: bit 4 of each code, one bit per k (row-major: k = 8*byte + bit, LSB first).
    QType.Q5: (
        Plane("qs", _U8, 2, "codes4"),
        Plane("qh", _U8, 8, "high1"),
        Plane("scales", _F16, 64, "rows"),
    ),
    # qh: bits 4..5 of each code, two bits per k (row-major: k%4 == 0 in bits 0..1).
    QType.Q6: (
        Plane("qs", _U8, 2, "codes4"),
        Plane("qh", _U8, 4, "high2"),
        Plane("scales", _F16, 64, "rows"),
    ),
    QType.W8: (Plane("qs", np.dtype(np.int8), 1, "codes8"), Plane("scales", _F16, 32, "rows")),
    # qs: E2M1 nibbles as Q4; scales: one E4M3fn byte per 16 weights.
    QType.NVFP4: (Plane("qs", _U8, 2, "codes4"), Plane("scales", _U8, 16, "rows")),
    QType.BF16: (Plane("w", np.dtype(ml_dtypes.bfloat16), 1, "bf16"),),
}
