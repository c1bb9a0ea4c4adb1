"""The gate's false-positive rate and power on simulated H200 noise (no GPU).

The noise model (ninfer/regress/simulate.py) is fitted to the measured decomposition:
between-round noise many times the within-round noise once rounds are fresh processes,
5 % of rounds slow by 3-25 %, run offsets between machines; per-point sds drawn with the
measured spread. The gate is simulated at its defaults: a 10-round baseline on one
machine, a 5-round run on another, and the 8-rounds-a-side A/B on the same runner for
every point the separate-run comparison did not find "same".
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from scipy.stats import binom

from ninfer import record
from ninfer.regress import simulate as sim

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = record.load_results(ROOT / "baselines/h200/all.json").doc
MEDIANS = np.array([p["median_us"] for p in TEMPLATE["points"]])
MODEL = sim.HierarchicalNoise()


def test_the_model_is_hierarchical() -> None:
    """Between rounds is much larger than within a round, as measured (docs/regress.md)."""
    rng = np.random.default_rng(0)
    suite = sim.Suite.draw(rng, MEDIANS, MODEL)
    rounds = sim.run(rng, suite, MODEL, 10, 20)
    within = np.median([np.std(np.log(r)) / np.sqrt(20) for rs in rounds for r in rs])
    between = np.median([np.std(np.log([np.median(r) for r in rs])) for rs in rounds])
    assert between > 3 * within


@pytest.mark.slow
def test_aa_false_positive_rate_per_suite() -> None:
    """The target is at most 1 % of unchanged suites red. 200 suites cannot show a rate
    that low, only refute it: the test fails where the count is one a 1 % rate gives less
    than 1 % of the time (more than 6 of 200; 5 % would give that 88 % of the time). A
    bound of 1 % on the observed count itself (2 of 200) fails a true 0.83 % one seed in
    four."""
    rng = np.random.default_rng(2026)
    trials, target = 200, 0.01
    red = sum("slower" in sim.gate(rng, TEMPLATE, sim.Suite.draw(rng, MEDIANS, MODEL), MODEL)
              for _ in range(trials))  # fmt: skip
    most = int(binom.ppf(0.99, trials, target))
    assert red <= most, f"{red} of {trials} unchanged suites went red (a 1 % rate: <= {most})"


@pytest.mark.slow
def test_power_for_a_ten_percent_step() -> None:
    """95 % of 10 % steps caught, and of the points flagged slower at most the 1 % false
    share that Benjamini-Hochberg at alpha 0.01 controls (the false discovery rate: the
    count of false flags among all flags above what a 1 % share gives less than 1 % of
    the time fails). Unchanged suites are the A/A test's; here every suite is red by its
    10 real steps, and BH admits false flags in proportion to the true ones. The bound
    this replaces counted runs with any false flag against the A/A target; over 660 runs
    (seeds 1-11) that rate was 1.4 % with 2554fad's baseline as the template and 1.7 %
    with aaf8654's, one false point in each such run, so its seeded 60 passed or failed on the
    draw (aaf8654's: 1 of 60; 2554fad's: 4, over its bound of 3)."""
    rng = np.random.default_rng(7)
    caught = total = false = 0
    trials = 60
    for _ in range(trials):
        step = np.ones(len(MEDIANS))
        sel = rng.choice(len(MEDIANS), 10, replace=False)
        step[sel] = 1.10
        states = sim.gate(rng, TEMPLATE, sim.Suite.draw(rng, MEDIANS, MODEL), MODEL, step)
        caught += sum(states[i] == "slower" for i in sel)
        total += len(sel)
        false += sum(s == "slower" for i, s in enumerate(states) if i not in set(sel))
    assert caught / total >= 0.95, f"caught {caught} of {total}"
    most = int(binom.ppf(0.99, caught + false, 0.01))
    assert false <= most, f"{false} false of {caught + false} slower flags (a 1 % share: <= {most})"
