"""The environment a run records (DESIGN §9): GPU, versions, commit, kernel fingerprint."""

from __future__ import annotations

import functools
import importlib.metadata
import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

CODE_PATHS = ("ninfer", "kernels", "suites", "pyproject.toml")


def _run_git(cwd: Path, *args: str) -> str | None:
    try:
        return subprocess.run(
            ["git", "-C", str(cwd), *args], capture_output=True, text=True, check=True, timeout=10
        ).stdout.strip()
    except Exception:
        return None


@functools.cache
def checkout_root() -> Path | None:
    """The ninfer checkout being measured: the working directory's (nox runs from the
    repository root and installs a wheel into .nox/), else the package's own (editable)."""
    for start in (Path.cwd(), Path(__file__).resolve().parents[2]):
        top = _run_git(start, "rev-parse", "--show-toplevel")
        if top and (Path(top) / "kernels").is_dir() and (Path(top) / "ninfer").is_dir():
            return Path(top)
    return None


def git(*args: str) -> str | None:
    """``git args`` in the measured checkout; None without one (a copied tree)."""
    root = checkout_root()
    return _run_git(root, *args) if root else None


def nvrtc_version() -> str | None:
    """The NVRTC that compiles the kernels ("13.0"): the same source gives other code
    under another one (docs/bench.md, "PTX and SASS"), which the kernel fingerprint does
    not see. None where CuPy cannot load it."""
    try:
        from cupy.cuda import nvrtc

        major, minor = nvrtc.getVersion()
        return f"{major}.{minor}"
    except Exception:
        return None


def environment(device_id: int) -> dict[str, Any]:
    import cupy as cp

    from ..gpus import gpu_key
    from ..routes import fingerprint
    from ..runtime.cupy_env import device_name
    from .telemetry import clocks_locked_declared, machine_id

    props = cp.cuda.runtime.getDeviceProperties(device_id)
    name = device_name(props)
    # The installed version, read without importing torch: its import costs seconds in
    # every round's fresh process, and the bench never runs torch unless --peer asks.
    try:
        torch_v: str | None = importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        torch_v = None
    # Dirty means the measured code differs from the commit; new baselines, run folders
    # and docs written by the pipeline itself do not make a run dirty.
    status = git("status", "--porcelain", "--untracked-files=no", "--", *CODE_PATHS)
    commit = git("rev-parse", "HEAD")
    if commit is None:  # a copied tree without .git (a lab box): the caller may say which
        commit = os.environ.get("NINFER_GIT_COMMIT") or None
        flag = os.environ.get("NINFER_GIT_DIRTY")
        status = None if flag is None else ("dirty" if flag == "1" else "")
    return {
        "gpu_name": name,
        "gpu_key": gpu_key(name),
        "cc": f"{props['major']}.{props['minor']}",
        "sms": int(props["multiProcessorCount"]),
        "l2_bytes": int(props["l2CacheSize"]),
        "driver": int(cp.cuda.runtime.driverGetVersion()),
        "cuda_runtime": int(cp.cuda.runtime.runtimeGetVersion()),
        "cupy": cp.__version__,
        "nvrtc": nvrtc_version(),
        "torch": torch_v,
        "python": sys.version.split()[0],
        "host": platform.node(),
        "commit": commit,
        "dirty": bool(status) if status is not None else None,
        "kernel_fingerprint": fingerprint(),
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "machine": machine_id(),
        "clocks_locked": clocks_locked_declared(),
    }
