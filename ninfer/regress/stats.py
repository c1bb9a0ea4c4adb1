"""Four-state verdicts per point (DESIGN §9), as asv and nvbench do.

A change counts only when it is statistically significant — two-sided Mann–Whitney U
per point, Benjamini–Hochberg over all points of the comparison — *and* its size, the
Hodges–Lehmann estimate of the new/base time ratio, lies beyond the relative threshold.
"same" needs positive evidence: the (1 − alpha) confidence interval of that ratio lies
inside ±threshold. Anything else (too few samples, an interval too wide to decide) is
"unknown", never a silent pass. Times are compared on a log scale because GPU noise is
multiplicative (clock and memory-state jitter scale with the kernel).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats as sps

# Below 6 a side the (1 - 0.01) Hodges–Lehmann interval degenerates to the whole range of
# pairwise ratios (its rank c is 0 at 5 vs 5), so "same" could never be shown.
MIN_SAMPLES = 6
DEFAULT_THRESHOLD = 0.05
DEFAULT_ALPHA = 0.01
STATES = ("slower", "faster", "same", "unknown")


@dataclass(frozen=True)
class Verdict:
    state: str  # one of STATES
    ratio: float  # Hodges–Lehmann estimate of new/base (nan when unknown for lack of samples)
    ci: tuple[float, float]  # (1 - alpha) interval of the ratio
    p: float  # raw two-sided Mann–Whitney p
    q: float  # Benjamini–Hochberg adjusted p
    n_base: int
    n_new: int
    why: str

    @property
    def change_pct(self) -> float:
        return (self.ratio - 1.0) * 100.0


def benjamini_hochberg(p: Sequence[float]) -> np.ndarray:
    """BH step-up adjusted p-values (monotone, capped at 1)."""
    pv = np.asarray(p, dtype=float)
    if not np.all(np.isfinite(pv)):
        raise ValueError("benjamini_hochberg: expected finite p-values, got NaN or Inf")
    m = pv.size
    if m == 0:
        return pv
    order = np.argsort(pv)
    ranked = pv[order] * m / np.arange(1, m + 1)
    adj = np.minimum.accumulate(ranked[::-1])[::-1]
    out = np.empty(m)
    out[order] = np.minimum(adj, 1.0)
    return out


def hodges_lehmann(
    base: np.ndarray, new: np.ndarray, alpha: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Ratio estimates and distribution-free (1 - alpha) intervals from pairwise log ratios.

    ``base`` is (P, n), ``new`` is (P, m): P points with equal sample counts, done at once.
    The interval's order-statistic rank comes from the normal approximation of U (Lehmann
    1975); with >= 6 samples a side it is within one rank of the exact one.
    """
    n, m = base.shape[1], new.shape[1]
    nm = n * m
    d = np.sort((np.log(new)[:, :, None] - np.log(base)[:, None, :]).reshape(-1, nm), axis=1)
    z = float(sps.norm.ppf(1 - alpha / 2))
    c = math.floor(nm / 2 - z * math.sqrt(nm * (n + m + 1) / 12))
    est = np.exp(np.median(d, axis=1))
    if c < 0:
        return est, np.zeros(len(d)), np.full(len(d), math.inf)
    return est, np.exp(d[:, c]), np.exp(d[:, nm - 1 - c])


def decide_all(
    pairs: Sequence[tuple[Sequence[float], Sequence[float]]],
    threshold: float = DEFAULT_THRESHOLD,
    alpha: float = DEFAULT_ALPHA,
) -> list[Verdict]:
    """Verdicts for (base_samples, new_samples) pairs; BH runs over the decidable points."""
    if not 0 < threshold < 1:
        raise ValueError(f"threshold: expected 0 < threshold < 1, got {threshold}")
    if not 0 < alpha < 0.5:
        raise ValueError(f"alpha: expected 0 < alpha < 0.5, got {alpha}")
    arrays = [(np.asarray(b, float), np.asarray(n, float)) for b, n in pairs]
    # Points with equal sample counts are tested as one batch: the calibration tests run
    # 68 000 comparisons, and scipy's per-call overhead would dominate them.
    groups: dict[tuple[int, int], list[int]] = {}
    for i, (b, n) in enumerate(arrays):
        if (
            min(b.size, n.size) >= MIN_SAMPLES
            and bool(np.all(np.isfinite(b)) and np.all(np.isfinite(n)))
            and min(b.min(), n.min()) > 0
        ):
            groups.setdefault((b.size, n.size), []).append(i)
    pvals: dict[int, float] = {}
    est: dict[int, tuple[float, float, float]] = {}
    for idx in groups.values():
        bs = np.stack([arrays[i][0] for i in idx])
        ns = np.stack([arrays[i][1] for i in idx])
        pv = np.atleast_1d(sps.mannwhitneyu(ns, bs, alternative="two-sided", axis=1).pvalue)
        rat, los, his = hodges_lehmann(bs, ns, alpha)
        for j, i in enumerate(idx):
            pvals[i] = float(pv[j])
            est[i] = (float(rat[j]), float(los[j]), float(his[j]))
    ok = sorted(pvals)
    qvals = dict(zip(ok, benjamini_hochberg([pvals[i] for i in ok]), strict=True))
    up, down = 1.0 + threshold, 1.0 / (1.0 + threshold)
    out: list[Verdict] = []
    for i, (b, n) in enumerate(arrays):
        if i not in pvals:
            out.append(
                Verdict(
                    "unknown",
                    math.nan,
                    (math.nan, math.nan),
                    math.nan,
                    math.nan,
                    b.size,
                    n.size,
                    (
                        f"too few samples ({b.size} base, {n.size} new; need {MIN_SAMPLES} a side)"
                        if min(b.size, n.size) < MIN_SAMPLES
                        else "a sample is not a finite time > 0"
                    ),
                )
            )
            continue
        ratio, lo, hi = est[i]
        p, q = pvals[i], float(qvals[i])
        sig = q < alpha
        if sig and ratio >= up:
            state, why = "slower", f"q={q:.2g} < {alpha:g} and {ratio:.3f}x >= {up:.3f}x"
        elif sig and ratio <= down:
            state, why = "faster", f"q={q:.2g} < {alpha:g} and {ratio:.3f}x <= {down:.3f}x"
        elif down < lo and hi < up:
            state, why = "same", f"interval [{lo:.3f}, {hi:.3f}]x inside ±{threshold:.0%}"
        else:
            state = "unknown"
            why = (
                f"too noisy to decide: interval [{lo:.3f}, {hi:.3f}]x crosses ±{threshold:.0%}"
                + ("" if sig else f", q={q:.2g}")
            )
        out.append(Verdict(state, ratio, (lo, hi), p, q, b.size, n.size, why))
    return out
