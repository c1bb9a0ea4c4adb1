"""Shared pytest setup.

- GPU tests skip with a visible reason where no GPU is usable.
- Under pytest-xdist each worker owns one GPU: ``CUDA_VISIBLE_DEVICES`` is narrowed to
  one device per worker *before* anything initialises CUDA (this module is imported
  before any test module), so conformance spreads over a host's GPUs while every
  kernel still runs on exactly one device per process.
"""

from __future__ import annotations

import os
import subprocess

import pytest


def _visible_gpus() -> list[str]:
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    if env is not None:
        return [d.strip() for d in env.split(",") if d.strip()]
    try:  # nvidia-smi does not create a CUDA context
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return []
    return [str(i) for i, line in enumerate(out.stdout.splitlines()) if line.startswith("GPU ")]


def _pin_xdist_worker_to_one_gpu() -> None:
    worker = os.environ.get("PYTEST_XDIST_WORKER")  # "gw0", "gw1", ...
    if not worker:
        return
    gpus = _visible_gpus()
    if gpus:
        os.environ["CUDA_VISIBLE_DEVICES"] = gpus[int(worker[2:]) % len(gpus)]


_pin_xdist_worker_to_one_gpu()

from ninfer.runtime.cupy_env import gpu_available  # noqa: E402  (after the pinning above)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    ok, reason = gpu_available()
    if ok:
        return
    skip = pytest.mark.skip(reason=f"gpu: {reason}")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


def pytest_report_header(config: pytest.Config) -> str | None:
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if worker:
        return (
            f"xdist worker {worker}: CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES')}"
        )
    return None
