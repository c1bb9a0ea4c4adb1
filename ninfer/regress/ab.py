"""A/B on the same runner: another commit against this checkout, interleaved rounds.

Seed 003's rule: only an A/B on one card compares; two separate recording runs do not.
Side A is a temporary ``git worktree`` of the other commit (kernels compile at run time,
so no build step is needed: its ``python -m ninfer.bench`` runs with the worktree first
on ``PYTHONPATH``); side B is this checkout. Rounds alternate A B B A A B …, each a fresh
process, and round i of both sides uses the same shuffled point order, so what drifts
over the run (clocks, temperature) falls on both sides alike.
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..progress import Steps
from ..record import Results, ResultsError
from .runner import RoundPlan, Side, merge_rounds, run_round

AB_ROUNDS = 8  # a side; docs/regress.md: the A/B power (simulated and planted) and the time budget


class AbError(ResultsError):
    """The A/B cannot run (the commit is not in this clone, or predates round records)."""


def _git(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True,
                          check=False, timeout=120)  # fmt: skip


def resolve(repo: Path, ref: str) -> str:
    r = _git(repo, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")
    if r.returncode != 0 or not r.stdout.strip():
        raise AbError(
            f"commit {ref!r} is not in this clone ({repo}), so it cannot be measured beside "
            "HEAD; fetch it (actions/checkout with fetch-depth: 0, or git fetch origin "
            f"{ref}) and run again. Not a pass."
        )
    return r.stdout.strip()


@contextlib.contextmanager
def worktree(repo: Path, ref: str) -> Iterator[Path]:
    """A detached, temporary worktree of ``ref``; removed afterwards whatever happens."""
    sha = resolve(repo, ref)
    path = Path(tempfile.mkdtemp(prefix=f"ninfer-ab-{sha[:10]}-"))
    r = _git(repo, "worktree", "add", "--detach", "--force", str(path), sha)
    if r.returncode != 0:
        shutil.rmtree(path, ignore_errors=True)
        raise AbError(f"git worktree add {sha[:12]} failed: {r.stderr.strip()}")
    try:
        # The option that round records need; it has lived in bench/cli.py and, since the
        # parser was split out, in bench/args.py: any module of the commit's bench counts.
        bench = sorted((path / "ninfer" / "bench").glob("*.py"))
        if not any("--order-seed" in f.read_text() for f in bench):
            raise AbError(
                f"commit {sha[:12]} predates round records (schema v2): its benchmark cannot "
                "run the A/B's rounds. Refresh the baseline at a newer commit."
            )
        yield path
    finally:
        _git(repo, "worktree", "remove", "--force", str(path))
        shutil.rmtree(path, ignore_errors=True)
        _git(repo, "worktree", "prune")


def schedule(rounds: int) -> list[tuple[str, int]]:
    """A B B A A B …: (side, round index) in the order they run."""
    out: list[tuple[str, int]] = []
    for i in range(rounds):
        out += [("A", i), ("B", i)] if i % 2 == 0 else [("B", i), ("A", i)]
    return out


def run_ab(
    run_dir: Path,
    plan: RoundPlan,
    rounds: int,
    repo: Path,
    ref: str,
    busy_check: Any = None,
    b_tree: Path | None = None,
) -> tuple[Results, Results, str]:
    """Measure ``plan`` on ``ref`` (A) and this checkout (B; ``b_tree`` another tree,
    e.g. the planted regression's). (A, B, A's commit)."""
    ab_dir = run_dir / "ab"
    ab_dir.mkdir(parents=True, exist_ok=True)
    with (
        worktree(repo, ref) as tree,
        (ab_dir / "run.log").open("a") as log,
        Steps(2 * rounds, "A/B rounds") as steps,
    ):
        sides = {"A": Side("A", tree), "B": Side("B", b_tree)}
        paths: dict[str, list[Path]] = {"A": [], "B": []}
        merged: dict[str, Results | None] = {"A": None, "B": None}
        for name, i in schedule(rounds):
            if busy_check is not None:
                busy_check(log)
            rc, out = run_round(ab_dir, plan, i, sides[name], log)
            steps.done(f"{name}{i + 1}")
            if rc not in (0, 1):
                raise AbError(f"A/B side {name} round {i} exited {rc}; see {ab_dir}/run.log")
            paths[name].append(out)
            # Re-merged after every round: a run stopped part way keeps both sides' records.
            merged[name] = merge_rounds(paths[name], ab_dir / f"{name}.json", _cmd(name))
        sha = resolve(repo, ref)
    if merged["A"] is None or merged["B"] is None:
        side = "A" if merged["A"] is None else "B"
        raise AbError(f"A/B side {side} measured nothing; see {ab_dir}/run.log")
    return merged["A"], merged["B"], sha


def _cmd(side: str) -> list[str]:
    return ["ninfer-regress", "ab", side]
