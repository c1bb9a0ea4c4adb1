"""Four-state verdicts per point on round-level statistics (DESIGN §9, docs/regress.md).

The unit is the round (a fresh process and allocation), not the sample: on the H200 the
spread between processes is many times the spread of samples inside one, so samples
of one round are not independent evidence. Each round contributes one number, the log
of its median; a point's change is the difference of the lower quartiles of its round
values, new − base, and its scale the pooled MAD of the rounds (``_estimate`` says why).

- **Same runner** (an interleaved A/B, `ab.py`): the rounds of both sides share the
  machine, so the difference's variance is the between-round variance over both round
  counts, estimated from the rounds themselves (pooled, Student t).
- **Two separate runs** (a run against a committed baseline, or any two files): each
  run also carries its own offset (the machine, its clocks, what the driver placed
  where), which more rounds do not average away. Its sd is taken as the larger of the
  between-round sd, RUN_SD_FLOOR and the point's stored between-machine sd, and enters
  twice (one offset per run). The threshold is widened for such a point to the change two
  unchanged runs exceed once in a hundred (``WIDEN_Z``), and the report says by how much.

A change counts only when it is significant after Benjamini–Hochberg over the points
(q < alpha) **and** beyond the (point's) threshold; "same" needs the (1 − alpha)
interval inside ±threshold; anything else is "unknown". Without rounds enough to
estimate a variance (one round a side, no stored noise), only complete separation by
more than the threshold decides: a point whose every sample is 3× slower is slower on
five samples, and nothing else is decided.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats as sps

DEFAULT_THRESHOLD = 0.05
DEFAULT_ALPHA = 0.01
# Two unchanged runs of a point whose run offset has sd σ differ by more than
# 2.576·√2·σ in 1 % of comparisons: the threshold never sits inside that band.
WIDEN_Z = 2.576
# Below this a between-round sd is event quantization, not a measured noise.
SD_FLOOR = 0.001
PRIOR_DF = 30  # degrees of freedom given to a stored noise when no round pair is present
# The least run offset assumed between two separate runs of one point: two baselines
# of 10 rounds on two H200 machines differed by 0.47 % sd over the 68 points (medians
# of rounds), of which the rounds' own sampling explains about half.
RUN_SD_FLOOR = 0.005
STATES = ("slower", "faster", "same", "unknown")
LOCATION_Q = 0.25  # a point's value: this quantile of its round values (see _estimate)
Q_VAR = 0.25 * 0.75 / 0.3178**2  # p(1-p)/φ(z_p)² at p = 1/4, φ(0.6745) = 0.3178: 1.857


@dataclass(frozen=True)
class Noise:
    """What is known of a point's noise beyond the two records: a baseline's stored
    between-round sd and between-machine sd (log scale), each optional."""

    round_sd: float | None = None
    machine_sd: float | None = None


@dataclass(frozen=True)
class Verdict:
    state: str  # one of STATES
    ratio: float  # new/base: exp of the mean difference of log round medians
    ci: tuple[float, float]  # (1 - alpha) interval of the ratio
    p: float  # raw two-sided p (nan when decided by separation)
    q: float  # Benjamini–Hochberg adjusted p
    n_base: int  # rounds
    n_new: int
    threshold: float  # the threshold this point was judged on
    base_threshold: float  # the requested one; threshold - base_threshold is the widening
    round_sd: float  # the between-round sd used (nan when none)
    why: str

    @property
    def change_pct(self) -> float:
        return (self.ratio - 1.0) * 100.0

    @property
    def widened_pct(self) -> float:
        return (self.threshold - self.base_threshold) * 100.0


def benjamini_hochberg(p: Sequence[float]) -> np.ndarray:
    """BH step-up adjusted p-values (monotone, capped at 1): SciPy's, with the input
    checked first (SciPy raises on NaN with a message about the array, not the points)."""
    from scipy.stats import false_discovery_control

    pv = np.asarray(p, dtype=float)
    if not np.all(np.isfinite(pv)):
        raise ValueError("benjamini_hochberg: expected finite p-values, got NaN or Inf")
    if pv.size == 0:
        return pv
    return np.asarray(false_discovery_control(pv, method="bh"), dtype=float)


def round_values(rounds: Sequence[Sequence[float]]) -> np.ndarray:
    """log(median) of every round that has a finite positive sample."""
    out = []
    for r in rounds:
        a = np.asarray(r, float)
        a = a[np.isfinite(a) & (a > 0)]
        if a.size:
            out.append(math.log(float(np.median(a))))
    return np.asarray(out)


def _mad_sd(x: np.ndarray) -> float:
    return float(1.4826 * np.median(np.abs(x - np.median(x)))) if x.size > 1 else 0.0


def _round_floor(rounds: Sequence[Sequence[float]]) -> float:
    """The sd a round median cannot beat: its samples' spread over √n (× 1.25, the
    median's efficiency)."""
    sds = []
    for r in rounds:
        a = np.log(np.asarray([v for v in r if v > 0 and math.isfinite(v)], float))
        if a.size > 1:
            sds.append(1.2533 * _mad_sd(a) / math.sqrt(a.size))
    return float(np.median(sds)) if sds else 0.0


