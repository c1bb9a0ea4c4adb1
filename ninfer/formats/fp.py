"""Minifloat tables for NVFP4: E2M1 codes and E4M3 (fn) scales.

Both are built from the bit formulas, not from ml_dtypes, so that the tests can hold
them against ml_dtypes as an independent implementation.
"""

from __future__ import annotations

import numpy as np


def _e2m1_magnitudes() -> np.ndarray:
    # 1 sign, 2 exponent (bias 1), 1 mantissa; no inf/NaN.
    out = np.empty(8, np.float64)
    for code in range(8):
        e, m = code >> 1, code & 1
        out[code] = m * 0.5 if e == 0 else (1.0 + m / 2.0) * 2.0 ** (e - 1)
    return out


def _e4m3_magnitudes() -> np.ndarray:
    # E4M3 "fn": 4 exponent (bias 7), 3 mantissa; 0x7F is NaN, so the largest is 0x7E = 448.
    out = np.empty(127, np.float64)
    for code in range(127):
        e, m = code >> 3, code & 7
        out[code] = m / 8.0 * 2.0**-6 if e == 0 else (1.0 + m / 8.0) * 2.0 ** (e - 7)
    return out


E2M1_MAG = _e2m1_magnitudes()  # index = 3-bit magnitude code
E4M3_MAG = _e4m3_magnitudes()  # index = 7-bit magnitude code (sign bit unused by scales)
E2M1_MAX = float(E2M1_MAG[-1])  # 6.0
E4M3_MAX = float(E4M3_MAG[-1])  # 448.0


def round_to_table(mag: np.ndarray, table: np.ndarray) -> np.ndarray:
    """Index of the nearest table entry to each non-negative value, ties to the even code.

    ``table`` is increasing with its code; values above the last entry saturate to it
    (round-to-nearest-even as the hardware converters do with ``satfinite``).
    """
    mag = np.minimum(np.asarray(mag, np.float64), table[-1])
    hi = np.clip(np.searchsorted(table, mag, side="left"), 0, len(table) - 1)
    lo = np.maximum(hi - 1, 0)
    d_lo = mag - table[lo]
    d_hi = table[hi] - mag
    pick_hi = (d_hi < d_lo) | ((d_hi == d_lo) & (hi % 2 == 0))
    return np.where(pick_hi, hi, lo).astype(np.int64)


def encode_e2m1(values: np.ndarray) -> np.ndarray:
    """FP32/FP64 -> 4-bit E2M1 codes (uint8, low nibble), RNE, saturating at ±6."""
    v = np.asarray(values, np.float64)
    code = round_to_table(np.abs(v), E2M1_MAG)
    sign = (np.signbit(v) & (code != 0)).astype(np.int64) << 3
    return (code | sign).astype(np.uint8)


def decode_e2m1(codes: np.ndarray) -> np.ndarray:
    c = np.asarray(codes, np.uint8)
    mag = E2M1_MAG[c & 7]
    return np.where(c & 8, -mag, mag)


def encode_e4m3(values: np.ndarray) -> np.ndarray:
    """Non-negative values -> E4M3fn codes (uint8), RNE, saturating at 448."""
    v = np.asarray(values, np.float64)
    if np.any(v < 0) or not np.all(np.isfinite(v)):
        raise ValueError("E4M3 scales must be finite and non-negative")
    return round_to_table(v, E4M3_MAG).astype(np.uint8)


def decode_e4m3(codes: np.ndarray) -> np.ndarray:
    c = np.asarray(codes, np.uint8)
    if np.any((c & 0x7F) == 0x7F):
        raise ValueError("E4M3 NaN code (0x7F/0xFF) in a scale plane")
    mag = E4M3_MAG[c & 0x7F]
    return np.where(c & 0x80, -mag, mag)
