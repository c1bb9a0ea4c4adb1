"""The conformance oracle's own arithmetic, checked on the CPU (tests/gpu/oracle.py)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np


def _oracle() -> Any:
    # By path: tests/ is no package, and plain `pytest` (nox -s tests) does not put the
    # repository root on sys.path. oracle.py imports no GPU module at load.
    path = Path(__file__).resolve().parents[1] / "gpu" / "oracle.py"
    spec = importlib.util.spec_from_file_location("ninfer_tests_oracle", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up there
    spec.loader.exec_module(mod)
    return mod


def test_round_to_bf16_bits_matches_ml_dtypes() -> None:
    # Random finite FP32 bit patterns of every exponent, plus the ties (low half 0x8000,
    # both parities of bit 16), the carries into the exponent and the largest finite values.
    rng = np.random.default_rng(0)
    bits = rng.integers(0, 2**32, size=1 << 20, dtype=np.uint64).astype(np.uint32)
    hi = rng.integers(0, 2**16, size=4096, dtype=np.uint64).astype(np.uint32) << 16
    edges = np.concatenate(
        [
            hi | 0x8000,
            hi | 0x7FFF,
            hi | 0x8001,
            hi | 0xFFFF,
            np.array([0x7F7FFFFF, 0x3F80FFFF], np.uint32),
        ]
    )
    bits = np.concatenate([bits, edges.astype(np.uint32)])
    f = bits.view(np.float32)
    with np.errstate(invalid="ignore", over="ignore"):  # NaN patterns and overflows, dropped
        keep = np.isfinite(f) & np.isfinite(f.astype(ml_dtypes.bfloat16).astype(np.float32))
    f, bits = f[keep], bits[keep]
    want = f.astype(ml_dtypes.bfloat16).astype(np.float32).view(np.uint32)
    np.testing.assert_array_equal(_oracle().round_to_bf16_bits(bits), want)
