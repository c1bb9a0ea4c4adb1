"""Shared pytest setup: GPU tests skip with a visible reason where no GPU is usable."""

from __future__ import annotations

import pytest

from ninfer.runtime.cupy_env import gpu_available


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    ok, reason = gpu_available()
    if ok:
        return
    skip = pytest.mark.skip(reason=f"gpu: {reason}")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
