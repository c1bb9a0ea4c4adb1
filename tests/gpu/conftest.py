"""GPU conformance: every test here is marked ``gpu``; the summary prints worst errors."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from .oracle import WORST


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.gpu)


def _merge(worst: dict[str, dict[str, object]]) -> None:
    for key, w in worst.items():
        mine = WORST.get(key)
        if mine is None:
            WORST[key] = dict(w)
            continue
        checks = int(mine["checks"]) + int(w["checks"])  # type: ignore[call-overload]
        if float(w["normalized"]) > float(mine["normalized"]):  # type: ignore[arg-type]
            mine.update(w)
        mine["checks"] = checks


def pytest_sessionfinish(session: pytest.Session) -> None:
    # An xdist worker hands its worst errors to the controller, which prints the summary.
    out = getattr(session.config, "workeroutput", None)
    if out is not None:
        out["ninfer_worst"] = json.dumps(WORST)


@pytest.hookimpl(optionalhook=True)  # an xdist hook: unknown where xdist is absent
def pytest_testnodedown(node, error) -> None:  # type: ignore[no-untyped-def]
    data = getattr(node, "workeroutput", {}).get("ninfer_worst")
    if data:
        _merge(json.loads(data))


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:  # type: ignore[no-untyped-def]
    if not WORST:
        return
    tr = terminalreporter
    tr.section("ninfer conformance: worst error per format (normalized: 1.0 = tolerance)")
    for key in sorted(WORST):
        w = WORST[key]
        tr.write_line(
            f"{key:6s} checks={w['checks']:5d} worst_normalized={w['normalized']:.4f} "
            f"worst_rel_l2={w['rel_l2']:.3e} at {w['where']}"
        )
    out = os.environ.get("NINFER_CONFORMANCE_JSON")
    if out:
        Path(out).write_text(json.dumps(WORST, indent=1, sort_keys=True))