@dataclass(frozen=True)
class _Est:
    d: float
    se: float
    df: float
    s: float
    thr: float
    rb: int  # rounds a side
    rn: int


def _estimate(
    xb: np.ndarray,
    xn: np.ndarray,
    floor: float,
    noise: Noise | None,
    same_runner: bool,
    threshold: float,
) -> _Est | None:
    """The lower quartile of each side's round values, pooled MAD-based sd of the rounds.

    Not means and sds: on the H200 5 % of rounds still read 3-24 % slow (a clock or
    power state the driver entered after a heavy point; docs/regress.md), and only ever
    slow. A slow round must neither move a point's value nor hide a real change behind
    an inflated sd; the lower quartile ignores up to three slow rounds of ten (one of
    five), and a real change moves every round, the fast ones too.
    """
    rb, rn = xb.size, xn.size
    df = rb + rn - 2
    if df >= 1:
        ss = (rb - 1) * _mad_sd(xb) ** 2 + (rn - 1) * _mad_sd(xn) ** 2
        s, dof = math.sqrt(ss / df), float(df)
    elif noise is not None and noise.round_sd is not None:
        s, dof = float(noise.round_sd), float(PRIOR_DF)
    else:
        return None
    if noise is not None and noise.round_sd is not None:
        # A stored sd from a long baseline refresh is a floor: a few quiet rounds of a
        # point known to swing must not make it look steady.
        s = max(s, float(noise.round_sd))
    s = max(s, floor, SD_FLOOR)
    # The variance of the sample quartile of r normal values is about 1.857 σ² / r.
    var = Q_VAR * s * s * (1.0 / rb + 1.0 / rn)
    thr = threshold
    if not same_runner:
        run_sd = max(s, RUN_SD_FLOOR, (noise.machine_sd or 0.0) if noise else 0.0)
        var += 2.0 * run_sd * run_sd
        thr = max(threshold, math.exp(WIDEN_Z * math.sqrt(2.0) * run_sd) - 1.0)
    d = float(np.quantile(xn, LOCATION_Q) - np.quantile(xb, LOCATION_Q))
    return _Est(d, math.sqrt(var), dof, s, thr, rb, rn)


def _separation(b: np.ndarray, n: np.ndarray, threshold: float, nb: int, nn: int) -> Verdict:
    b, n = b[np.isfinite(b) & (b > 0)], n[np.isfinite(n) & (n > 0)]
    nan2 = (math.nan, math.nan)
    if not b.size or not n.size:
        return Verdict("unknown", math.nan, nan2, math.nan, math.nan, nb, nn, threshold,
                       threshold, math.nan, "no finite time > 0 on a side")  # fmt: skip
    ratio = float(np.median(n) / np.median(b))
    lo, hi = float(n.min() / b.max()), float(n.max() / b.min())
    ci = (lo, hi)
    if lo > 1 + threshold:
        return Verdict("slower", ratio, ci, math.nan, math.nan, nb, nn, threshold, threshold,
                       math.nan, f"every new sample is over {1 + threshold:.2f}x every "
                       f"baseline sample ({lo:.2f}x at least); too few rounds for a test")  # fmt: skip
    if hi < 1 / (1 + threshold):
        return Verdict("faster", ratio, ci, math.nan, math.nan, nb, nn, threshold, threshold,
                       math.nan, f"every new sample is under 1/{1 + threshold:.2f} of every "
                       "baseline sample; too few rounds for a test")  # fmt: skip
    return Verdict("unknown", ratio, ci, math.nan, math.nan, nb, nn, threshold, threshold,
                   math.nan, f"{nb} and {nn} round(s): too few to estimate the between-round "
                   "noise, and the samples are not separated")  # fmt: skip


