"""Sessions: tests (everything), conformance (the GPU suite), lint (ruff + mypy).

The package is installed as a wheel (not editable) so the tests also prove that
kernels/ ships inside it. On a machine with an NVIDIA driver the CuPy extra is added
(NINFER_CUDA_EXTRA=cuda12 picks the CUDA 12 build; the default is cuda13).
"""

from __future__ import annotations

import os
import shutil

import nox

nox.options.sessions = ["lint", "tests"]
nox.options.reuse_existing_virtualenvs = True


def _has_gpu_driver() -> bool:
    return shutil.which("nvidia-smi") is not None


def _install(session: nox.Session, *extras: str) -> None:
    wanted = ["test", *extras]
    if _has_gpu_driver():
        wanted.append(os.environ.get("NINFER_CUDA_EXTRA", "cuda13"))
    session.install(f".[{','.join(wanted)}]")


@nox.session
def tests(session: nox.Session) -> None:
    """The whole suite; GPU tests skip with the reason printed where no GPU is usable."""
    _install(session)
    session.run("pytest", *session.posargs, env={"NINFER_EXPECT_INSTALLED": "1"})


@nox.session
def conformance(session: nox.Session) -> None:
    """The GPU conformance suite only; fails (does not skip) without a GPU."""
    if not _has_gpu_driver():
        session.error("conformance needs an NVIDIA GPU (nvidia-smi not found)")
    _install(session, "torch")
    session.run(
        "python",
        "-c",
        "from ninfer.runtime.cupy_env import require_cupy; require_cupy()",
    )
    session.run("pytest", "-m", "gpu", *session.posargs)


@nox.session
def lint(session: nox.Session) -> None:
    """ruff (lint + format check) and mypy over the package."""
    session.install(
        "ruff>=0.6", "mypy>=1.10", "types-PyYAML", "numpy>=1.24", "ml_dtypes>=0.5", "pytest"
    )
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")
    session.run("mypy")
