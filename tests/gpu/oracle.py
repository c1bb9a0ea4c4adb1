"""The FP64 oracle, the tolerance table and the self-explaining mismatch report."""

from __future__ import annotations

import functools
import math
import os
import zlib
from dataclasses import dataclass
from typing import Any

import ml_dtypes
import numpy as np

from ninfer import PackedWeight, QType, pack


# One tolerance table. A16 numerics: BF16 in, FP32 accumulation, BF16 out.
#   |out - ref| <= RTOL_OUT * |ref| + ACC_C * sqrt(K) * 2^-24 * (|W| @ |x|)
# RTOL_OUT: the BF16 output rounding (round to nearest: half an ulp, 2^-8 of the value
#   at worst with 8 significant bits), plus slack for the FP32 rounding of the final scale.
# ACC term: FP32 accumulation of K products whose magnitudes sum to |W|@|x|; the
#   random-walk bound sqrt(K) * u32, times a safety factor ACC_C for the tensor cores'
#   internal accumulation order. Products code*x are exact (codes are BF16-exact), so
#   nothing else rounds.
@dataclass(frozen=True)
class Tolerance:
    rtol_out: float
    acc_c: float
    reason: str


TOLERANCES: dict[str, Tolerance] = {
    "a16": Tolerance(2.0**-8 * 1.01, 8.0, "BF16 output rounding + FP32 accumulation ~ sqrt(K)·u32"),
}

WORST: dict[str, dict[str, Any]] = {}


def seed_for(*parts: object) -> int:
    base = int(os.environ.get("NINFER_TEST_SEED", "0") or 0)
    return (zlib.crc32("/".join(str(p) for p in parts).encode()) ^ base) & 0x7FFFFFFF


def random_weight(rng: np.random.Generator, n: int, k: int) -> np.ndarray:
    """Non-uniform magnitudes across groups (scales differ), never zeros."""
    mag = np.exp(0.75 * rng.standard_normal((n, (k + 15) // 16)))
    w = rng.standard_normal((n, k)) * np.repeat(mag, 16, axis=1)[:, :k]
    w[w == 0] = 0.5
    return w


@functools.lru_cache(maxsize=24)
def packed_case(qtype: QType, n: int, k: int, seed: int) -> tuple[PackedWeight, Any]:
    """A device weight and its exact decode as CuPy float64 [N, K] (the oracle's W)."""
    import cupy as cp

    rng = np.random.default_rng(seed)
    host = pack(random_weight(rng, n, k), qtype)
    return host.to_device(), cp.asarray(host.decode())


def round_to_bf16_bits(bits: Any) -> Any:
    """FP32 bit patterns (uint32, NumPy or CuPy) rounded to BF16, nearest even, as FP32 bit
    patterns (the low 16 bits cleared). Finite values only."""
    one = bits.dtype.type(1)
    return (bits + bits.dtype.type(0x7FFF) + ((bits >> 16) & one)) & bits.dtype.type(0xFFFF0000)


def bf16_rounded(w64: Any) -> Any:
    """Each weight rounded once to BF16 (nearest even): what dq_gemm multiplies.

    On the GPU: the weights that routes round (scale x code, at most 19 significant bits)
    are exact in FP32, and FP32 -> BF16 is integer arithmetic on the bits (checked against
    ml_dtypes' cast: tests/cpu/test_oracle.py). The host round trip copied the whole FP64
    weight per case (378 MB on the largest conformance shape, [4616,10248]).
    """
    import cupy as cp

    f32 = w64.astype(cp.float32)
    if not bool(cp.all(f32.astype(cp.float64) == w64)):
        raise ValueError("bf16_rounded: a weight is not exact in FP32")
    return round_to_bf16_bits(f32.view(cp.uint32)).view(cp.float32).astype(cp.float64)


def to_bf16_device(a: np.ndarray, kind: str = "cupy") -> Any:
    bits = np.ascontiguousarray(a.astype(ml_dtypes.bfloat16)).view(np.uint16)
    if kind == "torch":
        import torch

        return torch.from_numpy(bits.view(np.int16)).cuda().view(torch.bfloat16)
    import cupy as cp

    return cp.asarray(bits).view(ml_dtypes.bfloat16)


def bf16_bits(a: Any) -> np.ndarray:
    """Host uint16 view of a device BF16 array (CuPy or torch)."""
    if type(a).__module__.startswith("torch"):
        import torch

        return a.view(torch.int16).cpu().numpy().view(np.uint16)
    return a.view(np.uint16).get()


def bits_to_f64(bits: np.ndarray) -> np.ndarray:
    return bits.view(ml_dtypes.bfloat16).astype(np.float64)


def random_x(rng: np.random.Generator, t: int, k: int) -> np.ndarray:
    x = rng.standard_normal((t, k))
    x[x == 0] = 0.25
    return x


def check_against_oracle(
    out: Any, x_host_bf16: np.ndarray, w64: Any, label: str, fmt: str, seed: int
) -> None:
    """Compare ``out`` with the FP64 oracle; raise AssertionError with a full report."""
    import cupy as cp

    tol = TOLERANCES["a16"]
    x64 = cp.asarray(x_host_bf16.astype(np.float64))
    ref = x64 @ w64.T
    mag = cp.abs(x64) @ cp.abs(w64).T
    k = w64.shape[1]
    bound = tol.rtol_out * cp.abs(ref) + tol.acc_c * math.sqrt(k) * 2.0**-24 * mag
    got = cp.asarray(bits_to_f64(bf16_bits(out)))
    err = cp.abs(got - ref)
    nonfinite_got = ~cp.isfinite(got)
    bad = (err > bound) | nonfinite_got
    normalized = float(cp.max(cp.where(bound > 0, err / bound, cp.where(err > 0, cp.inf, 0.0))))
    rel_l2 = float(cp.linalg.norm(got - ref) / max(float(cp.linalg.norm(ref)), 1e-300))
    nbad = int(bad.sum())
    worst_flat = int(cp.argmax(cp.where(nonfinite_got, cp.inf, err / cp.maximum(bound, 1e-300))))
    where = np.unravel_index(worst_flat, ref.shape)
    entry = WORST.setdefault(fmt, {"checks": 0, "normalized": 0.0, "rel_l2": 0.0, "where": ""})
    entry["checks"] += 1
    if normalized >= entry["normalized"]:
        entry.update(normalized=normalized, where=f"{label} (t,n)={tuple(int(i) for i in where)}")
    entry["rel_l2"] = max(entry["rel_l2"], rel_l2)
    if nbad == 0:
        return
    ratio = cp.where(nonfinite_got, cp.inf, err / cp.maximum(bound, 1e-300)).ravel()
    top = cp.argsort(-ratio)[:5].get()
    lines = [
        f"{label}: {nbad} of {ref.size} elements beyond tolerance "
        f"({int(nonfinite_got.sum())} NaN/Inf in out; ref has {int((~cp.isfinite(ref)).sum())})",
        f"worst normalized error {normalized:.3g}, relative L2 {rel_l2:.3e}",
    ]
    for flat in top:
        t, n = np.unravel_index(int(flat), ref.shape)
        lines.append(
            f"  (t={t}, n={n}): got {float(got[t, n]):.6g} ref {float(ref[t, n]):.6g} "
            f"err {float(err[t, n]):.3g} tol {float(bound[t, n]):.3g}"
        )
    lines.append(
        f"repro: NINFER_TEST_SEED={os.environ.get('NINFER_TEST_SEED', '0')} (case seed {seed})"
    )
    raise AssertionError("\n".join(lines))
