"""The dispatcher (ninfer/ops/dispatch.py) on the CPU: overrides are passed in and stay
in the dispatcher they were given to, its caches follow the weights' lives, and no
module keeps a forcing global. Device arrays are test_linear_checks' stand-ins."""

from __future__ import annotations

import gc
import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from test_linear_checks import (  # tests/cpu is on sys.path (rootless test dirs)
    _OUT_BASE,
    _X_BASE,
    BF16,
    FakeCupy,
    FakeTorch,
    Launches,
    _device_weight,
    _out,
    _x,
    launches,
)
from test_linear_checks import K as KL  # the checks' small weight: [NL, KL], T = TL
from test_linear_checks import N as NL
from test_linear_checks import T as TL

from ninfer import Policy, QType, UnsupportedProblem, pack
from ninfer.formats.packed import PackedWeight
from ninfer.ops import dispatch, linear
from ninfer.ops.dispatch import DEFAULT, Dispatcher
from ninfer.routes import ROUTE_TABLES, Problem
from ninfer.routes.dq_gemm import DqGemmTuning
from ninfer.routes.dq_rs import DqRsTuning
from ninfer.routes.table import Route
from ninfer.runtime import interop

__all__ = ["launches"]  # a fixture, imported to be used here

N, K = 4304, 1152  # dq_gemm at T = 65 on sm_90 (N < 4608), one band by default


