"""The NumPy decoder: the executable spec of every plane layout (docs/formats.md)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from .fp import decode_e2m1, decode_e4m3
from .layout import PLANES
from .qtype import FORMATS, QType
from .tiling import untile


def nibbles(qs: np.ndarray) -> np.ndarray:
    """``[N, K/2]`` bytes -> ``[N, K]`` 4-bit codes, even k in the low nibble."""
    out = np.empty((qs.shape[0], qs.shape[1] * 2), np.int64)
    out[:, 0::2] = qs & 0x0F
    out[:, 1::2] = qs >> 4
    return out


def high_bits(qh: np.ndarray, bits: int) -> np.ndarray:
    """``[N, K*bits/8]`` bytes -> ``[N, K]`` high code bits, k ascending from bit 0."""
    per_byte = 8 // bits
    mask = (1 << bits) - 1
    out = np.empty((qh.shape[0], qh.shape[1] * per_byte), np.int64)
    for j in range(per_byte):
        out[:, j::per_byte] = (qh.astype(np.int64) >> (bits * j)) & mask
    return out


def integer_codes(qtype: QType, planes: Mapping[str, Any]) -> np.ndarray:
    """Signed integer values ``q`` of Q4/Q5/Q6/W8 (value = scale * q)."""
    spec = FORMATS[qtype]
    if qtype is QType.W8:
        return np.asarray(planes["qs"]).astype(np.int64)
    code = nibbles(np.asarray(planes["qs"]))
    if qtype is QType.Q5:
        code |= high_bits(np.asarray(planes["qh"]), 1) << 4
    elif qtype is QType.Q6:
        code |= high_bits(np.asarray(planes["qh"]), 2) << 4
    return code - spec.code_offset


def row_major(qtype: QType, planes: Mapping[str, Any], n: int, k_pad: int) -> dict[str, np.ndarray]:
    """Host planes in storage order -> row-major ``[N, cols]`` (band padding dropped)."""
    return {p.name: untile(np.asarray(planes[p.name]), p.tiling, k_pad)[:n] for p in PLANES[qtype]}


def decode_planes(
    qtype: QType, planes: Mapping[str, Any], n: int, k_pad: int, tensor_scale: float = 1.0
) -> np.ndarray:
    """Exact float64 ``[N, K_pad]`` values of host planes (storage order)."""
    planes = row_major(qtype, planes, n, k_pad)
    if qtype is QType.BF16:
        return np.asarray(planes["w"]).astype(np.float64)
    group = FORMATS[qtype].group
    if qtype is QType.NVFP4:
        vals = decode_e2m1(nibbles(np.asarray(planes["qs"])).astype(np.uint8))
        scales = decode_e4m3(np.asarray(planes["scales"])) * float(np.float32(tensor_scale))
    else:
        vals = integer_codes(qtype, planes).astype(np.float64)
        scales = np.asarray(planes["scales"]).astype(np.float64)
    out: np.ndarray = vals * np.repeat(scales, group, axis=1)
    assert out.shape == (n, k_pad)
    return out
