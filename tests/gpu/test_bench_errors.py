"""The bench's refusals that need a real device to be honest (the CPU tests use a fake
CuPy): a weight the GPU cannot hold and a device past the visible ones end in one line
and exit 2 before anything is allocated, in a fresh process as a user runs it."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

pytestmark = pytest.mark.gpu


def _bench(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ninfer.bench", *argv, "--no-progress"],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        check=False,
    )


def _one_line_error(p: subprocess.CompletedProcess[str]) -> str:
    assert p.returncode == 2, (p.returncode, p.stdout[-2000:], p.stderr[-2000:])
    assert "Traceback" not in p.stderr, p.stderr
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, lines
    return lines[0]


def test_a_1tb_weight_is_refused_before_any_allocation() -> None:
    line = _one_line_error(
        _bench("--qtype", "bf16", "--n", "1000000", "--k", "1000000", "--t", "1")
    )
    assert re.fullmatch(
        r"ninfer-bench: error: needs 1,863\.0 GiB, the GPU has [\d,.]+ GiB free", line
    )


def test_a_device_past_the_visible_ones() -> None:
    import cupy as cp

    count = cp.cuda.runtime.getDeviceCount()
    argv = ("--qtype", "q4", "--n", "256", "--k", "512", "--t", "1", "--device", str(count))
    line = _one_line_error(_bench(*argv))
    assert line.endswith(
        f"--device {count}: expected < {count}, the number of visible CUDA devices"
    )
