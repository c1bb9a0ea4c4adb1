"""``ninfer-bench sweep-plan``: a bounded sweep that keeps every T where a cliff can sit."""

from __future__ import annotations

from pathlib import Path

import pytest

from ninfer import Policy, QType
from ninfer.bench import cli
from ninfer.bench.points import load_suite_file
from ninfer.bench.sweep_plan import changes, plan_ts
from ninfer.routes import Problem, select


def _key(q: QType, n: int, k: int, t: int) -> tuple[str, str]:
    p = Problem(q, Policy.A16, n, k, t, 90)
    r = select(p)
    return r.name, r.launcher.instance(p)


@pytest.mark.parametrize(("q", "n", "k"), [(QType.W8, 2048, 16384), (QType.Q6, 248320, 2048)])
def test_changes_are_where_the_dispatch_changes(q: QType, n: int, k: int) -> None:
    got = changes(q, n, k, 90, 300)
    want = [t for t in range(2, 301) if _key(q, n, k, t) != _key(q, n, k, t - 1)]
    assert got == want and got  # every such T, and these shapes have some


def test_the_plan_keeps_small_t_seams_tiles_and_a_grid() -> None:
    q, n, k = QType.W8, 2048, 16384
    ts = plan_ts(q, n, k, 90, t_max=300, dense=16, step=50)
    assert ts == sorted(set(ts)) and ts[0] == 1 and ts[-1] == 300
    assert set(range(1, 17)) <= set(ts)
    for c in changes(q, n, k, 90, 300):
        assert {c - 2, c - 1, c, c + 1} <= set(ts), c
    assert {64, 65, 128, 129, 256, 257, 50, 100, 150, 200, 250, 300} <= set(ts)
    assert 40 not in ts  # past --dense, not a seam, a grid or a tile T


def test_the_command_writes_a_suite_file_named_after_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "sweep.yaml"
    argv = ["sweep-plan", "--suite", "qwen3_6_27b", "--t-max", "128", "--out", str(out)]
    assert cli.main(argv) == 0
    assert "wrote" in capsys.readouterr().out
    points = load_suite_file(out, expect_name="sweep")
    assert max(p.t for p in points) == 128 and min(p.t for p in points) == 1
    assert out.read_text().startswith("# ninfer-bench sweep-plan --suite qwen3_6_27b")
    with pytest.raises(SystemExit):
        cli.main(["sweep-plan", "--out", str(out), "--step", "0"])
    assert "expected --t-max, --dense and --step >= 1" in capsys.readouterr().err
