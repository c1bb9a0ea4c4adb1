"""Peers timed side by side under the same timer, and their table.

- ``cublas``: BF16 ``torch.mm`` on a random W of the same shape (every format's point).
- ``tinygemm``: torch's int4 kernel ``torch._weight_int4pack_mm``, group 64, on a random
  int4 W of the same shape: the peer of Q4 (same bits per weight, same group), so it is
  timed on Q4 points only; other formats show no value.
- ``fbgemm``: FBGEMM GenAI's CUTLASS sm90 int4 GEMMs, group 64, Q4 points
  (bench/peers_fbgemm.py).
- ``gemlite``: gemlite's Triton A16W4 group 64 on Q4 points, A16W8 per-channel on W8
  points (bench/peers_gemlite.py).
- ``read``: a plain read of the point's model bytes (weight + x + out) by the probe's
  uint4 read kernel: the floor a kernel that reads those bytes once meets under the same
  cold timer (issue 26's "within 1.3x of the plain read"), every format. No torch.

``cublas`` and ``read`` are reference columns; the others are like-for-like peers
(``PEER_QTYPES``), each of the formats it implements.

``MAKERS`` is the table: per peer, the make function of each format it is the
like-for-like comparison of ("*": every format); the CLI choices, ``applies()`` and
bench/run.py read it, so a new peer is one entry here.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from ..formats.qtype import QType
from ..metrics import byte_breakdown
from .peers_common import Make, PeerUnavailable, need_torch
from .peers_fbgemm import fbgemm_call
from .peers_gemlite import gemlite_w4_call, gemlite_w8_call

__all__ = [
    "MAKERS",
    "PEERS",
    "PEER_QTYPES",
    "REFERENCE_PEERS",
    "PeerUnavailable",
    "applies",
    "maker",
]

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


def read_call(
    qtype: str, n: int, k: int, t: int, stream_handle: int, seed: int = 3
) -> Callable[[], Any]:
    """One launch of the probe's uint4 read (SMs x 16 blocks of 512 threads, its best grid
    on the H200) over random data of the point's model bytes, rounded down to 16."""
    from ..gpus.probe import read_buffer
    from ..gpus.probe import read_call as probe_read
    from ..runtime.cupy_env import require_cupy

    cp = require_cupy()
    nbytes = byte_breakdown(qtype, n, k, t)["model_bytes"] // 16 * 16
    try:
        buf = read_buffer(nbytes, seed)
    except cp.cuda.memory.OutOfMemoryError as e:
        raise PeerUnavailable(f"--peer read: {nbytes} bytes do not fit beside the run ({e})") from e
    read = probe_read(buf, 16)
    stream = cp.cuda.ExternalStream(stream_handle)

    def call() -> None:
        with stream:
            read()

    call()
    # The random fill ran on another stream than the timer's (a non-blocking one): all of
    # it lands before the first timed read.
    cp.cuda.Device().synchronize()
    return call


MAKERS: dict[str, dict[str, Make]] = {
    "cublas": {ANY: cublas_call},
    "tinygemm": {"q4": tinygemm_call},
    "fbgemm": {"q4": fbgemm_call},
    "gemlite": {"q4": gemlite_w4_call, "w8": gemlite_w8_call},
    # per format: the bytes to read depend on it
    "read": {q.value: functools.partial(read_call, q.value) for q in QType},
}

PEERS = tuple(MAKERS)
# Timed on every format's points as a reference, not held to as a like-for-like peer.
REFERENCE_PEERS = ("cublas", "read")

# The formats (QType values) a like-for-like peer implements; the reference peers apply to
# every format.
PEER_QTYPES: dict[str, frozenset[str]] = {
    peer: frozenset(by_q) for peer, by_q in MAKERS.items() if peer not in REFERENCE_PEERS
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
