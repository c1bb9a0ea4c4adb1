"""Measure a suite into a run folder (``runs/<suite>_<timestamp>/``).

The measurement runs ``python -m ninfer.bench`` in a child process, so the folder's
run.log holds exactly what the benchmark printed and this process never holds a CUDA
context while the timing runs.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import yaml

from ..bench.points import load_suite


@dataclass(frozen=True)
class Gpu:
    name: str
    key: str


def detect_gpu(device: int = 0) -> Gpu:
    """The GPU's model and folder key, without creating a context. Raises NoGPUError."""
    from ..gpus import gpu_key
    from ..runtime.cupy_env import NoGPUError, device_name, require_cupy

    cp = require_cupy()
    if device >= cp.cuda.runtime.getDeviceCount():
        raise NoGPUError(
            f"--device {device}: only {cp.cuda.runtime.getDeviceCount()} CUDA device(s) visible"
        )
    name = device_name(cp.cuda.runtime.getDeviceProperties(device))
    return Gpu(name, gpu_key(name))


def new_run_dir(root: Path, suite: str) -> Path:
    d = root / f"{suite}_{time.strftime('%Y%m%d-%H%M%S')}"
    n = 1
    while d.exists():  # two runs in the same second keep separate folders
        n += 1
        d = root / f"{suite}_{time.strftime('%Y%m%d-%H%M%S')}_{n}"
    d.mkdir(parents=True)
    return d


def write_points(run_dir: Path, suite: str) -> None:
    pts = [
        {
            "label": p.label,
            "labels": list(p.labels),
            "qtype": p.qtype.value,
            "policy": p.policy.value,
            "n": p.n,
            "k": p.k,
            "t": p.t,
        }
        for p in load_suite(suite)
    ]
    (run_dir / "points.yaml").write_text(
        yaml.safe_dump({"suite": suite, "count": len(pts), "points": pts}, sort_keys=False)
    )


def measure(
    run_dir: Path, suite: str, repeat: int, warmup: int, device: int, extra: list[str]
) -> tuple[int, Path]:
    """Run the suite; stream its output to the console and run.log. (exit status, results)."""
    results = run_dir / "results.json"
    write_points(run_dir, suite)
    cmd = [
        sys.executable, "-m", "ninfer.bench", "--suite", suite, "--repeat", str(repeat),
        "--warmup", str(warmup), "--device", str(device), "--json-out", str(results),
        "--no-progress", *extra,
    ]  # fmt: skip
    with (run_dir / "run.log").open("w") as log:
        log.write("$ " + " ".join(cmd) + "\n")
        log.flush()
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        assert proc.stdout is not None  # guaranteed by stdout=PIPE
        for line in proc.stdout:
            sys.stdout.write(line)
            log.write(line)
        rc = proc.wait()
        log.write(f"exit status {rc}\n")
    if results.exists():
        env = json.loads(results.read_text())["environment"]
        (run_dir / "env.json").write_text(json.dumps(env, indent=1) + "\n")
    return rc, results
