"""Synthetic run records with hierarchical noise, for testing the verdicts without a GPU.

The levels are those ``ninfer-regress noise`` measures (docs/regress.md, "Where the noise
lives"): samples inside a round, rounds (fresh processes) of one run, and the run itself
(the machine and its state), each a multiplicative log-normal term, plus the two shapes
the H200 showed beyond them: a slow round now and then (W8 [5120,17408] T=16: 94.8 µs
once against 82.8–85.7) and points whose process lands in one of two states (Q5
[6144,5120]: 24.5 against 26.4–29.4 µs). Per-point sds are drawn from log-normals whose
medians and tails are fitted to the measured decomposition.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .. import record


@dataclass(frozen=True)
class HierarchicalNoise:
    # Fitted to the H200 (docs/regress.md, "Where the noise lives"; 2560 point-rounds of
    # six 10- and 5-round runs): within-round sd 0.76 % (median over point-rounds),
    # robust between-round sd 0.50 % (median over points, log-sd 0.94 across points),
    # 5.3 % of rounds > 3 % slow (median 6.4 %, max 24 %), two 10-round baselines of
    # two machines 0.47 % sd apart. Slow rounds here are heavier (median ~13 %) and the
    # run offsets larger than measured: the test must hold with margin.
    sample_sd: float = 0.0076
    round_sd: float = 0.005
    run_sd: float = 0.004
    spread: float = 0.94  # log-sd of the per-point sds around those medians (the tail)
    slow_round_p: float = 0.053  # a round that reads slow ...
    slow_round_max: float = 1.25  # ... by a factor log-uniform in (1.03, max)
    bimodal_frac: float = 0.01  # points with two process states ...
    bimodal_step: float = 0.06  # ... this far apart, each process in one at random
    quantum_us: float = 0.032  # CUDA-event resolution seen on the H200


@dataclass
class PointNoise:
    sample_sd: float
    round_sd: float
    run_sd: float
    bimodal: bool


@dataclass
class Suite:
    """Per-point noise of a suite (drawn once: a point is as noisy in every run)."""

    medians_us: np.ndarray
    points: list[PointNoise] = field(default_factory=list)

    @classmethod
    def draw(cls, rng: np.random.Generator, medians_us: np.ndarray, m: HierarchicalNoise) -> Suite:
        def sd(median: float) -> float:
            return float(median * np.exp(rng.normal(0.0, m.spread)))

        pts = [
            PointNoise(sd(m.sample_sd), sd(m.round_sd), sd(m.run_sd), bool(rng.random() < m.bimodal_frac))
            for _ in medians_us
        ]  # fmt: skip
        return cls(np.asarray(medians_us, float), pts)


def run(
    rng: np.random.Generator,
    suite: Suite,
    m: HierarchicalNoise,
    rounds: int,
    repeat: int,
    step: np.ndarray | None = None,
    offsets: np.ndarray | None = None,
) -> list[list[np.ndarray]]:
    """One run: per point, ``rounds`` rounds of ``repeat`` samples (µs).

    ``step``: the true time ratio per point (a planted change); ``offsets``: the run's
    log offset per point (shared by the two sides of a same-runner A/B; drawn if None).
    """
    n = len(suite.points)
    step = np.ones(n) if step is None else step
    if offsets is None:
        offsets = run_offsets(rng, suite)
    out = []
    for i, pn in enumerate(suite.points):
        rs = []
        for _ in range(rounds):
            level = offsets[i] + rng.normal(0.0, pn.round_sd)
            if pn.bimodal and rng.random() < 0.5:
                level += np.log1p(m.bimodal_step)
            if rng.random() < m.slow_round_p:
                level += rng.uniform(np.log(1.03), np.log(m.slow_round_max))
            s = (
                suite.medians_us[i]
                * step[i]
                * np.exp(level + rng.normal(0.0, pn.sample_sd, repeat))
            )
            rs.append(np.maximum(np.round(s / m.quantum_us), 1) * m.quantum_us)
        out.append(rs)
    return out


def run_offsets(rng: np.random.Generator, suite: Suite) -> np.ndarray:
    return np.asarray([rng.normal(0.0, p.run_sd) for p in suite.points])


def as_record(
    template: dict[str, Any], rounds: list[list[np.ndarray]], noise: bool = False
) -> dict[str, Any]:
    """A v2 record shaped like ``template`` (a loaded record) holding these rounds."""
    doc = copy.deepcopy(template)
    r = max(len(x) for x in rounds)
    doc["rounds"] = [{"index": i, "process": i, "alloc": 0, "machine": "sim"} for i in range(r)]
    doc["timing"] = {**doc["timing"], "rounds": r}
    for p, rs in zip(doc["points"], rounds, strict=True):
        p["rounds"] = [{"round": i, "samples_us": [float(x) for x in s]} for i, s in enumerate(rs)]
        record.summarize(p)
        if noise:
            v = np.log([np.median(s) for s in rs])
            p["noise"] = {"round_sd": float(np.std(v, ddof=1)), "rounds": len(rs)}
        else:
            p.pop("noise", None)
    return doc


def gate(
    rng: np.random.Generator,
    template: dict[str, Any],
    suite: Suite,
    m: HierarchicalNoise,
    step: np.ndarray | None = None,
    base_rounds: int = 10,
    rounds: int = 5,
    ab_rounds: int = 8,
    repeat: int = 20,
) -> list[str]:
    """One simulated gate at the defaults: a baseline of ``base_rounds`` on one machine,
    a run of ``rounds`` on another with ``step`` applied, then the same-runner A/B of
    every point the separate-run comparison did not find "same". The final states."""
    from .compare import compare, with_confirmation

    base = record.Results(
        Path("base.json"), as_record(template, run(rng, suite, m, base_rounds, repeat), True)
    )
    new = record.Results(
        Path("new.json"), as_record(template, run(rng, suite, m, rounds, repeat, step))
    )
    c = compare(base, new)
    todo = c.to_confirm()
    if todo:
        idx = [i for i, p in enumerate(template["points"]) if record.point_key(p) in set(todo)]
        sub = Suite(suite.medians_us[idx], [suite.points[i] for i in idx])
        offsets = run_offsets(rng, sub)  # one machine: both sides share its offsets
        st = None if step is None else step[idx]
        t = record.subset(template, set(todo))
        a = record.Results(
            Path("A.json"), as_record(t, run(rng, sub, m, ab_rounds, repeat, None, offsets))
        )
        b = record.Results(
            Path("B.json"), as_record(t, run(rng, sub, m, ab_rounds, repeat, st, offsets))
        )
        c = with_confirmation(c, compare(a, b, same_runner=True))
    return [r.state for r in c.rows]
