"""GPU conformance: every test here is marked ``gpu``; worst errors go to the summary.

The summary itself is printed by tests/conftest.py, which is also loaded in an xdist
controller (this file is not: the controller collects nothing).
"""

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


def pytest_sessionfinish(session: pytest.Session) -> None:
    config = session.config
    out = getattr(config, "workeroutput", None)
    if out is not None:  # an xdist worker hands its worst errors to the controller
        out["ninfer_worst"] = json.dumps(WORST)
        out["ninfer_gpu"] = os.environ.get("CUDA_VISIBLE_DEVICES", "")
