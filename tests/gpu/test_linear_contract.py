"""The op's contract beyond numerics: guards, inputs, poison, repeats, graphs, streams, torch."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from ninfer import Policy, QType
from ninfer.ops import linear

from .cases import QTYPES, nan_like_out, oracle_weight, workspace_for
from .oracle import bf16_bits, check_against_oracle, packed_case, random_x, seed_for, to_bf16_device

N, K = 1152, 4304  # odd N, padded K
CONTRACT_T = [1, 3, 4, 5, 17, 64, 300]  # both routes, tile tails


def _case(qtype: QType, t: int, tag: str):  # type: ignore[no-untyped-def]
    w, w64 = packed_case(qtype, N, K, seed_for("w", qtype.name, N, K))
    seed = seed_for(tag, qtype.name, t)
    xh = random_x(np.random.default_rng(seed), t, K).astype(ml_dtypes.bfloat16)
    return w, oracle_weight(w, t, w64), xh, seed


@pytest.mark.parametrize("t", CONTRACT_T)
@pytest.mark.parametrize("qtype", QTYPES, ids=lambda q: q.name)
def test_output_guard_and_inputs_unchanged(qtype: QType, t: int) -> None:
    import cupy as cp

    w, w64, xh, seed = _case(qtype, t, "guard")
    margin = 4096 + 7
    poison = np.uint16(0x7FC1)  # a distinctive NaN payload
    buf = cp.full(margin + t * N + margin, poison, dtype=cp.uint16)
    out = buf[margin : margin + t * N].view(ml_dtypes.bfloat16).reshape(t, N)
    x = to_bf16_device(xh.astype(np.float64))
    x_before = bf16_bits(x).copy()
    planes_before = {k: v.copy() for k, v in w.planes.items()}
    linear(x, w, out, workspace=workspace_for(w, t))
    cp.cuda.Device().synchronize()
    b = buf.get()
    assert np.all(b[:margin] == poison) and np.all(b[-margin:] == poison), "wrote outside out"
    assert np.array_equal(bf16_bits(x), x_before), "x changed"
    for k, v in w.planes.items():
        assert bool(cp.all(v.view(cp.uint8) == planes_before[k].view(cp.uint8))), (
            f"plane {k} changed"
        )
    check_against_oracle(out, xh, w64, f"guard {qtype.name} T={t}", qtype.name, seed)


@pytest.mark.parametrize("t", CONTRACT_T)
@pytest.mark.parametrize("qtype", QTYPES, ids=lambda q: q.name)
def test_repeats_are_bitwise_identical(qtype: QType, t: int) -> None:
    w, _, xh, _ = _case(qtype, t, "repeat")
    x = to_bf16_device(xh.astype(np.float64))
    outs = []
    ws = workspace_for(w, t)
    for _ in range(3):
        out = nan_like_out(t, N)
        linear(x, w, out, workspace=ws)
        outs.append(bf16_bits(out))
    assert all(np.array_equal(outs[0], o) for o in outs[1:])
    assert not np.any(np.isnan(outs[0].view(ml_dtypes.bfloat16).astype(np.float32)))


@pytest.mark.parametrize("t", [1, 4, 5, 64, 300])
@pytest.mark.parametrize("qtype", QTYPES, ids=lambda q: q.name)
def test_graph_capture_then_replay_with_new_inputs(qtype: QType, t: int) -> None:
    import cupy as cp

    w, w64, xh, seed = _case(qtype, t, "graph")
    stream = cp.cuda.Stream(non_blocking=True)
    x = to_bf16_device(xh.astype(np.float64))
    out = nan_like_out(t, N)
    ws = workspace_for(w, t)
    linear(x, w, out, workspace=ws, stream=stream)  # first call compiles outside the capture
    stream.synchronize()
    stream.begin_capture()
    linear(x, w, out, workspace=ws, stream=stream)
    graph = stream.end_capture()
    xh2 = random_x(np.random.default_rng(seed + 1), t, K).astype(ml_dtypes.bfloat16)
    x[...] = to_bf16_device(xh2.astype(np.float64))
    out[...] = nan_like_out(t, N)
    # The two writes above ran on the legacy default stream, which a non-blocking stream
    # does not wait for: without a device-wide sync the NaN fill can land after the
    # replay (seen on the H200 with a 4 us kernel).
    cp.cuda.Device().synchronize()
    graph.launch(stream)
    stream.synchronize()
    check_against_oracle(out, xh2, w64, f"graph {qtype.name} T={t}", qtype.name, seed)


@pytest.mark.parametrize("t", [1, 4, 33, 300])
def test_non_default_cupy_stream_and_raw_handle(t: int) -> None:
    import cupy as cp

    w, w64, xh, seed = _case(QType.Q4, t, "stream")
    x = to_bf16_device(xh.astype(np.float64))
    ws = workspace_for(w, t)
    for how in ("object", "handle", "current"):
        s = cp.cuda.Stream(non_blocking=True)
        out = nan_like_out(t, N)
        cp.cuda.Device().synchronize()
        if how == "object":
            linear(x, w, out, workspace=ws, stream=s)
        elif how == "handle":
            linear(x, w, out, workspace=ws, stream=s.ptr)
        else:
            with s:
                linear(x, w, out, workspace=ws)
        s.synchronize()
        check_against_oracle(out, xh, w64, f"stream={how} T={t}", "Q4", seed)


@pytest.mark.parametrize("t", [1, 7, 130])
@pytest.mark.parametrize("qtype", [QType.Q4, QType.NVFP4, QType.BF16], ids=lambda q: q.name)
def test_torch_tensors_in_and_out(qtype: QType, t: int) -> None:
    torch = pytest.importorskip("torch")
    w, w64, xh, seed = _case(qtype, t, "torch")
    x = to_bf16_device(xh.astype(np.float64), "torch")
    out = nan_like_out(t, N, "torch")
    s = torch.cuda.Stream()
    ws = workspace_for(w, t)
    with torch.cuda.stream(s):
        linear(x, w, out, workspace=ws)  # None -> torch's current stream
    linear(x, w, out, workspace=ws, stream=s)  # a torch stream object
    s.synchronize()
    check_against_oracle(out, xh, w64, f"torch {qtype.name} T={t}", qtype.name, seed)


def test_a4_policy_on_nvfp4_matches_a16_oracle() -> None:
    w, w64, xh, seed = _case(QType.NVFP4, 1024, "a4")
    x = to_bf16_device(xh.astype(np.float64))
    out = nan_like_out(1024, N)
    linear(x, w, out, policy=Policy.A4, workspace=workspace_for(w, 1024, Policy.A4))
    check_against_oracle(out, xh, w64, "nvfp4 a4 T=1024", "NVFP4", seed)
