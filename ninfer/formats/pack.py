"""``pack()``: float weights -> packed planes, deterministic, round-to-nearest-even.

Scale choice (documented in docs/formats.md):
- Q4/Q5/Q6/W8: per group ``scale = fp16(amax / qmax)``, ``qmax = 2^(b-1) - 1``;
  ``q = clip(rint(w / scale), -2^(b-1), qmax)`` with the stored (rounded) scale.
- NVFP4: ``tensor_scale = fp32(amax_tensor / (6 * 448))``; per group
  ``scale = e4m3(amax_group / 6 / tensor_scale)`` (RNE, saturating); codes
  ``e2m1(w / (tensor_scale * scale))``.
- BF16: ``bf16(w)`` (RNE).
"""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np

from .fp import E2M1_MAX, E4M3_MAG, E4M3_MAX, encode_e2m1, encode_e4m3
from .layout import PLANES
from .packed import PackedWeight
from .qtype import FORMATS, QType, k_padded
from .tiling import tile

_ROW_BLOCK = 2048  # rows packed at a time: bounds the float64 temporaries


def _pad(w: np.ndarray, k_pad: int) -> np.ndarray:
    out = np.zeros((w.shape[0], k_pad), np.float64)
    out[:, : w.shape[1]] = w
    return out


def _pack_integer(qtype: QType, w: np.ndarray) -> dict[str, np.ndarray]:
    spec = FORMATS[qtype]
    n, k_pad = w.shape
    qmax = (1 << (spec.bits - 1)) - 1
    g = w.reshape(n, k_pad // spec.group, spec.group)
    amax = np.abs(g).max(axis=2)
    with np.errstate(over="ignore"):
        scale16 = (amax / qmax).astype(np.float16)
    if not np.all(np.isfinite(scale16)):
        raise ValueError(f"{qtype.name}: a group's scale overflows FP16 (|w| up to {amax.max():g})")
    s = scale16.astype(np.float64)[:, :, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        q = np.where(s > 0, np.rint(g / s), 0.0)
    q = np.clip(q, -(qmax + 1), qmax).astype(np.int64).reshape(n, k_pad)
    if qtype is QType.W8:
        return {"qs": q.astype(np.int8), "scales": scale16}
    code = q + spec.code_offset
    low = code & 0x0F
    planes = {"qs": (low[:, 0::2] | (low[:, 1::2] << 4)).astype(np.uint8)}
    if qtype is QType.Q5:
        planes["qh"] = np.packbits((code >> 4).astype(np.uint8), axis=1, bitorder="little")
    elif qtype is QType.Q6:
        hb = code >> 4
        planes["qh"] = (
            hb[:, 0::4] | hb[:, 1::4] << 2 | hb[:, 2::4] << 4 | hb[:, 3::4] << 6
        ).astype(np.uint8)
    planes["scales"] = scale16
    return planes


def _nvfp4_tensor_scale(w: np.ndarray) -> float:
    amax = float(np.abs(w).max()) if w.size else 0.0
    ts = float(np.float32(amax / (E2M1_MAX * E4M3_MAX)))
    return ts if ts > 0 and np.isfinite(ts) else 1.0


def _pack_nvfp4(w: np.ndarray, tensor_scale: float) -> dict[str, np.ndarray]:
    n, k_pad = w.shape
    g = w.reshape(n, k_pad // 16, 16)
    amax = np.abs(g).max(axis=2)
    sc = encode_e4m3(amax / E2M1_MAX / tensor_scale)
    denom = (tensor_scale * E4M3_MAG[sc])[:, :, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        v = np.where(denom > 0, g / denom, 0.0)
    code = encode_e2m1(v).astype(np.int64).reshape(n, k_pad)
    return {"qs": (code[:, 0::2] | (code[:, 1::2] << 4)).astype(np.uint8), "scales": sc}


def pack(w: Any, qtype: QType | str) -> PackedWeight:
    """Pack a host float array ``[N, K]`` into ``qtype`` (exact and deterministic)."""
    qt = QType.parse(qtype)
    if not isinstance(w, np.ndarray):
        raise TypeError(f"pack: expected a host numpy.ndarray [N, K], got {type(w).__name__}")
    if w.ndim != 2 or w.shape[0] < 1 or w.shape[1] < 1:
        raise ValueError(f"pack: expected a 2-D [N, K] array with N, K >= 1, got shape {w.shape}")
    if w.dtype.kind not in "fiu" and w.dtype != np.dtype(ml_dtypes.bfloat16):
        raise TypeError(f"pack: expected a real numeric dtype, got {w.dtype}")
    n, k = w.shape
    k_pad = k_padded(k)
    tensor_scale = 1.0
    if qt is QType.NVFP4:
        tensor_scale = _nvfp4_tensor_scale(np.asarray(w, np.float64))
    blocks: list[dict[str, np.ndarray]] = []
    for r0 in range(0, n, _ROW_BLOCK):
        wb = np.asarray(w[r0 : r0 + _ROW_BLOCK], np.float64)
        if not np.all(np.isfinite(wb)):
            raise ValueError("pack: the weight holds NaN or Inf")
        wp = _pad(wb, k_pad)
        if qt is QType.BF16:
            blocks.append({"w": wp.astype(ml_dtypes.bfloat16)})
        elif qt is QType.NVFP4:
            blocks.append(_pack_nvfp4(wp, tensor_scale))
        else:
            blocks.append(_pack_integer(qt, wp))
    planes = {}
    for p in PLANES[qt]:
        rows = np.concatenate([b[p.name] for b in blocks])
        # Band padding rows are zero bytes: code 0 with scale 0 (value 0), never output.
        full = np.zeros(p.shape(n, k_pad), p.dtype)
        full[:n] = rows
        planes[p.name] = tile(full, p.tiling, k_pad)
    return PackedWeight(qt, n, k, planes, tensor_scale)
