"""``linear()``'s input checks, run on the CPU against stand-ins for device arrays.

The stand-ins carry only the attributes ninfer reads (a CuPy array's ``data.ptr``,
``data.device_id``, ``flags``; a torch tensor's ``data_ptr()``, ``stride()``, ...), so
every check up to the launch runs here for real; the GPU twins of these tests are in
tests/gpu/test_linear_errors.py. The compute capability query and the launch plan are
the only things replaced (in ``ninfer/ops/dispatch.py``): the first needs a GPU, the
second records that nothing was launched.
"""

from __future__ import annotations

import importlib
import math
from types import SimpleNamespace
from typing import Any

import ml_dtypes
import numpy as np
import pytest

from ninfer import PackedWeight, QType, pack
from ninfer.formats.packed import INT32_MAX, K_MAX, N_MAX
from ninfer.ops import linear, linear_workspace_bytes
from ninfer.runtime import interop

dispatch_mod = importlib.import_module("ninfer.ops.dispatch")

N, K, T = 32, 128, 3
BF16 = np.dtype(ml_dtypes.bfloat16)


def _c_strides(shape: tuple[int, ...], item: int) -> tuple[int, ...]:
    out, acc = [], item
    for d in reversed(shape):
        out.append(acc)
        acc *= d
    return tuple(reversed(out))


class FakeCupy:
    """A CuPy ndarray as ninfer sees it; no memory behind ``ptr``."""

    __module__ = "cupy._fake"  # what interop's duck test for CuPy looks at

    def __init__(
        self,
        shape: tuple[int, ...],
        dtype: Any,
        ptr: int,
        device: int = 0,
        strides: tuple[int, ...] | None = None,
    ) -> None:
        self.shape = tuple(shape)
        self.dtype = np.dtype(dtype)
        self.itemsize = self.dtype.itemsize
        dense = _c_strides(self.shape, self.itemsize)
        self.strides = dense if strides is None else tuple(strides)
        self.nbytes = math.prod(self.shape) * self.itemsize
        self.data = SimpleNamespace(ptr=ptr, device_id=device)
        self.device = SimpleNamespace(id=device)
        self.flags = SimpleNamespace(c_contiguous=self.strides == dense)


class FakeTorch:
    """A torch CUDA tensor as ninfer sees it."""

    __module__ = "torch._fake"

    def __init__(self, shape: tuple[int, ...], ptr: int, requires_grad: bool = False) -> None:
        self.shape = tuple(shape)
        self.dtype = "torch.bfloat16"
        self.is_cuda = True
        self.requires_grad = requires_grad
        self.device = SimpleNamespace(index=0)
        self._ptr = ptr

    def data_ptr(self) -> int:
        return self._ptr

    def stride(self) -> tuple[int, ...]:
        return _c_strides(self.shape, 1)

    def element_size(self) -> int:
        return 2


_WEIGHT_BASE = 0x7000_0000
_X_BASE, _OUT_BASE, _WS_BASE = 0x1000_0000, 0x2000_0000, 0x3000_0000


