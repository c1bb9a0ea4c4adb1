"""The gate's measurement on the GPU: the arena's layout, the clock probe, the planted regression.

The planted-regression test is the gate's power check (docs/regress.md): it applies
tests/fixtures/planted_w8_dec_q.patch in a temporary worktree and runs the same-runner
A/B of HEAD against it over a few W8 `dec_q` points and a few untouched ones. It takes
about two minutes; NINFER_GATE_POWER=1 runs it.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from ninfer import QType, record
from ninfer.bench.memory import arena
from ninfer.bench.points import BenchPoint
from ninfer.policy import Policy

pytestmark = pytest.mark.gpu
ROOT = Path(__file__).resolve().parents[2]
POINTS = [BenchPoint(QType.W8, Policy.A16, 5120, 10240, t) for t in (1, 16, 128)] + [
    BenchPoint(QType.Q5, Policy.A16, 6144, 5120, 1)
]


def test_arena_places_every_buffer_the_same_way_each_round() -> None:
    a = arena(POINTS, 256)
    first = {g: a.placement(g) for g in a.groups}
    a.free()
    b = arena(POINTS, 256)
    try:
        assert {g: b.placement(g) for g in b.groups} == first
        for g in b.groups:
            for name, off in b.placement(g).items():
                assert off % (2 << 20) == 0, (g, name, off)  # each on its own 2 MiB pages
    finally:
        b.free()


def test_the_clock_probe_reads_the_card() -> None:
    import cupy as cp

    from ninfer.bench.telemetry import Telemetry

    tel = Telemetry(pci_bus_id=cp.cuda.Device().pci_bus_id)
    if not tel.available:
        pytest.skip(f"NVML is not usable here: {tel.error}")
    mx = tel.max_sm_mhz()
    assert mx and 300 < mx < 5000
    t = tel.read()
    assert t["mem_mhz"] and t["temp_c"] is not None


@pytest.mark.timing
@pytest.mark.skipif(
    os.environ.get("NINFER_GATE_POWER") != "1", reason="NINFER_GATE_POWER=1 runs it (minutes)"
)
def test_planted_regression_is_flagged_on_its_points_only(tmp_path: Path) -> None:
    from ninfer.regress.ab import run_ab, worktree
    from ninfer.regress.compare import compare
    from ninfer.regress.runner import RoundPlan

    only = [
        record.PointKey("w8", "a16", 5120, 10240, 1), record.PointKey("w8", "a16", 34816, 5120, 16),
        record.PointKey("w8", "a16", 5120, 10240, 128), record.PointKey("q5", "a16", 6144, 5120, 1),
    ]  # fmt: skip
    with worktree(ROOT, "HEAD") as planted:
        subprocess.run(["git", "-C", str(planted), "apply",
                        str(ROOT / "tests/fixtures/planted_w8_dec_q.patch")], check=True)  # fmt: skip
        plan = RoundPlan("all", 20, 3, 0, 1, only)
        a, b, _ = run_ab(tmp_path, plan, 6, ROOT, "HEAD", b_tree=planted)
    c = compare(a, b, same_runner=True)
    states = {str(r.key): r.state for r in c.rows}
    assert states["w8 a16 [5120,10240] T=1"] == "slower"
    assert states["w8 a16 [34816,5120] T=16"] == "slower"
    assert states["w8 a16 [5120,10240] T=128"] != "slower"  # dq_rs: untouched
    assert states["q5 a16 [6144,5120] T=1"] != "slower"  # another format: untouched
