"""Weight formats: the byte formulas, the plane layouts, the packer and the decoder."""

from .layout import PLANES, Plane
from .pack import pack
from .packed import PackedWeight
from .qtype import FORMATS, K_ALIGN, FormatSpec, QType, k_padded, weight_bytes

__all__ = [
    "FORMATS",
    "K_ALIGN",
    "PLANES",
    "FormatSpec",
    "PackedWeight",
    "Plane",
    "QType",
    "k_padded",
    "pack",
    "weight_bytes",
]
