"""Measure a suite as R rounds in fresh processes (``runs/<suite>_<timestamp>/``).

Each round is one ``python -m ninfer.bench`` child process: its own CUDA context, its
own allocation of every buffer (the arena, bench/memory.py) and its own shuffled point
order, from ``seed + round``. The round writes ``rounds/<side><i>.json`` after every point
(atomically); after every round the run's ``results.json`` is re-merged from all round
files (atomically), so a crash keeps every finished point of every round. The folder's
run.log holds what the children printed. This process never holds a CUDA context.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import yaml

from .. import record
from ..bench.points import SUITE_NAMES, load_suite
from ..progress import Steps

DEFAULT_ROUNDS = 5  # the gate's rounds (docs/regress.md: power and time, measured)
BASELINE_ROUNDS = 10  # a refresh's: each point's between-round noise is stored from them


@dataclass(frozen=True)
class Gpu:
    name: str
    key: str


def detect_gpu(device: int = 0) -> Gpu:
    """The GPU's model and folder key. Raises NoGPUError."""
    from ..gpus import gpu_key
    from ..runtime.cupy_env import device_name, require_device

    cp = require_device(device)
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
        {"label": p.label, "labels": list(p.labels), "qtype": p.qtype.value,
         "policy": p.policy.value, "n": p.n, "k": p.k, "t": p.t}
        for p in load_suite(suite)
    ]  # fmt: skip
    record.write_text_atomic(
        run_dir / "points.yaml",
        yaml.safe_dump({"suite": suite, "count": len(pts), "points": pts}, sort_keys=False),
    )


@dataclass
class Side:
    """One program under test: a checkout (None: this one) and its round files."""

    name: str  # "" for a plain run, "A" / "B" in an A/B
    tree: Path | None = None

    def env(self) -> dict[str, str]:
        e = dict(os.environ)
        if self.tree is not None:  # the worktree's package, kernels and suites, not ours
            e["PYTHONPATH"] = str(self.tree) + os.pathsep + e.get("PYTHONPATH", "")
        return e


@dataclass
class RoundPlan:
    suite: str
    repeat: int
    warmup: int
    device: int
    seed: int
    only: Sequence[record.PointKey] | None = None
    extra: Sequence[str] = ()


def _command(
    plan: RoundPlan, out: Path, index: int, side: Side, only_file: Path | None
) -> list[str]:
    # A suite name, or a suite file (the tune command's grid, an A/B's --suite-file).
    suite = ["--suite" if plan.suite in SUITE_NAMES else "--suite-file", plan.suite]
    cmd = [
        sys.executable, "-m", "ninfer.bench", *suite, "--repeat", str(plan.repeat),
        "--warmup", str(plan.warmup), "--device", str(plan.device), "--json-out", str(out),
        "--no-progress", "--order-seed", str(plan.seed + index), "--process", str(index),
        *plan.extra,
    ]  # fmt: skip
    if side.name:
        cmd += ["--side", side.name]
    if only_file is not None:
        cmd += ["--only-file", str(only_file)]
    return cmd


_CONSOLE = ("points=", "throttled", "telemetry:", "failures", "  ", "Traceback", "ninfer")


def run_round(run_dir: Path, plan: RoundPlan, index: int, side: Side, log: Any) -> tuple[int, Path]:
    """One round in a fresh process; its output goes to the console and ``log``."""
    run_dir = run_dir.resolve()  # the A side runs in its worktree: no relative paths
    rounds = run_dir / "rounds"
    rounds.mkdir(exist_ok=True)
    out = rounds / f"{side.name or 'r'}{index:02d}.json"
    only_file = None
    if plan.only is not None:
        only_file = run_dir / "only.txt"
        record.write_text_atomic(only_file, "".join(f"{k}\n" for k in plan.only))
    cmd = _command(plan, out, index, side, only_file)
    cwd = str(side.tree) if side.tree is not None else None
    log.write(f"$ {' '.join(cmd)}" + (f"   (in {cwd})" if cwd else "") + "\n")
    log.flush()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=side.env(), cwd=cwd)  # fmt: skip
    assert proc.stdout is not None  # guaranteed by stdout=PIPE
    for line in proc.stdout:
        # The console gets each round's summary and trouble; run.log gets every row.
        if line.startswith(_CONSOLE) or "Error" in line:
            sys.stdout.write(line)
        log.write(line)
    rc = proc.wait()
    log.write(f"exit status {rc}\n")
    log.flush()
    return rc, out


