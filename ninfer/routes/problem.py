"""The problem a route is chosen for, and the compute-policy resolution of DESIGN §5."""

from __future__ import annotations

from dataclasses import dataclass

from ..formats.qtype import QType
from ..policy import Policy

# Format ids shared with kernels/common.cuh (QT_*).
QTYPE_ID: dict[QType, int] = {
    QType.Q4: 0,
    QType.Q5: 1,
    QType.Q6: 2,
    QType.W8: 3,
    QType.NVFP4: 4,
    QType.BF16: 5,
}


@dataclass(frozen=True)
class Problem:
    qtype: QType
    policy: Policy  # the caller's permission
    n: int
    k: int
    t: int
    cc: int  # compute capability as an int: 80, 86, 89, 90, 120, ...

    @property
    def compute(self) -> Policy:
        """The activation precision actually executed.

        AllowA4 is a permission. No route here quantizes activations yet, so it
        resolves to A16 everywhere; on sm_80/sm_90 (no FP4 tensor cores) it must.
        """
        return Policy.A16
