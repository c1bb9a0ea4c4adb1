"""Every bad input of DESIGN §3: a typed error before any launch, ``out`` untouched."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import ml_dtypes
import numpy as np
import pytest

from ninfer import PackedWeight, Policy, QType, UnsupportedProblem, pack
from ninfer.ops import linear, linear_workspace_bytes
from ninfer.ops.dispatch import Dispatcher

from .oracle import bf16_bits, random_weight, to_bf16_device

N, K, T = 256, 384, 3


@pytest.fixture(scope="module")
def weights() -> dict[QType, PackedWeight]:
    rng = np.random.default_rng(11)
    return {q: pack(random_weight(rng, N, K), q).to_device() for q in (QType.Q4, QType.NVFP4)}


def _x(t: int = T, k: int = K) -> Any:
    return to_bf16_device(np.random.default_rng(t * 7 + k).standard_normal((t, k)) + 0.1)


def _out(t: int = T, n: int = N) -> Any:
    return to_bf16_device(np.full((t, n), 3.0))


def _expect(exc: type[Exception], match: str, call: Callable[[Any], None], out: Any) -> None:
    import cupy as cp

    before = bf16_bits(out).copy() if out is not None else None
    with pytest.raises(exc, match=match):
        call(out)
    cp.cuda.Device().synchronize()
    if out is not None:
        assert np.array_equal(bf16_bits(out), before), "out was modified by a rejected call"


def test_wrong_x_dtype(weights: dict) -> None:
    import cupy as cp

    x = cp.ones((T, K), cp.float16)
    _expect(
        TypeError,
        "x: expected dtype bfloat16, got float16",
        lambda o: linear(x, weights[QType.Q4], o),
        _out(),
    )


def test_wrong_out_dtype(weights: dict) -> None:
    import cupy as cp

    out = cp.zeros((T, N), cp.float32) + 1
    _expect(
        TypeError,
        "out: expected dtype bfloat16, got float32",
        lambda o: linear(_x(), weights[QType.Q4], o),
        out,
    )


def test_x_not_2d(weights: dict) -> None:
    x = _x().reshape(-1)
    _expect(ValueError, "x: expected a 2-D", lambda o: linear(x, weights[QType.Q4], o), _out())


def test_k_mismatch(weights: dict) -> None:
    _expect(
        ValueError,
        r"x: expected shape \(3, 384\), got \(3, 256\)",
        lambda o: linear(_x(k=256), weights[QType.Q4], o),
        _out(),
    )


def test_n_mismatch(weights: dict) -> None:
    _expect(
        ValueError,
        r"out: expected shape \(3, 256\), got \(3, 128\)",
        lambda o: linear(_x(), weights[QType.Q4], o),
        _out(n=128),
    )


def test_t_mismatch_between_x_and_out(weights: dict) -> None:
    _expect(
        ValueError,
        r"out: expected shape \(3, 256\), got \(4, 256\)",
        lambda o: linear(_x(), weights[QType.Q4], o),
        _out(t=4),
    )


def test_t_zero(weights: dict) -> None:
    x = _x()[:0]
    _expect(ValueError, "x: expected T >= 1", lambda o: linear(x, weights[QType.Q4], o), _out())


def test_workspace_query_rejects_t_zero(weights: dict) -> None:
    with pytest.raises(ValueError, match="T >= 1"):
        linear_workspace_bytes(weights[QType.Q4], 0)


def test_non_contiguous_x(weights: dict) -> None:
    import cupy as cp

    big = cp.concatenate([_x(), _x()], axis=1)[:, ::2]
    assert big.shape == (T, K)
    _expect(
        ValueError,
        "x: expected a row-major contiguous",
        lambda o: linear(big, weights[QType.Q4], o),
        _out(),
    )


def test_transposed_out(weights: dict) -> None:
    out = _out(t=N, n=T).T
    _expect(
        ValueError,
        "out: expected a row-major contiguous",
        lambda o: linear(_x(), weights[QType.Q4], o),
        out,
    )


def test_device_mismatch() -> None:
    import cupy as cp

    # A weight that only claims another device is refused at construction (test below),
    # so x and the weight need two real devices here.
    if cp.cuda.runtime.getDeviceCount() < 2:
        pytest.skip("needs two GPUs")
    other = pack(random_weight(np.random.default_rng(4), N, K), QType.Q4).to_device(1)
    with cp.cuda.Device(0):
        x, out = _x(), _out()
        _expect(
            ValueError,
            "x: expected device 1 \\(the weight's\\), got device 0",
            lambda o: linear(x, other, o),
            out,
        )


def test_out_aliases_x(weights: dict) -> None:
    w = pack(random_weight(np.random.default_rng(3), K, K), QType.Q4).to_device()
    buf = to_bf16_device(np.ones((T, K)))
    _expect(ValueError, "aliasing", lambda o: linear(buf, w, o), buf)
    half = to_bf16_device(np.ones((2 * T, K)))
    _expect(ValueError, "aliasing", lambda o: linear(half[1 : 1 + T], w, o), half[:T])


def test_a4_with_non_nvfp4(weights: dict) -> None:
    _expect(
        ValueError,
        "policy A4: expected an NVFP4 weight, got Q4",
        lambda o: linear(_x(), weights[QType.Q4], o, policy=Policy.A4),
        _out(),
    )


def test_unknown_policy(weights: dict) -> None:
    _expect(
        ValueError,
        "unknown policy",
        lambda o: linear(_x(), weights[QType.Q4], o, policy="a8"),
        _out(),
    )


def test_host_x(weights: dict) -> None:
    xh = np.ones((T, K), ml_dtypes.bfloat16)
    _expect(TypeError, "host numpy.ndarray", lambda o: linear(xh, weights[QType.Q4], o), _out())


def test_host_out(weights: dict) -> None:
    oh = np.ones((T, N), ml_dtypes.bfloat16)
    with pytest.raises(TypeError, match="out: expected a CUDA array"):
        linear(_x(), weights[QType.Q4], oh)
    assert np.all(oh.astype(np.float32) == 1)


def test_host_weight(weights: dict) -> None:
    wh = weights[QType.Q4].to_host()
    _expect(TypeError, "got a host one", lambda o: linear(_x(), wh, o), _out())


def test_not_a_weight() -> None:
    _expect(
        TypeError,
        "w: expected a ninfer.PackedWeight",
        lambda o: linear(_x(), np.ones((N, K)), o),
        _out(),
    )  # type: ignore[arg-type]


def test_bad_stream(weights: dict) -> None:
    _expect(
        TypeError,
        "stream: expected",
        lambda o: linear(_x(), weights[QType.Q4], o, stream="s0"),
        _out(),
    )


def test_workspace_smaller_than_query(weights: dict) -> None:
    import cupy as cp

    # The prefill route (dq_gemm) decodes the weight into the workspace; decode needs none.
    w, t = weights[QType.Q4], 100
    assert linear_workspace_bytes(w, T) == 0
    need = linear_workspace_bytes(w, t)
    assert need == N * 2 * 384  # one band of all N rows, K_pad = 384, BF16
    _expect(
        ValueError,
        f"workspace: expected at least {need} bytes, got 1024",
        lambda o: linear(_x(t), w, o, workspace=cp.zeros(1024, cp.uint8)),
        _out(t),
    )
    _expect(
        ValueError,
        f"workspace: expected a device buffer of at least {need} bytes, got None",
        lambda o: linear(_x(t), w, o),
        _out(t),
    )
    # 16-byte stores into the workspace: an unaligned view is refused, not faulted on.
    buf = cp.zeros(need + 16, cp.uint8)
    _expect(
        ValueError,
        "workspace: expected a 16-byte aligned address",
        lambda o: linear(_x(t), w, o, workspace=buf[8 : 8 + need]),
        _out(t),
    )


def test_host_workspace(weights: dict) -> None:
    _expect(
        TypeError,
        "workspace: expected a CUDA array",
        lambda o: linear(_x(), weights[QType.Q4], o, workspace=np.zeros(16, np.uint8)),
        _out(),
    )


def test_unsupported_problem_is_typed(weights: dict) -> None:
    # A legal geometry that no route serves (an empty table) raises UnsupportedProblem.
    d = Dispatcher(tables={80: ()})
    _expect(
        UnsupportedProblem,
        "no route for Q4",
        lambda o: d.linear(_x(), weights[QType.Q4], o),
        _out(),
    )


def test_workspace_overlapping_a_weight_plane(weights: dict) -> None:
    import cupy as cp

    w = weights[QType.Q4]
    for name, plane in w.planes.items():
        ws = plane.view(cp.uint8).reshape(-1)
        _expect(
            ValueError,
            f"workspace: expected memory disjoint from the weight, got overlap with plane '{name}'",
            lambda o, ws=ws: linear(_x(), w, o, workspace=ws),
            _out(),
        )
    # An arena holding the workspace and then the planes, with the planes placed 256 bytes
    # too early: the prefill route would decode into the codes it is reading.
    t = 100
    need = linear_workspace_bytes(w, t)
    host = w.to_host()
    arena = cp.zeros(need + sum(a.nbytes for a in host.planes.values()), cp.uint8)
    planes, off = {}, need - 256
    for name, a in host.planes.items():
        dst = arena[off : off + a.nbytes].view(a.dtype).reshape(a.shape)
        dst[...] = cp.asarray(a)
        planes[name] = dst
        off += a.nbytes
    wa = PackedWeight(w.qtype, w.n, w.k, planes, w.tensor_scale, w.device_id)
    _expect(
        ValueError,
        "workspace: expected memory disjoint from the weight, got overlap with plane 'qs'",
        lambda o: linear(_x(t), wa, o, workspace=arena[:need]),
        _out(t),
    )


def test_stream_of_another_device(weights: dict) -> None:
    import cupy as cp

    w = weights[QType.Q4]
    other = (w.device_id or 0) + 1
    keep = cp.cuda.Stream(non_blocking=True)
    if cp.cuda.runtime.getDeviceCount() > other:
        with cp.cuda.Device(other):
            stream = cp.cuda.Stream(non_blocking=True)
    else:  # one GPU: a CuPy stream that records another device as its own
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # CuPy 14 deprecates it
            stream = cp.cuda.ExternalStream(keep.ptr, other)
    _expect(
        ValueError,
        f"stream: expected a stream of device {w.device_id} \\(the weight's\\), "
        f"got one of device {other}",
        lambda o: linear(_x(), w, o, stream=stream),
        _out(),
    )


def test_requires_grad_tensors(weights: dict) -> None:
    torch = pytest.importorskip("torch")
    w = weights[QType.Q4]
    msg = "linear\\(\\) has no autograd: call it under torch.no_grad\\(\\) or pass .detach\\(\\)"
    x_grad = to_bf16_device(np.ones((T, K)), "torch").requires_grad_(True)
    _expect(
        ValueError,
        "x: expected a tensor without requires_grad \\(" + msg,
        lambda o: linear(x_grad, w, o),
        to_bf16_device(np.full((T, N), 3.0), "torch"),
    )
    out_grad = to_bf16_device(np.full((T, N), 3.0), "torch").requires_grad_(True)
    before = bf16_bits(out_grad.detach()).copy()
    with pytest.raises(ValueError, match="out: expected a tensor without requires_grad"):
        linear(to_bf16_device(np.ones((T, K)), "torch"), w, out_grad)
    torch.cuda.synchronize()
    assert np.array_equal(bf16_bits(out_grad.detach()), before)


def test_weight_planes_off_device_or_not_contiguous(weights: dict) -> None:
    import cupy as cp

    w = weights[QType.Q4]
    dev = w.device_id
    assert dev is not None
    with pytest.raises(
        ValueError, match=f"Q4 plane 'qs': expected device {dev + 1}, got device {dev}"
    ):
        PackedWeight(w.qtype, w.n, w.k, w.planes, w.tensor_scale, device_id=dev + 1)
    host = w.to_host()
    with pytest.raises(
        TypeError,
        match=f"Q4 plane 'qs': expected a CuPy array on device {dev}, got a host numpy.ndarray",
    ):
        PackedWeight(w.qtype, w.n, w.k, host.planes, w.tensor_scale, device_id=dev)
    planes = {**w.planes, "qs": cp.asfortranarray(w.planes["qs"])}
    with pytest.raises(ValueError, match="Q4 plane 'qs': expected a C-contiguous array"):
        PackedWeight(w.qtype, w.n, w.k, planes, w.tensor_scale, device_id=dev)
    # Host weights (numpy planes, device_id None) still go to the device.
    again = host.to_device()
    assert again.is_device and again.device_id == dev
    assert np.array_equal(again.decode(), w.decode())


def test_byte_strides_not_a_multiple_of_the_item_size(weights: dict) -> None:
    import cupy as cp

    # A row pitch of 2K + 1 bytes floors to K elements: it would pass as contiguous and
    # the kernel would read every row shifted by its index in bytes.
    base = cp.zeros(T * (2 * K + 1) + 16, cp.uint8)
    try:
        x = cp.ndarray((T, K), ml_dtypes.bfloat16, base.data, strides=(2 * K + 1, 2))
    except (TypeError, ValueError) as e:  # a CuPy that refuses such views needs no check
        pytest.skip(f"CuPy refuses the view: {e}")
    _expect(
        ValueError,
        f"x: expected byte strides that are multiples of the item size 2, got \\({2 * K + 1}, 2\\)",
        lambda o: linear(x, weights[QType.Q4], o),
        _out(),
    )


def test_extents_past_int32(weights: dict) -> None:
    import cupy as cp

    w = weights[QType.Q4]
    # Stride 0 over one row: a (2**31, K) view without 2**31 rows of memory.
    big = cp.lib.stride_tricks.as_strided(_x(1), shape=(2**31, K), strides=(0, 2))
    _expect(
        ValueError,
        r"x: expected T <= 2147483647 rows \(the kernels take int32\), got shape \(2147483648, 384\)",
        lambda o: linear(big, w, o),
        _out(),
    )
    with pytest.raises(ValueError, match="T: expected T <= 2147483647"):
        linear_workspace_bytes(w, 2**31)
    with pytest.raises(ValueError, match="N: expected N <= 2147483632"):
        PackedWeight(w.qtype, 2**31, w.k, w.planes, w.tensor_scale, w.device_id)
    with pytest.raises(ValueError, match="K: expected K <= 2147483520"):
        PackedWeight(w.qtype, w.n, 2**31, w.planes, w.tensor_scale, w.device_id)


def test_weight_with_zero_n_or_k(weights: dict) -> None:
    w = weights[QType.Q4]
    for n, k, msg in [(0, w.k, "N: expected N >= 1, got 0"), (w.n, 0, "K: expected K >= 1, got 0")]:
        with pytest.raises(ValueError, match=msg):
            PackedWeight(w.qtype, n, k, w.planes, w.tensor_scale, w.device_id)


def test_a_repeated_call_is_checked_again_after_an_in_place_change(weights: dict) -> None:
    """The dispatcher keeps a launch per (weight, buffers) it has checked (ops/dispatch.py);
    an array whose geometry changes in place is a new key, checked again."""
    w = weights[QType.Q4]
    x, out = _x(), _out()
    linear(x, w, out)
    linear(x, w, out)  # the cached launch
    x.shape = (2 * T, K // 2)  # the same memory as another geometry
    _expect(ValueError, r"x: expected shape \(6, 384\), got \(6, 192\)",
            lambda o: linear(x, w, o), out)  # fmt: skip
    torch = pytest.importorskip("torch")
    xt, ot = to_bf16_device(np.ones((T, K)), "torch"), to_bf16_device(np.ones((T, N)), "torch")
    linear(xt, w, ot)
    linear(xt, w, ot)
    xt.requires_grad_(True)
    with pytest.raises(ValueError, match="x: expected a tensor without requires_grad"):
        linear(xt, w, ot)
    torch.cuda.synchronize()
