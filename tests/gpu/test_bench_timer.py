"""Validation of the benchmark timer on the GPU (issue: ninfer-bench, timer contract)."""

from __future__ import annotations

import numpy as np
import pytest

from ninfer import QType
from ninfer.bench.fixture import random_activations, random_device_weight
from ninfer.bench.run import prepared_call
from ninfer.bench.timer import ColdTimer

# Timing tests run serially on one GPU, never beside other GPU work (see noxfile conformance).
pytestmark = pytest.mark.timing


def _linear_call(qtype: QType, n: int, k: int, t: int):  # type: ignore[no-untyped-def]
    import cupy as cp

    x = random_activations(t, k)
    return prepared_call(
        x, random_device_weight(qtype, n, k, seed=5), cp.empty((t, n), dtype=x.dtype)
    )


def _read_call(nbytes: int, blocks_per_sm: int, seed: int):  # type: ignore[no-untyped-def]
    """The probe's uint4 read kernel over ``nbytes`` of random data, as one call."""
    from ninfer.gpus.probe import read_buffer, read_call

    return read_call(read_buffer(nbytes, seed), blocks_per_sm)


def test_cold_timer_reproduces_probe_read_bandwidth() -> None:
    import cupy as cp

    from ninfer.gpus.probe import _events_ms

    nbytes = 2 << 30
    timer = ColdTimer(warmup=3, repeat=20)
    fn = _read_call(nbytes, 16, seed=0)
    # Both methods see a warm GPU: the first probe samples of a test that starts on an
    # idle card ran at ramping clocks (4204 vs 4383 GB/s on the H200, 2026-11-30).
    _events_ms(cp, fn, 3)
    probe_ms = float(np.median(_events_ms(cp, fn, 10)))
    s = timer.time(fn)
    probe_gbps = nbytes / probe_ms / 1e6
    timer_gbps = nbytes / s.median_us / 1e3
    assert abs(timer_gbps / probe_gbps - 1) < 0.03, (timer_gbps, probe_gbps)


def test_flush_makes_cold_slower_than_hot() -> None:
    # A pure read of 24 MiB (fits the ~60 MB L2 hot, must come from DRAM cold). A read
    # kernel, not linear(): the first decode route was not bandwidth-bound (≈ 1.2 TB/s on
    # a 33 MB Q4 weight), so its cold/hot ratio measured 1.08-1.2x from host to host and
    # said more about the kernel than about the flush.
    fn = _read_call(24 << 20, 8, seed=1)
    cold = ColdTimer(warmup=3, repeat=20, flush_mib=256).time(fn).median_us
    hot = ColdTimer(warmup=3, repeat=20, flush_mib=0).time(fn).median_us
    assert cold > 1.25 * hot, (cold, hot)


def test_graph_and_direct_agree_on_a_long_point() -> None:
    # One kernel (dec_q, ~130 us): the timer's two execution modes should agree when the
    # call's work is the same. A dq_gemm point is not: direct execution adds the
    # cross-stream event waits between its bands that a graph's edges do not pay (Q4
    # [14336,5120] T=1024 on the H200: graph 246.0, direct 258.4 us, +5.0 %).
    call = _linear_call(QType.Q4, 131072, 5120, 1)
    g = ColdTimer(warmup=3, repeat=20, execution="graph").time(call).median_us
    d = ColdTimer(warmup=3, repeat=20, execution="direct").time(call).median_us
    assert g >= 100.0, g
    assert abs(d / g - 1) < 0.05, (g, d)


def test_peer_cublas_agrees_with_plain_torch_event_timing() -> None:
    torch = pytest.importorskip("torch")
    from ninfer.bench.peers import cublas_call

    n, k, t = 14336, 5120, 16
    timer = ColdTimer(warmup=3, repeat=20)
    ours = timer.time(cublas_call(n, k, t, timer.stream.ptr)).median_us
    w = torch.randn((n, k), device="cuda").to(torch.bfloat16)
    x = torch.randn((t, k), device="cuda").to(torch.bfloat16)
    flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    ms = []
    for i in range(23):
        flush.fill_(i & 0xFF)
        s.record()
        torch.nn.functional.linear(x, w)
        e.record()
        e.synchronize()
        if i >= 3:
            ms.append(s.elapsed_time(e) * 1000)
    plain = float(np.median(ms))
    assert abs(ours / plain - 1) < 0.05, (ours, plain)
