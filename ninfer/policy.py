"""Activation-compute policy of a Linear call."""

from __future__ import annotations

import enum


class Policy(enum.Enum):
    """What the call may do with the activations.

    ``A16``: BF16 activations, FP32 accumulation, BF16 output (A16Only).
    ``A4``: AllowA4 — a permission to quantize activations to FP4, legal only for NVFP4
    weights. The resolver may still pick an A16 route, and on GPUs without FP4 tensor
    cores (sm_80, sm_90) it must.
    """

    A16 = "a16"
    A4 = "a4"

    @classmethod
    def parse(cls, value: str | Policy) -> Policy:
        if isinstance(value, Policy):
            return value
        try:
            return cls(str(value).lower())
        except ValueError:
            raise ValueError(
                f"unknown policy: expected one of {[p.value for p in cls]}, got {value!r}"
            ) from None