@pytest.fixture(autouse=True)
def sm90(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(dispatch, "_device_cc", lambda device_id: 90)


def _weight(n: int = N, k: int = K) -> PackedWeight:
    host = pack(np.random.default_rng(1).standard_normal((n, k)), QType.Q4)
    planes, ptr = {}, 0x7000_0000
    for name, a in host.planes.items():
        planes[name] = FakeCupy(a.shape, a.dtype, ptr)
        ptr += -(-a.nbytes // 256) * 256
    return PackedWeight(host.qtype, host.n, host.k, planes, host.tensor_scale, 0)


def test_a_tuning_override_stays_in_its_dispatcher() -> None:
    w = _weight()
    small = DEFAULT.with_tuning(dq_gemm=DqGemmTuning(band_bytes=1 << 20))
    default = DEFAULT.workspace_bytes(w, 65)
    assert default == N * 2 * 1152  # one band of the whole weight
    assert small.workspace_bytes(w, 65) == 2 * 512 * 2 * 1152  # two 512-row slots
    assert DEFAULT.workspace_bytes(w, 65) == default  # asked after: not served the override
    assert small.kernels is DEFAULT.kernels  # compiled modules are shared (content-keyed)


def test_a_table_override_stays_in_its_dispatcher() -> None:
    w = _weight()
    mine = Dispatcher(tables={80: (Route("dec_q", 1, 64), Route("dq_rs", 65, None))})
    p = Problem(QType.Q4, Policy.A16, N, K, 65, 90)
    assert mine.route(w, 65, Policy.A16)[1].name == "dq_rs"
    assert DEFAULT.route(w, 65, Policy.A16)[1].name == "dq_gemm"
    assert mine.select(p).name == "dq_rs"
    # dq_rs is sm_90a code: a table that hands it another architecture is refused, typed.
    p120 = Problem(QType.Q4, Policy.A16, N, K, 65, 120)
    with pytest.raises(UnsupportedProblem, match="dq_rs, which cannot run it"):
        mine.select(p120)


def test_forcing_dq_rs_changes_its_workspace_not_the_default() -> None:
    w = _weight(14352, 640)  # dq_rs at T = 100 on sm_90 (N >= 14336)
    nb2 = DEFAULT.with_tuning(dq_rs=DqRsTuning(nb=2))
    assert DEFAULT.route(w, 100, Policy.A16)[1].name == "dq_rs"
    assert nb2.workspace_bytes(w, 100) > DEFAULT.workspace_bytes(w, 100)
    assert "nb=2" in nb2.tuning["dq_rs"].text()
    assert "nb=" not in DEFAULT.tuning["dq_rs"].text()  # what the fingerprint hashes


def test_bad_overrides_are_refused() -> None:
    with pytest.raises(ValueError, match=r"tuning: expected route names of .*got \['dq_xx'\]"):
        Dispatcher(tuning={"dq_xx": DqRsTuning()})
    with pytest.raises(TypeError, match=r"tuning\['dq_rs'\]: expected DqRsTuning, got DqGemm"):
        Dispatcher(tuning={"dq_rs": DqGemmTuning()})


def test_a_freed_weight_leaves_the_cache() -> None:
    d = Dispatcher()
    w = _weight()
    d.workspace_bytes(w, 65)
    d.workspace_bytes(w, 1)
    assert len(d._weights) == 1
    del w
    gc.collect()
    assert d._weights == {}, "the cache kept a freed weight's entries (or the weight)"


def test_the_shipped_tables_are_read_only() -> None:
    with pytest.raises(TypeError):
        ROUTE_TABLES[90] = ()  # type: ignore[index]


def test_no_module_keeps_a_forcing_global() -> None:
    # Overrides are passed to a Dispatcher; a module-level *_FORCE switch would change
    # every caller at once (and survive a failed test).
    root = Path(__file__).resolve().parents[2] / "ninfer"
    found = [
        f"{p.relative_to(root)}:{i}"
        for p in root.rglob("*.py")
        for i, line in enumerate(p.read_text().splitlines(), 1)
        if re.match(r"^[A-Z_]*FORCE[A-Z_]*\s*[:=]", line)
    ]
    assert not found, found


# --- the call cache: a repeat skips the checks it passed, and nothing else ---------------


@pytest.fixture
def keyed(monkeypatch: pytest.MonkeyPatch) -> None:
    """FakeCupy takes CuPy's short path (interop.call_key keys it as a cupy.ndarray)."""
    monkeypatch.setattr(interop, "_CUPY_NDARRAY", FakeCupy)


def test_a_repeated_call_binds_once(keyed: None, launches: Launches) -> None:
    w = _device_weight()
    x, out = _x(), _out()
    for _ in range(3):
        linear(x, w, out, stream=0)
    assert launches.count == 3
    assert launches.bound == [(_X_BASE, _OUT_BASE, 0)], "the repeats were bound again"
    linear(_x(), w, _out(), stream=0)  # other objects, same geometry: the same launch
    assert len(launches.bound) == 1
    linear(x, w, FakeCupy((TL, NL), BF16, _OUT_BASE + 256), stream=0)  # another out: bound
    assert launches.bound[-1] == (_X_BASE, _OUT_BASE + 256, 0)
    assert launches.count == 5


@pytest.mark.parametrize(
    ("change", "exc", "match"),
    [
        (lambda a: setattr(a, "shape", (TL + 1, KL)), ValueError, r"out: expected shape \(4, 32\)"),
        (lambda a: setattr(a, "strides", (4 * KL, 2)), ValueError, "x: expected a row-major"),
        (lambda a: setattr(a, "dtype", np.dtype(np.float16)), TypeError, "x: expected dtype"),
        (lambda a: setattr(a, "data", SimpleNamespace(ptr=_OUT_BASE, device_id=0)), ValueError,
         "out: expected memory disjoint from x"),
        (lambda a: setattr(a, "data", SimpleNamespace(ptr=_X_BASE, device_id=1)), ValueError,
         r"x: expected device 0 \(the weight's\)"),
    ],
)  # fmt: skip
def test_an_array_changed_in_place_is_checked_again(
    keyed: None, launches: Launches, change: Any, exc: type[Exception], match: str
) -> None:
    w = _device_weight()
    x, out = _x(), _out()
    linear(x, w, out, stream=0)
    change(x)
    _rejects_after(launches, exc, match, lambda: linear(x, w, out, stream=0))


def test_a_workspace_without_a_key_is_not_taken_for_none(keyed: None, launches: Launches) -> None:
    w = _device_weight()
    x, out = _x(), _out()
    linear(x, w, out, stream=0)  # cached without a workspace
    ws = FakeTorch((64,), _X_BASE + 2)  # no key: a stand-in, not a torch.Tensor
    _rejects_after(
        launches, ValueError, "workspace: expected memory disjoint from x and out",
        lambda: linear(x, w, out, workspace=ws, stream=0),
    )  # fmt: skip


def test_a_cached_call_still_checks_its_stream(keyed: None, launches: Launches) -> None:
    w = _device_weight(device=0)
    x, out = _x(), _out()
    linear(x, w, out, stream=0)
    _rejects_after(
        launches, ValueError, "stream: expected a stream of device 0",
        lambda: linear(x, w, out, stream=SimpleNamespace(ptr=0x55, device_id=1)),
    )  # fmt: skip


def test_a_freed_weight_leaves_the_call_cache(keyed: None, launches: Launches) -> None:
    d = Dispatcher()
    w = _device_weight()
    d.linear(_x(), w, _out(), stream=0)
    assert len(d._weights[id(w)][2]) == 1
    del w
    gc.collect()
    assert d._weights == {}


def _rejects_after(launches: Launches, exc: type[Exception], match: str, call: Any) -> None:
    before = launches.count
    with pytest.raises(exc, match=match):
        call()
    assert launches.count == before, "a rejected call launched"
