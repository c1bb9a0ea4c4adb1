"""A model of GPU timing noise, for calibrating the verdicts without a GPU.

Fitted to the H200 samples in docs/perf/bench_all_cublas_h200_2026-11-30.json (68 points,
20 cold graph replays each): per-sample log-sd 0.7 % median, 2.1 % p90, 2.5 % max; a
level shift inside a run (e.g. 561 → 564 µs halfway through, a clock or DRAM-refresh
phase change); rare slow outliers; CUDA-event quantization of 32 ns. Each run also gets
its own offset (a different boost clock or thermal state from run to run), which is what
makes A/A comparisons of real GPUs fail a pure significance test.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class NoiseModel:
    sample_sd: float = 0.01  # per-sample multiplicative sd
    run_sd: float = 0.01  # per-run offset sd (run-to-run clock/thermal state)
    shift_sd: float = 0.005  # one level shift at a random sample inside a run
    outlier_p: float = 0.02  # probability of a slow outlier sample
    outlier_max: float = 1.30  # outliers are U(1.02, outlier_max) times slower
    quantum_us: float = 0.032  # CUDA-event resolution seen on the H200

    def run(self, rng: np.random.Generator, median_us: float, n: int) -> np.ndarray:
        """One run's ``n`` samples of a kernel whose true time is ``median_us``."""
        level = np.exp(rng.normal(0.0, self.run_sd))
        s = median_us * level * np.exp(rng.normal(0.0, self.sample_sd, n))
        at = int(rng.integers(0, n))
        s[at:] *= np.exp(rng.normal(0.0, self.shift_sd))
        out = rng.random(n) < self.outlier_p
        s[out] *= rng.uniform(1.02, self.outlier_max, int(out.sum()))
        return np.maximum(np.round(s / self.quantum_us), 1) * self.quantum_us
