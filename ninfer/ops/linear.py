"""The public Linear op: ``out[T, N] = x[T, K] · W[N, K]^T`` (DESIGN §3).

Every check runs before anything is launched, so a rejected call leaves ``out``
untouched. A call allocates nothing and never synchronizes: it can be captured in a
CUDA graph (after a first call has compiled its kernels) and replayed. Both functions
go through the default dispatcher (``ninfer/ops/dispatch.py``), which owns the caches.
"""

from __future__ import annotations

from typing import Any

from ..formats.packed import PackedWeight
from ..policy import Policy
from .dispatch import DEFAULT


def linear_workspace_bytes(w: PackedWeight, T: int, policy: Policy | str = Policy.A16) -> int:
    """Workspace bytes ``linear`` needs for this weight, T and policy (public capacity query)."""
    return DEFAULT.workspace_bytes(w, T, policy)


def linear(
    x: Any,
    w: PackedWeight,
    out: Any,
    policy: Policy | str = Policy.A16,
    workspace: Any = None,
    stream: Any = None,
) -> None:
    """Compute ``out = x · W^T`` in BF16 with FP32 accumulation, on ``stream``.

    x: (T, K) bfloat16 and out: (T, N) bfloat16, row-major CuPy arrays or torch CUDA
    tensors (without ``requires_grad``: there is no autograd) on the weight's device.
    ``workspace``: a device buffer of at least ``linear_workspace_bytes(w, T, policy)``
    bytes (None when that is 0), disjoint from x, out and the weight. ``stream``: None
    (the current stream of the weight's device), a CuPy or torch stream of that device,
    or a raw handle, whose device cannot be known and is the caller's to get right.
    Raises TypeError / ValueError for bad input and ninfer.UnsupportedProblem for a
    legal geometry no route implements, always before any launch.
    """
    DEFAULT.linear(x, w, out, policy, workspace, stream)
