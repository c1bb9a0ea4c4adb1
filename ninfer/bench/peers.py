"""Peers timed side by side under the same timer: cuBLAS BF16 (through torch)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

PEERS = ("cublas",)


class PeerUnavailable(RuntimeError):
    pass


def cublas_call(n: int, k: int, t: int, stream_handle: int, seed: int = 0) -> Callable[[], Any]:
    """``out[T,N] = x[T,K] · W[N,K]^T`` by torch.mm on a random BF16 W of the same shape."""
    try:
        import torch
    except ImportError as e:
        raise PeerUnavailable("--peer cublas needs torch (pip install 'ninfer[torch]')") from e
    g = torch.Generator(device="cuda").manual_seed(seed)
    w = (torch.randn((n, k), device="cuda", generator=g) * 0.05).to(torch.bfloat16)
    x = torch.randn((t, k), device="cuda", generator=g).to(torch.bfloat16)
    out = torch.empty((t, n), device="cuda", dtype=torch.bfloat16)
    ext = torch.cuda.ExternalStream(stream_handle)
    wt = w.t()

    def call() -> None:
        with torch.cuda.stream(ext):
            torch.mm(x, wt, out=out)

    call()  # cuBLAS handle and workspace are created here, outside any timing or capture
    torch.cuda.synchronize()
    return call
