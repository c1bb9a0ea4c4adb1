"""Compare a new run with a baseline: per-point verdicts, sweep seams, the gate.

Two separate records are compared as separate runs (their run offsets do not cancel,
stats.py); a point that is not "same" can then be *confirmed* by an interleaved A/B on
the same runner (ab.py), whose verdict is the gate's for that point. Exit status of the
gate: 0 pass, 1 a point is slower, 2 usage or environment error (unreadable file,
another GPU model, another timing contract, nothing in common, no confirmation possible).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ..record import (
    PointKey,
    Results,
    ResultsError,
    check_comparable,
    key_str,
    round_samples,
)
from .stats import DEFAULT_ALPHA, DEFAULT_THRESHOLD, Noise, Verdict, decide_all

EXIT_PASS, EXIT_REGRESSION, EXIT_ERROR = 0, 1, 2


@dataclass(frozen=True)
class Row:
    key: PointKey
    labels: tuple[str, ...]
    base_median_us: float
    new_median_us: float
    verdict: Verdict  # the two records compared as separate runs
    confirm: Verdict | None = None  # the same-runner A/B, where one was run

    @property
    def state(self) -> str:
        """The gate's verdict: the A/B's where the point was confirmed."""
        return (self.confirm or self.verdict).state


@dataclass(frozen=True)
class Seam:
    """An adjacent-T step of the new curve that the baseline curve does not have."""

    group: tuple[str, str, int, int]
    t_lo: int
    t_hi: int
    new_step: float  # median(t_hi) / median(t_lo) - 1, new run
    base_step: float  # the same step in the baseline


@dataclass
class Comparison:
    base: Results
    new: Results
    threshold: float
    alpha: float
    rows: list[Row]
    only_base: list[PointKey] = field(default_factory=list)
    only_new: list[PointKey] = field(default_factory=list)
    seams: list[Seam] = field(default_factory=list)
    strict: bool = False  # unknown points fail the gate too
    allow_missing: bool = False  # baseline points not measured now do not fail the gate

    confirmed: bool = False  # an A/B on this runner re-measured the points not "same"
    same_runner: bool = False  # both records come from one interleaved A/B
    confirm_error: str = ""  # why a needed confirmation could not run (the gate fails)

    def count(self, state: str) -> int:
        return sum(r.state == state for r in self.rows)

    @property
    def failures(self) -> list[dict[str, str]]:
        """Points of the new run that raised instead of being measured."""
        return list(self.new.doc["failures"])

    @property
    def fingerprint_changed(self) -> bool:
        return self.base.fingerprint != self.new.fingerprint

    @property
    def compiler_changed(self) -> tuple[str, str] | None:
        """(base, new) NVRTC versions where both records name one and they differ: the
        same source then runs as other code, which the kernel fingerprint cannot see."""
        a, b = self.base.env.get("nvrtc"), self.new.env.get("nvrtc")
        return (a, b) if a and b and a != b else None

    def failing(self) -> list[str]:
        """Why the gate fails; empty when it passes. The one place the gate is decided."""
        why = []
        if self.count("slower"):
            why.append(f"{self.count('slower')} slower")
        if self.failures:
            why.append(f"{len(self.failures)} failed to run")
        if self.only_base and not self.allow_missing:
            why.append(f"{len(self.only_base)} baseline point(s) not measured")
        if self.strict and self.count("unknown"):
            why.append(f"{self.count('unknown')} unknown (--strict)")
        if self.confirm_error:
            why.append(f"not confirmed: {self.confirm_error}")
        return why

    @property
    def undecided(self) -> bool:
        """Not one point could be decided: the comparison says nothing, it is no pass."""
        return all(r.state == "unknown" for r in self.rows)

    @property
    def exit_code(self) -> int:
        if self.confirm_error and not self.count("slower"):
            return EXIT_ERROR
        if self.failing():
            return EXIT_REGRESSION
        return EXIT_ERROR if self.undecided else EXIT_PASS

    def to_confirm(self) -> list[PointKey]:
        """Points the separate-run comparison did not find "same": the A/B's work."""
        return [r.key for r in self.rows if r.verdict.state != "same"]

    @property
    def headline(self) -> str:
        return {EXIT_PASS: "PASS", EXIT_REGRESSION: "FAIL", EXIT_ERROR: "UNDECIDED"}[self.exit_code]

    def summary(self) -> str:
        c = {s: self.count(s) for s in ("slower", "faster", "same", "unknown")}
        extra = f", {len(self.only_base)} not measured" if self.only_base else ""
        fail = f" -- failing: {'; '.join(self.failing())}" if self.failing() else ""
        how = (
            "same-runner A/B" if self.same_runner
            else f"separate runs, {sum(r.confirm is not None for r in self.rows)} confirmed by "
            "A/B on this runner" if self.confirmed else "separate runs"
        )  # fmt: skip
        return (
            f"{self.headline}: {c['slower']} slower, {c['faster']} faster, {c['same']} same, "
            f"{c['unknown']} unknown of {len(self.rows)} points{extra} "
            f"(threshold {self.threshold:.0%}, alpha {self.alpha:g}, round medians + BH; "
            f"{how}){fail}"
        )


def _median(p: dict[str, Any]) -> float:
    return float(p["median_us"])


