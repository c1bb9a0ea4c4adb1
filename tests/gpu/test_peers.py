"""The fbgemm and gemlite peers on a GPU: their calls compute the product, and time.

The numeric tests feed each library the layout the peer uses (bench/peers_fbgemm.py,
bench/peers_gemlite.py) with known int values and compare with a float32 product, so a
wrong argument order or layout fails here rather than timing a different problem. A
missing package skips with the reason; fbgemm skips off sm_90.
"""

from __future__ import annotations

from typing import Any

import pytest

from ninfer.bench.peers import PeerUnavailable, maker
from ninfer.bench.timer import ColdTimer

# Timing tests run serially on one GPU, never beside other GPU work (see noxfile conformance).
pytestmark = pytest.mark.timing

N, K, T, G = 512, 1024, 8, 64


def _rel_err(out: Any, ref: Any) -> float:
    return float((out.float() - ref).norm() / ref.norm())


def _fbgemm() -> Any:
    torch = pytest.importorskip("torch")
    pytest.importorskip("fbgemm_gpu.experimental.gen_ai")
    if tuple(torch.cuda.get_device_capability()) != (9, 0):
        pytest.skip("fbgemm's bf16i4bf16 kernels are sm_90a only")
    return torch


@pytest.mark.parametrize("kernel", ["bf16i4bf16_rowwise", "bf16i4bf16_shuffled"])
def test_fbgemm_computes_the_product(kernel: str) -> None:
    torch = _fbgemm()
    g = torch.Generator(device="cuda").manual_seed(1)
    q = torch.randint(-8, 8, (N, K), device="cuda", generator=g, dtype=torch.int8)
    packed = ((q[:, ::2] & 0xF) | (q[:, 1::2] << 4)).contiguous()  # FBGEMM's pack_int4
    scale = (torch.rand((K // G, N), device="cuda", generator=g) * 0.02 + 0.01).to(torch.bfloat16)
    zero = ((torch.rand((K // G, N), device="cuda", generator=g) - 0.5) * 0.1).to(torch.bfloat16)
    x = torch.randn((T, K), device="cuda", generator=g).to(torch.bfloat16)
    s_nk = scale.float().t().repeat_interleave(G, dim=1)
    z_nk = zero.float().t().repeat_interleave(G, dim=1)
    ref = x.float() @ (q.float() * s_nk + z_nk).t()
    ops = torch.ops.fbgemm
    if kernel == "bf16i4bf16_shuffled":
        packed, scale = ops.preshuffle_i4(packed, scale)
    out = getattr(ops, kernel)(x, packed, scale, zero)
    assert out.shape == (T, N) and out.dtype == torch.bfloat16
    assert _rel_err(out, ref) < 1e-2


def test_gemlite_a16w4_computes_the_product() -> None:
    torch = pytest.importorskip("torch")
    gemlite = pytest.importorskip("gemlite")
    g = torch.Generator(device="cuda").manual_seed(2)
    q = torch.randint(0, 16, (N, K), device="cuda", generator=g, dtype=torch.uint8)
    scale = (torch.rand((N, K // G), device="cuda", generator=g) * 0.02 + 0.01).to(torch.bfloat16)
    zero = (torch.rand((N, K // G), device="cuda", generator=g) * 15).to(torch.bfloat16)
    x = torch.randn((T, K), device="cuda", generator=g).to(torch.bfloat16)
    w = (q.float() - zero.float().repeat_interleave(G, 1)) * scale.float().repeat_interleave(G, 1)
    layer = gemlite.helper.A16W4_HQQ_INT(device="cuda", dtype=torch.bfloat16).from_weights(
        q, scale, zero
    )
    assert _rel_err(layer(x), x.float() @ w.t()) < 1e-2


def test_gemlite_a16w8_computes_the_product() -> None:
    torch = pytest.importorskip("torch")
    gemlite = pytest.importorskip("gemlite")
    g = torch.Generator(device="cuda").manual_seed(3)
    q = torch.randint(-128, 128, (N, K), device="cuda", generator=g, dtype=torch.int8)
    scale = (torch.rand((N, 1), device="cuda", generator=g) * 0.002 + 0.001).to(torch.bfloat16)
    x = torch.randn((T, K), device="cuda", generator=g).to(torch.bfloat16)
    layer = gemlite.helper.A16W8_INT8(device="cuda", dtype=torch.bfloat16).from_weights(
        q, scales=scale
    )
    assert _rel_err(layer(x), x.float() @ (q.float() * scale.float()).t()) < 1e-2


@pytest.mark.parametrize(
    ("peer", "qtype"), [("fbgemm", "q4"), ("gemlite", "q4"), ("gemlite", "w8")]
)
@pytest.mark.parametrize("t", [1, 16, 128])
def test_peer_times_under_the_contract(peer: str, qtype: str, t: int) -> None:
    pytest.importorskip("torch")
    timer = ColdTimer(warmup=2, repeat=5)
    try:
        made = maker(peer, qtype)(6144, 5120, t, timer.stream.ptr)
    except PeerUnavailable as e:
        if "needs" in str(e) or "compute capability" in str(e):
            pytest.skip(str(e))
        raise
    calls = made if isinstance(made, dict) else {"": made}
    for name, call in calls.items():
        s = timer.time(call)
        print(f"{peer} {qtype} T={t} {name}: {s.median_us:.2f} us {s.execution} {s.note}")
        assert 1.0 < s.median_us < 10_000.0, (name, s.samples_us)


def test_read_peer_times_a_read_of_the_points_bytes() -> None:
    # The plain-read floor (--peer read) of the Q6 head at T = 1, ~1 GB: the same time as
    # the probe's read kernel over that many bytes, timed directly beside it, within 3 %.
    from ninfer.gpus.probe import read_buffer, read_call
    from ninfer.metrics import byte_breakdown

    n, k = 248320, 5120
    timer = ColdTimer(warmup=3, repeat=10)
    peer = timer.time(maker("read", "q6")(n, k, 1, timer.stream.ptr))
    nbytes = byte_breakdown("q6", n, k, 1)["model_bytes"] // 16 * 16
    own = timer.time(read_call(read_buffer(nbytes, 5), 16))
    assert peer.execution == "graph", peer.note
    assert abs(peer.median_us / own.median_us - 1) < 0.03, (peer.median_us, own.median_us)
