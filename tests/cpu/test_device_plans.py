"""tools/device_plan.sh: every committed plan passes its line checks, which run before any
step, and a bad line stops the plan with the line's reason and nothing run. A plan is
written on a machine without the GPU and first run in a device call, where a typo costs
the call's device time."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PLANS = sorted(ROOT.glob("experiments/*/device_calls/*.plan"))


def _check(plan: Path, out: Path) -> subprocess.CompletedProcess[str]:
    # BUDGET_S=0: the lines are checked, then every run is skipped as past the budget.
    return subprocess.run(
        ["bash", str(ROOT / "tools" / "device_plan.sh"), str(plan)],
        cwd=ROOT,
        env={"PATH": "/usr/bin:/bin", "BUDGET_S": "0", "OUT": str(out)},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_there_are_plans() -> None:
    assert PLANS, "no experiments/*/device_calls/*.plan found"


@pytest.mark.parametrize("plan", PLANS, ids=lambda p: p.name)
def test_every_plan_passes_its_line_checks(plan: Path, tmp_path: Path) -> None:
    r = _check(plan, tmp_path)
    assert r.returncode == 0, r.stderr
    skipped = [ln for ln in r.stdout.splitlines() if ln.startswith("== plan ") and "skipped" in ln]
    assert skipped, r.stdout  # at least one run, and none started


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        ("ab: AB_REF=main -- abrefx", "steps of tools/device.sh, got: abrefx"),
        ("ab: AB_REF=main abref", "expected 'name: VAR=value ... -- step ...'"),
        ("ab: AB_REF=main --", "at least one step"),
        ("a b: -- env", "expected a name of [A-Za-z0-9_.-] and ':'"),
        ("ab: main -- abref", "settings as VAR=value, got: main"),
    ],
)
def test_a_bad_line_stops_the_plan_before_any_run(line: str, reason: str, tmp_path: Path) -> None:
    plan = tmp_path / "bad.plan"
    plan.write_text(f"# a good line first: nothing runs either\nfirst: -- env\n{line}\n")
    r = _check(plan, tmp_path / "out")
    assert r.returncode == 2
    assert reason in r.stderr
    assert "== plan" not in r.stdout
    assert not (tmp_path / "out").exists()
