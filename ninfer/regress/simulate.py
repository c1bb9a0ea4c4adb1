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
from typing import Any

import numpy as np

from .. import record


@dataclass(frozen=True)
class HierarchicalNoise:
    sample_sd: float = 0.003  # within a round (median over points)
    round_sd: float = 0.006  # between rounds of one run (median over points)
    run_sd: float = 0.006  # between runs: machine, boot, clocks (median over points)
    spread: float = 0.8  # log-sd of the per-point sds around those medians (the tail)
    slow_round_p: float = 0.02  # a round that reads slow ...
    slow_round_max: float = 1.15  # ... by U(1.02, max)
    bimodal_frac: float = 0.1  # points with two process states ...
    bimodal_step: float = 0.08  # ... this far apart, each process in one at random
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
                level += np.log(rng.uniform(1.02, m.slow_round_max))
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