def _device_weight(device: int = 0) -> PackedWeight:
    host = pack(np.random.default_rng(5).standard_normal((N, K)) + 0.1, QType.Q4)
    planes, ptr = {}, _WEIGHT_BASE
    for name, a in host.planes.items():
        planes[name] = FakeCupy(a.shape, a.dtype, ptr, device)
        ptr += -(-a.nbytes // 256) * 256
    return PackedWeight(host.qtype, host.n, host.k, planes, host.tensor_scale, device)


class Launches:
    """A plan whose launches are counted; ``bound`` keeps every (x, out, ws) it bound."""

    def __init__(self) -> None:
        self.count = 0
        self.bound: list[tuple[int, int, int]] = []

    def bind(self, x_ptr: int, out_ptr: int, ws_ptr: int) -> Launches:
        self.bound.append((x_ptr, out_ptr, ws_ptr))
        return self

    def launch(self, stream: int) -> None:
        self.count += 1

    def run(self, x_ptr: int, out_ptr: int, stream: int, ws_ptr: int = 0) -> None:
        self.bind(x_ptr, out_ptr, ws_ptr).launch(stream)


@pytest.fixture
def launches(monkeypatch: pytest.MonkeyPatch) -> Launches:
    rec = Launches()
    monkeypatch.setattr(dispatch_mod, "_device_cc", lambda device_id: 90)
    monkeypatch.setattr(dispatch_mod.Dispatcher, "_built", lambda self, e, w: rec)
    return rec


def _x(t: int = T, **kw: Any) -> FakeCupy:
    return FakeCupy((t, K), BF16, _X_BASE, **kw)


def _out(t: int = T) -> FakeCupy:
    return FakeCupy((t, N), BF16, _OUT_BASE)


def _rejects(launches: Launches, exc: type[Exception], match: str, call: Any) -> None:
    with pytest.raises(exc, match=match) as info:
        call()
    assert "\n" not in str(info.value), "error messages are one line"
    assert launches.count == 0, "a rejected call launched"


def test_harness_accepts_a_valid_call(launches: Launches) -> None:
    # The stand-ins pass every check, so each rejection below is the check under test.
    linear(_x(), _device_weight(), _out(), stream=0)
    linear(FakeTorch((T, K), _X_BASE), _device_weight(), FakeTorch((T, N), _OUT_BASE), stream=0)
    assert launches.count == 2


def test_arrays_on_another_device(launches: Launches) -> None:
    # The single-GPU stand-in for tests/gpu's test_device_mismatch (which needs two GPUs).
    w = _device_weight(device=0)
    _rejects(
        launches,
        ValueError,
        r"x: expected device 0 \(the weight's\), got device 1",
        lambda: linear(_x(device=1), w, _out(), stream=0),
    )
    ws = FakeCupy((64,), np.uint8, _WS_BASE, device=1)
    _rejects(
        launches,
        ValueError,
        "workspace: expected device 0, got device 1",
        lambda: linear(_x(), w, _out(), workspace=ws, stream=0),
    )


# --- PackedWeight construction: extents -------------------------------------------------


@pytest.mark.parametrize(
    ("n", "k", "msg"),
    [
        (0, K, "N: expected N >= 1, got 0"),
        (N, 0, "K: expected K >= 1, got 0"),
        (-3, K, "N: expected N >= 1, got -3"),
    ],
)
def test_packed_rejects_empty_extent(n: int, k: int, msg: str) -> None:
    with pytest.raises(ValueError, match=msg):
        PackedWeight(QType.Q4, n, k, {})


def test_packed_rejects_extents_past_int32() -> None:
    # The padded extents must fit int32 too: N to a band of 16, K to K_pad (128).
    assert N_MAX == 2**31 - 16 and K_MAX == 2**31 - 128
    for n, k, name, limit in [
        (2**31, K, "N", N_MAX),
        (N_MAX + 1, K, "N", N_MAX),
        (N, 2**31, "K", K_MAX),
        (N, K_MAX + 1, "K", K_MAX),
    ]:
        with pytest.raises(ValueError, match=f"{name}: expected {name} <= {limit} "):
            PackedWeight(QType.Q4, n, k, {})


@pytest.mark.parametrize("bad", [4.0, "32", True, None])
def test_packed_rejects_non_int_extent(bad: Any) -> None:
    with pytest.raises(TypeError, match="N: expected an int, got"):
        PackedWeight(QType.Q4, bad, K, {})


def test_packed_normalises_numpy_int_extents() -> None:
    host = pack(np.ones((N, K)), QType.Q4)
    w = PackedWeight(host.qtype, np.int64(N), np.int32(K), host.planes, host.tensor_scale)
    assert type(w.n) is int and type(w.k) is int


# --- PackedWeight construction: plane placement ----------------------------------------


def test_host_weight_still_round_trips() -> None:
    # Host weights (device_id None, numpy planes) are what to_device() starts from.
    w = pack(np.random.default_rng(1).standard_normal((N, K)), QType.Q4)
    assert not w.is_device and w.device_id is None
    again = PackedWeight(w.qtype, w.n, w.k, dict(w.planes), w.tensor_scale, None)
    assert np.array_equal(again.decode(), w.decode())
    assert w.to_host() is w


def test_host_planes_with_a_device_id_are_rejected() -> None:
    w = pack(np.ones((N, K)), QType.Q4)
    with pytest.raises(
        TypeError,
        match=r"Q4 plane 'qs': expected a CuPy array on device 0, got a host numpy.ndarray",
    ):
        PackedWeight(w.qtype, w.n, w.k, w.planes, w.tensor_scale, device_id=0)


def test_device_planes_without_a_device_id_are_rejected() -> None:
    w = _device_weight()
    with pytest.raises(TypeError, match=r"expected a host numpy.ndarray \(device_id None\)"):
        PackedWeight(w.qtype, w.n, w.k, w.planes, w.tensor_scale, None)


def test_planes_on_another_device_are_rejected() -> None:
    w = _device_weight(device=0)
    with pytest.raises(ValueError, match="Q4 plane 'qs': expected device 1, got device 0"):
        PackedWeight(w.qtype, w.n, w.k, w.planes, w.tensor_scale, device_id=1)


def test_non_contiguous_device_plane_is_rejected() -> None:
    w = _device_weight()
    qs = w.planes["qs"]
    planes = dict(w.planes)
    # Same shape and dtype, column-major: the kernels would read it as row-major.
    planes["qs"] = FakeCupy(qs.shape, qs.dtype, qs.data.ptr, strides=(1, qs.shape[0]))
    with pytest.raises(ValueError, match="Q4 plane 'qs': expected a C-contiguous array"):
        PackedWeight(w.qtype, w.n, w.k, planes, w.tensor_scale, 0)


def test_non_array_device_plane_is_rejected() -> None:
    w = _device_weight()
    planes = {**w.planes, "scales": [[0.0]]}
    with pytest.raises(TypeError, match="plane 'scales': expected a CuPy array on device 0"):
        PackedWeight(w.qtype, w.n, w.k, planes, w.tensor_scale, 0)


@pytest.mark.parametrize(("dev", "exc"), [(-1, ValueError), (True, TypeError), ("0", TypeError)])
def test_bad_device_id_is_rejected(dev: Any, exc: type[Exception]) -> None:
    w = _device_weight()
    with pytest.raises(exc, match="device_id: expected"):
        PackedWeight(w.qtype, w.n, w.k, w.planes, w.tensor_scale, dev)


# --- byte strides --------------------------------------------------------------------------


@pytest.fixture(params=["fast", "duck"])
def cupy_path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    # "fast": interop's `type(a) is cupy.ndarray` branch; "duck": its module-name fallback.
    monkeypatch.setattr(interop, "_CUPY_NDARRAY", FakeCupy if request.param == "fast" else ())
    return str(request.param)


def test_strides_not_a_multiple_of_the_item_size(cupy_path: str) -> None:
    # A 769-byte row pitch floors to 384 elements: it would pass as contiguous.
    x = _x(strides=(2 * K + 1, 2))
    with pytest.raises(
        ValueError,
        match=r"x: expected byte strides that are multiples of the item size 2, got \(257, 2\)",
    ):
        interop.describe(x, "x")
    with pytest.raises(ValueError, match="multiples of the item size 2"):
        interop.describe(_x(strides=(2 * K, 3)), "x")


def test_strides_of_extent_one_axes_are_free(cupy_path: str) -> None:
    d = interop.describe(_x(t=1, strides=(2 * K + 1, 2)), "x")
    assert d.c_contiguous and d.strides == (K, 1)
    d = interop.describe(_x(), "x")
    assert d.strides == (K, 1) and d.kind == "cupy"


def test_linear_rejects_odd_byte_strides(launches: Launches, cupy_path: str) -> None:
    _rejects(
        launches,
        ValueError,
        "x: expected byte strides that are multiples",
        lambda: linear(_x(strides=(2 * K + 1, 2)), _device_weight(), _out(), stream=0),
    )


# --- T past int32 --------------------------------------------------------------------------


def test_t_past_int32_is_rejected(launches: Launches) -> None:
    w = _device_weight()
    big = FakeCupy((2**31, K), BF16, _X_BASE, strides=(0, 2))  # stride 0: how it gets made
    _rejects(
        launches,
        ValueError,
        r"x: expected T <= 2147483647 rows \(the kernels take int32\), got shape \(2147483648, 128\)",
        lambda: linear(big, w, _out(), stream=0),
    )
    with pytest.raises(ValueError, match=f"T: expected T <= {INT32_MAX}"):
        linear_workspace_bytes(w, 2**31)
    assert linear_workspace_bytes(w, INT32_MAX) >= 0  # the bound itself is legal


# --- workspace overlapping the weight ------------------------------------------------------


@pytest.mark.parametrize("plane", ["qs", "scales"])
def test_workspace_overlapping_a_plane(launches: Launches, plane: str) -> None:
    w = _device_weight()
    p = w.planes[plane]
    # A workspace starting on the plane's last byte, as an arena's off-by-one would.
    ws = FakeCupy((16,), np.uint8, p.data.ptr + p.nbytes - 1)
    _rejects(
        launches,
        ValueError,
        f"workspace: expected memory disjoint from the weight, got overlap with plane '{plane}'",
        lambda: linear(_x(), w, _out(), workspace=ws, stream=0),
    )
    touching = FakeCupy((16,), np.uint8, _WEIGHT_BASE - 16)  # ends where the planes begin
    linear(_x(), w, _out(), workspace=touching, stream=0)
    assert launches.count == 1


def test_workspace_overlapping_x_or_out_names_which(launches: Launches) -> None:
    w = _device_weight()
    for name, base in (("x", _X_BASE), ("out", _OUT_BASE)):
        _rejects(
            launches,
            ValueError,
            f"workspace: expected memory disjoint from x and out, got overlap with {name}$",
            lambda base=base: linear(
                _x(), w, _out(), workspace=FakeCupy((64,), np.uint8, base + 2), stream=0
            ),
        )


# --- stream of another device ---------------------------------------------------------------


def test_stream_of_another_device(launches: Launches) -> None:
    w = _device_weight(device=0)
    cupy_s = SimpleNamespace(ptr=0x55, device_id=1)
    torch_s = SimpleNamespace(cuda_stream=0x66, device_index=1)
    for s in (cupy_s, torch_s):
        _rejects(
            launches,
            ValueError,
            r"stream: expected a stream of device 0 \(the weight's\), got one of device 1",
            lambda s=s: linear(_x(), w, _out(), stream=s),
        )


def test_streams_of_unknown_device_pass(launches: Launches) -> None:
    # CuPy's null / per-thread singletons and device-less ExternalStreams say -1; a raw
    # handle says nothing: the caller vouches for those.
    w = _device_weight(device=0)
    for s in (SimpleNamespace(ptr=0, device_id=-1), 0x77, SimpleNamespace(ptr=0x88, device_id=0)):
        linear(_x(), w, _out(), stream=s)
    assert launches.count == 3


def test_resolve_stream_handles() -> None:
    r = interop.resolve_stream
    assert r(SimpleNamespace(cuda_stream=0x66, device_index=2), False, 2) == 0x66
    assert r(SimpleNamespace(ptr=0x55, device_id=3), False, 3) == 0x55
    assert r(np.int64(9), False, 0) == 9
    with pytest.raises(ValueError, match="got one of device 3"):
        r(SimpleNamespace(ptr=0x55, device_id=3), False, 0)
    with pytest.raises(ValueError, match="non-negative raw handle"):
        r(-1, False, 0)


# --- requires_grad --------------------------------------------------------------------------


def test_requires_grad_is_rejected(launches: Launches) -> None:
    w = _device_weight()
    msg = (
        r"expected a tensor without requires_grad \(linear\(\) has no autograd: call it under "
        r"torch.no_grad\(\) or pass .detach\(\)\), got requires_grad=True"
    )
    x_g = FakeTorch((T, K), _X_BASE, requires_grad=True)
    out_g = FakeTorch((T, N), _OUT_BASE, requires_grad=True)
    _rejects(launches, ValueError, "x: " + msg, lambda: linear(x_g, w, _out(), stream=0))
    _rejects(
        launches,
        ValueError,
        "out: " + msg,
        lambda: linear(FakeTorch((T, K), _X_BASE), w, out_g, stream=0),
    )


def test_activation_element_counts_past_int32_are_rejected(launches: Launches) -> None:
    # dec_q indexes x as (t * K + k) in int32: T within bounds, T × K not.
    w = _device_weight()
    t = INT32_MAX // K + 1
    x = FakeCupy((t, K), BF16, _X_BASE)
    _rejects(
        launches,
        ValueError,
        rf"x: expected at most {INT32_MAX} elements \(the kernels index it in int32\)",
        lambda: linear(x, w, FakeCupy((t, N), BF16, 0x9000_0000_0000), stream=0),
    )