def decide_all(
    pairs: Sequence[tuple[Sequence[Sequence[float]], Sequence[Sequence[float]]]],
    threshold: float = DEFAULT_THRESHOLD,
    alpha: float = DEFAULT_ALPHA,
    same_runner: bool = False,
    noise: Sequence[Noise | None] | None = None,
) -> list[Verdict]:
    """Verdicts for (base_rounds, new_rounds) pairs, each a list of rounds of samples (µs).

    BH runs over the points decided by a test; ``same_runner`` says the rounds of both
    sides were interleaved on one machine (no run offsets); ``noise`` gives each point's
    stored noise (a baseline's), or None.
    """
    if not 0 < threshold < 1:
        raise ValueError(f"threshold: expected 0 < threshold < 1, got {threshold}")
    if not 0 < alpha < 0.5:
        raise ValueError(f"alpha: expected 0 < alpha < 0.5, got {alpha}")
    if noise is not None and len(noise) != len(pairs):
        raise ValueError(f"noise: expected {len(pairs)} entries, got {len(noise)}")
    ests: dict[int, _Est] = {}
    pvals: dict[int, float] = {}
    out: list[Verdict | None] = []
    for i, (b, n) in enumerate(pairs):
        xb, xn = round_values(b), round_values(n)
        e = None
        if xb.size and xn.size:
            floor = max(_round_floor(b), _round_floor(n))
            e = _estimate(xb, xn, floor, noise[i] if noise else None, same_runner, threshold)
        if e is None:
            flat_b = np.concatenate([np.asarray(r, float) for r in b]) if b else np.empty(0)
            flat_n = np.concatenate([np.asarray(r, float) for r in n]) if n else np.empty(0)
            out.append(_separation(flat_b, flat_n, threshold, len(b), len(n)))
            continue
        ests[i] = e
        pvals[i] = float(2.0 * sps.t.sf(abs(e.d) / e.se, e.df))
        out.append(None)
    order = sorted(pvals)
    qvals = dict(zip(order, benjamini_hochberg([pvals[i] for i in order]), strict=True))
    result: list[Verdict] = []
    for i, v in enumerate(out):
        if v is not None:
            result.append(v)
            continue
        e, p, q = ests[i], pvals[i], float(qvals[i])
        half = float(sps.t.ppf(1 - alpha / 2, e.df)) * e.se
        ratio, lo, hi = math.exp(e.d), math.exp(e.d - half), math.exp(e.d + half)
        up, down = 1.0 + e.thr, 1.0 / (1.0 + e.thr)
        sig = q < alpha
        wide = f" (threshold widened to {e.thr:.1%} by its run noise)" if e.thr > threshold else ""
        if sig and ratio >= up:
            state, why = "slower", f"q={q:.2g} < {alpha:g} and {ratio:.3f}x >= {up:.3f}x{wide}"
        elif sig and ratio <= down:
            state, why = "faster", f"q={q:.2g} < {alpha:g} and {ratio:.3f}x <= {down:.3f}x{wide}"
        elif down < lo and hi < up:
            state, why = "same", f"interval [{lo:.3f}, {hi:.3f}]x inside ±{e.thr:.1%}{wide}"
        else:
            state = "unknown"
            why = (
                f"undecided: interval [{lo:.3f}, {hi:.3f}]x crosses ±{e.thr:.1%}"
                + ("" if sig else f", q={q:.2g}")
                + wide
            )
        result.append(Verdict(state, ratio, (lo, hi), p, q, e.rb, e.rn, e.thr, threshold, e.s, why))
    return result
