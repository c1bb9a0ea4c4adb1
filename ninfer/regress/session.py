"""What the measuring commands share: the GPU, the idle check, the round plan, a run."""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from ..record import Results, ResultsError, load_results
from .runner import RoundPlan


def gpu_or_exit(a: argparse.Namespace) -> Any:
    from ..runtime.cupy_env import NoGPUError
    from .runner import detect_gpu

    try:
        gpu = detect_gpu(a.device)
    except NoGPUError as e:
        raise SystemExit(
            f"ninfer-regress: no GPU to measure on: {e}\n"
            "The benchmark needs an NVIDIA GPU with CuPy; without one, run nox -s tests."
        ) from e
    print(f"GPU: {gpu.name} -> baselines/{gpu.key}/")
    return gpu


def busy_check(a: argparse.Namespace) -> Any:
    """The idle check, before every round: another process on the GPU stops the run."""
    from ..bench.telemetry import busy_reason

    def check(log: Any) -> None:
        # Each check waits up to --idle-wait on its own: one deadline for the whole run
        # would turn the first busy reading after two minutes of rounds into a refusal.
        deadline = time.monotonic() + a.idle_wait
        while True:
            why = busy_reason(a.device)
            if why is None:
                return
            if time.monotonic() > deadline:
                raise SystemExit(
                    f"ninfer-regress: the GPU is busy ({why}); refusing to measure: timings "
                    "taken now would be wrong"
                )
            log.write(f"waiting: {why}\n")
            # Mostly the previous round's own tail in NVML's trailing utilization window
            # (measured: 2 of 63 checks in three gate runs on the H200), gone within a second.
            time.sleep(1.0)

    return check


def plan(
    a: argparse.Namespace,
    only: list[Any] | None = None,
    extra: tuple[str, ...] = (),
    suite: str | None = None,
) -> RoundPlan:
    """The rounds' plan; ``suite``: a suite file's path in place of ``--suite``'s name."""
    if a.seed is None:
        a.seed = int(time.time()) % 1_000_000
    return RoundPlan(suite or a.suite, a.repeat, a.warmup, a.device, a.seed, only, extra)


def measure_or_exit(
    a: argparse.Namespace, rounds: int, gpu: Any = None
) -> tuple[Path, Results, Any]:
    from .runner import measure, new_run_dir

    gpu = gpu if gpu is not None else gpu_or_exit(a)
    run_dir = new_run_dir(a.runs, a.suite)
    print(f"run folder: {run_dir}")
    codes, res_path = measure(run_dir, plan(a), rounds, busy_check(a))
    if not res_path.exists():
        raise SystemExit(
            f"ninfer-regress: the benchmark wrote no results (exit {codes}); {run_dir}/run.log"
        )
    new = load_results(res_path)
    if new.doc["failures"]:
        print(f"{len(new.doc['failures'])} point(s) failed to run: see {run_dir}/run.log")
    return run_dir, new, gpu


def repo() -> Path:
    from ..bench.env import checkout_root

    root = checkout_root()
    if root is None:
        raise ResultsError("not in a git checkout of ninfer: an A/B needs one (git worktree)")
    return root