def merge_rounds(paths: Sequence[Path], target: Path, command: list[str]) -> record.Results | None:
    """Merge the readable round files into ``target`` (atomic); None if none is readable."""
    docs = []
    for p in paths:
        if not p.exists():
            continue
        try:
            docs.append(json.loads(p.read_text()))
        except (OSError, json.JSONDecodeError):
            continue  # a round killed before its first point wrote nothing usable
    docs = [d for d in docs if d.get("points")]
    if not docs:
        return None
    doc = record.merge(docs, command)
    record.write_json(target, doc)
    return record.Results(target, doc)


def with_dispatch(run_dir: Path, name: str, plan: RoundPlan, override: Any) -> RoundPlan:
    """``plan`` timing a dispatch override (ninfer-bench --dispatch; written into the run
    folder); an empty override is the shipped dispatch, ``plan`` itself."""
    if not override:
        return plan
    f = run_dir / f"dispatch_{name}.json"
    record.write_text_atomic(f, json.dumps(override) + "\n")
    return replace(plan, extra=(*plan.extra, "--dispatch", str(f)))


def interleaved(
    run_dir: Path, plans: Mapping[str, RoundPlan], rounds: int, check: Any, command: list[str]
) -> dict[str, record.Results | None]:
    """R rounds of several variants, each round of each a fresh process, their order rotated
    every round, the idle check before each; a variant's rounds are merged into
    ``run_dir/<name>.json`` after each of them. A round that exits 2 (usage or environment)
    stops the run with ValueError: every later round would fail the same way."""
    names = list(plans)
    paths: dict[str, list[Path]] = {n: [] for n in names}
    merged: dict[str, record.Results | None] = {}
    with (run_dir / "run.log").open("a") as log:
        for i in range(rounds):
            k = i % len(names)
            for name in names[k:] + names[:k]:
                check(log)
                t0 = time.monotonic()
                rc, out = run_round(run_dir, plans[name], i, Side(name), log)
                print(f"round {i + 1}/{rounds} {name}: exit {rc}, {time.monotonic() - t0:.0f} s")
                if rc not in (0, 1):
                    raise ValueError(f"{name}'s round {i + 1} exited {rc}; see {run_dir}/run.log")
                paths[name].append(out)
                merged[name] = merge_rounds(paths[name], run_dir / f"{name}.json", [*command, name])
    return merged


def measure(
    run_dir: Path, plan: RoundPlan, rounds: int, busy_check: Any = None
) -> tuple[list[int], Path]:
    """R rounds of one program into ``run_dir/results.json``. (exit codes, results path)."""
    results = run_dir / "results.json"
    write_points(run_dir, plan.suite)
    codes: list[int] = []
    paths: list[Path] = []
    cmd = ["ninfer-regress", "rounds", plan.suite, str(rounds)]
    with (run_dir / "run.log").open("a") as log, Steps(rounds, "rounds") as steps:
        for i in range(rounds):
            if busy_check is not None:
                busy_check(log)
            rc, out = run_round(run_dir, plan, i, Side(""), log)
            codes.append(rc)
            paths.append(out)
            merge_rounds(paths, results, cmd)
            steps.done(f"round {i + 1}" + (f" exited {rc}" if rc else ""))
    if results.exists():
        env = json.loads(results.read_text())["environment"]
        record.write_text_atomic(run_dir / "env.json", json.dumps(env, indent=1) + "\n")
    return codes, results
