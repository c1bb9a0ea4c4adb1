"""The dispatcher (ninfer/ops/dispatch.py) on the CPU: overrides are passed in and stay
in the dispatcher they were given to, its caches follow the weights' lives, and no
module keeps a forcing global. Device arrays are test_linear_checks' stand-ins."""

from __future__ import annotations

import gc
import re
from pathlib import Path

import numpy as np
import pytest
from test_linear_checks import FakeCupy  # tests/cpu is on sys.path (rootless test dirs)

from ninfer import Policy, QType, UnsupportedProblem, pack
from ninfer.formats.packed import PackedWeight
from ninfer.ops import dispatch
from ninfer.ops.dispatch import DEFAULT, Dispatcher
from ninfer.routes import ROUTE_TABLES, Problem
from ninfer.routes.dq_gemm import DqGemmTuning
from ninfer.routes.dq_rs import DqRsTuning
from ninfer.routes.table import Route

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
