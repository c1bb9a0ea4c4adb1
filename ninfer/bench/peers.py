"""Peers timed side by side under the same timer, through torch.

- ``cublas``: BF16 ``torch.mm`` on a random W of the same shape (every format's point).
- ``tinygemm``: torch's int4 kernel ``torch._weight_int4pack_mm``, group 64, on a random
  int4 W of the same shape: the peer of Q4 (same bits per weight, same group), so it is
  timed on Q4 points only; other formats show no value.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

PEERS = ("cublas", "tinygemm")

# The formats (QType values) a peer is the like-for-like comparison of; absent: all.
PEER_QTYPES: dict[str, frozenset[str]] = {"tinygemm": frozenset({"q4"})}


def applies(peer: str, qtype: str) -> bool:
    return qtype in PEER_QTYPES.get(peer, frozenset({qtype}))


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


def tinygemm_call(n: int, k: int, t: int, stream_handle: int, seed: int = 0) -> Callable[[], Any]:
    """``out[T,N] = x[T,K] · W[N,K]^T`` by ``torch._weight_int4pack_mm`` (group 64).

    W is random int4 (uniform nibbles), packed by ``torch._convert_weight_to_int4pack``
    with the largest inner-k tiling (8, 4, 2) that divides K; scales and zeros random
    BF16. The op allocates its output, so a graph capture may be refused: the timer then
    falls back to direct launches and marks the row.
    """
    try:
        import torch
    except ImportError as e:
        raise PeerUnavailable("--peer tinygemm needs torch (pip install 'ninfer[torch]')") from e
    group = 64
    if k % group:
        raise PeerUnavailable(f"--peer tinygemm: K={k} is not a multiple of the group {group}")
    inner = next((it for it in (8, 4, 2) if k % (it * 16) == 0), None)
    if inner is None or n % 8:
        raise PeerUnavailable(f"--peer tinygemm: no int4pack tiling for N={n}, K={k}")
    g = torch.Generator(device="cuda").manual_seed(seed)
    q = torch.randint(0, 256, (n, k // 2), device="cuda", generator=g, dtype=torch.int32)
    wp = torch._convert_weight_to_int4pack(q.to(torch.uint8), inner)
    sz = (torch.rand((k // group, n, 2), device="cuda", generator=g) * 0.02 + 0.01).to(
        torch.bfloat16
    )
    x = torch.randn((t, k), device="cuda", generator=g).to(torch.bfloat16)
    ext = torch.cuda.ExternalStream(stream_handle)

    def call() -> None:
        with torch.cuda.stream(ext):
            torch._weight_int4pack_mm(x, wp, group, sz)

    call()
    torch.cuda.synchronize()
    return call
