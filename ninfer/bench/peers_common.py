"""What every peer module shares: its error and the shape of what its make function returns.

A make function is ``make(n, k, t, stream_handle)``: all setup (weights, packing,
autotune, a first call) happens inside it; it returns a zero-argument call that enqueues
one ``out[T,N] = x[T,K] · W[N,K]^T`` on ``torch.cuda.ExternalStream(stream_handle)``, or
several such calls by kernel name (one library's variants: the bench times each and keeps
the fastest). bench/peers.py holds the table of peers.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

PeerCall = Callable[[], Any]
Made = PeerCall | dict[str, PeerCall]
Make = Callable[[int, int, int, int], Made]


class PeerUnavailable(RuntimeError):
    """The peer cannot time this point (package, architecture or shape); the message says why."""


def need_torch(peer: str) -> Any:
    try:
        import torch
    except ImportError as e:
        raise PeerUnavailable(f"--peer {peer} needs torch (pip install 'ninfer[torch]')") from e
    return torch


def import_error(peer: str, wanted: str, e: BaseException) -> PeerUnavailable:
    """The error of a peer whose package is missing or does not load against this torch."""
    return PeerUnavailable(
        f"--peer {peer} needs {wanted} (pip install '{wanted}', or offline the wheel that "
        f"tools/device_wheels.sh puts in .whl/); import failed: {type(e).__name__}: {e}"
    )