def find_seams(
    base: dict[PointKey, dict[str, Any]], new: dict[PointKey, dict[str, Any]], threshold: float
) -> list[Seam]:
    """Steps between adjacent measured T of one shape that grew by more than ``threshold``."""
    groups: dict[tuple[str, str, int, int], list[int]] = {}
    for k in new:
        if k in base:
            groups.setdefault(k[:4], []).append(k[4])
    out: list[Seam] = []
    for g, ts in groups.items():
        ts.sort()
        for lo, hi in itertools.pairwise(ts):
            a, b = PointKey(*g, lo), PointKey(*g, hi)
            ns = _median(new[b]) / _median(new[a]) - 1
            bs = _median(base[b]) / _median(base[a]) - 1
            # The step itself must pass the threshold, and grow by it relative to the
            # baseline's step: a +988 % step that was +982 % is not a new seam.
            if ns >= threshold and (1 + ns) / (1 + bs) >= 1 + threshold:
                out.append(Seam(g, lo, hi, ns, bs))
    return out


def stored_noise(p: dict[str, Any]) -> Noise | None:
    n = p.get("noise")
    if not n:
        return None
    return Noise(n.get("round_sd"), n.get("machine_sd"))


def compare(
    base: Results,
    new: Results,
    threshold: float = DEFAULT_THRESHOLD,
    alpha: float = DEFAULT_ALPHA,
    strict: bool = False,
    allow_missing: bool = False,
    same_runner: bool = False,
) -> Comparison:
    """Verdicts of ``new`` against ``base``; ``same_runner``: the two records are the
    sides of one interleaved A/B (ab.py), so no run offset separates them."""
    check_comparable(base, new)
    b, n = base.by_key(), new.by_key()
    common = [k for k in b if k in n]
    if not common:
        raise ResultsError(
            f"no point in common between {base.path} ({len(b)} points) and {new.path} "
            f"({len(n)} points): nothing to compare"
        )
    pairs: list[tuple[Sequence[Sequence[float]], Sequence[Sequence[float]]]] = [
        (round_samples(b[k]), round_samples(n[k])) for k in common
    ]
    verdicts = decide_all(
        pairs,
        threshold,
        alpha,
        same_runner=same_runner,
        noise=[stored_noise(b[k]) for k in common],
    )
    rows = [
        Row(k, tuple(n[k]["labels"]), _median(b[k]), _median(n[k]), v)
        for k, v in zip(common, verdicts, strict=True)
    ]
    return Comparison(
        base,
        new,
        threshold,
        alpha,
        rows,
        only_base=[k for k in b if k not in n],
        only_new=[k for k in n if k not in b],
        seams=find_seams(b, n, threshold),
        strict=strict,
        allow_missing=allow_missing,
        same_runner=same_runner,
    )


def with_confirmation(c: Comparison, ab: Comparison) -> Comparison:
    """``c`` with the A/B verdicts of the points ``ab`` re-measured."""
    by = {r.key: r for r in ab.rows}
    rows = [replace(r, confirm=by[r.key].verdict) if r.key in by else r for r in c.rows]
    c.rows = rows
    c.confirmed = True
    return c


def refresh_hint(c: Comparison) -> str:
    return (
        f"The route code changed since the baseline (kernel fingerprint "
        f"{c.base.fingerprint[:12]} -> {c.new.fingerprint[:12]}). If the change is intended, "
        f"refresh the baseline on this GPU: nox -s baseline -- --suite "
        f"{c.new.doc.get('suite') or c.base.doc.get('suite') or 'all'} --reason '<why>' "
        f"(or the 'baseline refresh' workflow), and commit baselines/{c.new.gpu_key}/."
    )


def compiler_hint(c: Comparison) -> str:
    a, b = c.compiler_changed or ("?", "?")
    return (
        f"The kernels were compiled by another NVRTC than the baseline's ({a} -> {b}): the "
        "same source can compile to other code (registers, spills, instruction order), so a "
        "difference between the two runs may be the compiler's. An A/B on this runner "
        "compiles both sides with one NVRTC (nox -s bench confirms its flagged points so)."
    )


def text_table(c: Comparison, only_changed: bool = False) -> str:
    """The terminal table (tabulate: columns sized to their widest cell)."""
    from tabulate import tabulate

    rows = []
    for r in c.rows:
        v = r.verdict
        if only_changed and r.state == "same" and v.state == "same":
            continue
        ci = f"[{v.ci[0]:.3f},{v.ci[1]:.3f}]" if v.ci[0] == v.ci[0] else "-"
        state = v.state
        if r.confirm is not None:
            a = r.confirm
            state = f"{v.state} -> A/B {a.change_pct:+.1f}% [{a.ci[0]:.3f},{a.ci[1]:.3f}] {a.state}"
        rows.append([key_str(r.key), f"{r.base_median_us:.3f}", f"{r.new_median_us:.3f}",
                     f"{v.change_pct:+.1f}%", ci, f"{v.threshold:.1%}", f"{v.q:.2g}", state])  # fmt: skip
    head = ["point", "base_us", "new_us", "change", "interval", "thr", "q", "verdict"]
    return str(tabulate(rows, head, tablefmt="simple", disable_numparse=True,
                        colalign=("left", "right", "right", "right", "right", "right", "right", "left")))  # fmt: skip
