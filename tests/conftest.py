"""Shared pytest setup.

- GPU tests skip with a visible reason where no GPU is usable.
- Under pytest-xdist each worker owns one GPU: ``CUDA_VISIBLE_DEVICES`` is narrowed to
  one device per worker *before* anything initialises CUDA (this module is imported
  before any test module), so conformance spreads over a host's GPUs while every
  kernel still runs on exactly one device per process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

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


# xdist controller: the workers' worst errors (merged) and which GPU each worker had.
_MERGED: dict[str, dict[str, Any]] = {}
_WORKER_GPUS: dict[str, str] = {}


def _merge(into: dict[str, dict[str, Any]], worst: dict[str, dict[str, Any]]) -> None:
    for key, w in worst.items():
        mine = into.get(key)
        if mine is None:
            into[key] = dict(w)
            continue
        checks = int(mine["checks"]) + int(w["checks"])
        if float(w["normalized"]) > float(mine["normalized"]):
            mine.update(w)
        mine["checks"] = checks


@pytest.hookimpl(optionalhook=True)  # an xdist hook: unknown where xdist is absent
def pytest_testnodedown(node: Any, error: Any) -> None:
    out = getattr(node, "workeroutput", {})
    if out.get("ninfer_worst"):
        _merge(_MERGED, json.loads(out["ninfer_worst"]))
    if "ninfer_gpu" in out:
        _WORKER_GPUS[getattr(getattr(node, "gateway", None), "id", "?")] = out["ninfer_gpu"]


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    # Without xdist the oracle module of this process holds the worst errors; in an
    # xdist controller (which imports no test module) the merged worker results do.
    oracle = next((m for name, m in list(sys.modules.items()) if name.endswith("gpu.oracle")), None)
    worst: dict[str, dict[str, Any]] = dict(getattr(oracle, "WORST", None) or _MERGED)
    if not worst:
        return
    tr = terminalreporter
    tr.section("ninfer conformance: worst error per format (normalized: 1.0 = tolerance)")
    for key in sorted(worst):
        w = worst[key]
        tr.write_line(
            f"{key:6s} checks={w['checks']:5d} worst_normalized={w['normalized']:.4f} "
            f"worst_rel_l2={w['rel_l2']:.3e} at {w['where']}"
        )
    if _WORKER_GPUS:
        tr.write_line(
            "xdist workers -> GPU: "
            + ", ".join(f"{k}={v}" for k, v in sorted(_WORKER_GPUS.items()))
        )
    out = os.environ.get("NINFER_CONFORMANCE_JSON")
    if out:
        Path(out).write_text(json.dumps(worst, indent=1, sort_keys=True))


def pytest_report_header(config: pytest.Config) -> str | None:
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if worker:
        return (
            f"xdist worker {worker}: CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES')}"
        )
    return None
