"""Peers timed side by side under the same timer, and their table.

- ``cublas``: BF16 ``torch.mm`` on a random W of the same shape (every format's point).
- ``tinygemm``: torch's int4 kernel ``torch._weight_int4pack_mm``, group 64, on a random
  int4 W of the same shape: the peer of Q4 (same bits per weight, same group), so it is
  timed on Q4 points only; other formats show no value.
- ``fbgemm``: FBGEMM GenAI's CUTLASS sm90 int4 GEMMs, group 64, Q4 points
  (bench/peers_fbgemm.py).
- ``gemlite``: gemlite's Triton A16W4 group 64 on Q4 points, A16W8 per-channel on W8
  points (bench/peers_gemlite.py).

``MAKERS`` is the table: per peer, the make function of each format it is the
like-for-like comparison of ("*": every format); the CLI choices, ``applies()`` and
bench/run.py read it, so a new peer is one entry here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .peers_common import Make, PeerUnavailable, need_torch
from .peers_fbgemm import fbgemm_call
from .peers_gemlite import gemlite_w4_call, gemlite_w8_call

__all__ = ["MAKERS", "PEERS", "PEER_QTYPES", "PeerUnavailable", "applies", "maker"]

ANY = "*"


def cublas_call(n: int, k: int, t: int, stream_handle: int, seed: int = 0) -> Callable[[], Any]:
    """``out[T,N] = x[T,K] · W[N,K]^T`` by torch.mm on a random BF16 W of the same shape."""
    torch = need_torch("cublas")
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
    torch = need_torch("tinygemm")
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


MAKERS: dict[str, dict[str, Make]] = {
    "cublas": {ANY: cublas_call},
    "tinygemm": {"q4": tinygemm_call},
    "fbgemm": {"q4": fbgemm_call},
    "gemlite": {"q4": gemlite_w4_call, "w8": gemlite_w8_call},
}

PEERS = tuple(MAKERS)

# The formats (QType values) a peer is the like-for-like comparison of; absent: all.
PEER_QTYPES: dict[str, frozenset[str]] = {
    peer: frozenset(by_q) for peer, by_q in MAKERS.items() if ANY not in by_q
}


def applies(peer: str, qtype: str) -> bool:
    return qtype in PEER_QTYPES.get(peer, frozenset({qtype}))


def maker(peer: str, qtype: str) -> Make:
    """The make function of ``peer`` on a point of format ``qtype`` (it must apply)."""
    if peer not in MAKERS:
        raise ValueError(f"peer: expected one of {', '.join(PEERS)}, got {peer!r}")
    by_q = MAKERS[peer]
    make = by_q.get(qtype, by_q.get(ANY))
    if make is None:
        raise ValueError(
            f"--peer {peer}: expected a point of format {', '.join(sorted(by_q))}, got {qtype!r}"
        )
    return make
