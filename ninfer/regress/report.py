"""Markdown for ``$GITHUB_STEP_SUMMARY`` and PR comments: the verdicts first, details folded."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..record import Results, key_str
from .compare import Comparison, Row, compiler_hint, refresh_hint
from .verdict import ICON as _ICON
from .verdict import ORDER as _ORDER
from .verdict import md_cell

__all__ = ["markdown", "md_cell", "run_markdown"]


def _env_line(r: Results) -> str:
    e, t = r.env, r.timing
    commit = (e.get("commit") or "?")[:10] + ("+dirty" if e.get("dirty") else "")
    return (
        f"{e['gpu_name']} (cc {e['cc']}, {e['sms']} SMs), driver {e['driver']}, "
        f"CuPy {e['cupy']}, NVRTC {e.get('nvrtc') or '?'}, commit `{commit}`, kernels `{e['kernel_fingerprint'][:12]}`, "
        f"{t['execution']} execution, flush {t['flush_mib']} MiB, repeat {t['repeat']}"
    )


def _row(r: Row) -> str:
    v = r.verdict
    ci = f"{v.ci[0]:.3f}–{v.ci[1]:.3f}" if v.ci[0] == v.ci[0] else "–"
    labels = ", ".join(r.labels[:2]) + (" …" if len(r.labels) > 2 else "")
    ab = "–"
    if r.confirm is not None:
        a = r.confirm
        ab = f"{a.change_pct:+.1f}% {_ICON[a.state]}"
    return (
        f"| {md_cell(key_str(r.key))} | {md_cell(labels)} | {r.base_median_us:.2f} | "
        f"{r.new_median_us:.2f} | {v.change_pct:+.1f}% | {ci} | {v.threshold:.1%} | {v.q:.2g} | "
        f"{_ICON[v.state]} | {ab} | **{r.state}** |"
    )


_HEAD = (
    "| point | labels | base µs | new µs | change | ratio interval | thr | q (BH) | "
    "verdict | A/B | gate |\n"
    "|---|---|---:|---:|---:|---|---:|---:|---|---|---|"
)


def markdown(c: Comparison, plots: list[Path] | None = None, rel_to: Path | None = None) -> str:
    icon = {0: "✅", 1: "❌", 2: "⚠️"}[c.exit_code]
    out = [f"## ninfer bench: {icon} {c.summary()}", ""]
    out += [f"- baseline: {_env_line(c.base)}", f"- new: {_env_line(c.new)}"]
    reason = c.base.doc.get("baseline", {}).get("reason")
    if reason:
        out.append(f"- baseline reason: {reason}")
    out.append("")
    if c.failures:
        out += ["### Points that failed to run (the gate fails)", ""]
        out += [f"- {f['point']}: `{f['error']}`" for f in c.failures] + [""]
    if c.undecided:
        out += ["> **No point could be decided** (all unknown): this is not a pass.", ""]
    if c.fingerprint_changed:
        out += [f"> **Route code changed.** {refresh_hint(c)}", ""]
    if c.compiler_changed:
        out += [f"> **Compiler changed.** {compiler_hint(c)}", ""]
    flagged = sorted(
        (r for r in c.rows if r.verdict.state != "same"), key=lambda r: _ORDER[r.state]
    )
    if flagged:
        out += ["### Points that are not `same`", "", _HEAD, *[_row(r) for r in flagged], ""]
        unk = [r for r in flagged if r.state == "unknown"]
        if unk:
            out += [
                f"Unknown means undecided, not passed: {(unk[0].confirm or unk[0].verdict).why}.",
                "",
            ]
    if c.seams:
        out += ["### New seams along T (steps the baseline curve lacks)", ""]
        out += ["| shape | T step | new step | baseline step |", "|---|---|---:|---:|"]
        for s in c.seams:
            q, p, n, k = s.group
            out.append(
                f"| {q} {p} [{n},{k}] | {s.t_lo}→{s.t_hi} | {s.new_step:+.1%} | "
                f"{s.base_step:+.1%} |"
            )
        out.append("")
    if c.only_base:
        out += [
            "### In the baseline but not measured now"
            + ("" if c.allow_missing else " (the gate fails; --allow-missing to accept)"),
            "",
            *[f"- {key_str(k)}" for k in c.only_base],
            "",
        ]
    if c.only_new:
        out += ["### New points without a baseline", "", *[f"- {key_str(k)}" for k in c.only_new]]
        out.append("")
    if plots:
        out += ["### Plots", ""]
        for path in plots:
            rel = path.relative_to(rel_to) if rel_to else path
            out.append(f"![{path.stem}]({rel.as_posix()})")
        out.append("")
    out += ["<details><summary>All points</summary>", "", _HEAD, *[_row(r) for r in c.rows]]
    out += ["", "</details>", ""]
    out += [
        "Verdict rule: each round (a fresh process) gives one value, the log of its median; "
        "*slower*/*faster* need Benjamini–Hochberg q < alpha over the points (a t test on "
        "the rounds' lower quartiles and pooled MAD) **and** a change beyond the point's "
        "threshold (5 %, widened between separate runs by the point's own noise: `thr`); "
        "*same* needs the (1 − alpha) interval inside ±threshold; anything else is "
        "*unknown*. Points not *same* against the baseline are re-measured in an A/B "
        "against the baseline's commit on this runner, whose verdict counts (`A/B`). The "
        "gate fails on any *slower*. See docs/regress.md.",
        "",
    ]
    return "\n".join(out)


def run_markdown(r: Results) -> str:
    """A run without a baseline: the measured table and why nothing was compared."""
    out = [f"## ninfer bench: {len(r.points)} points measured, no baseline compared", ""]
    out += [f"- run: {_env_line(r)}", ""]
    out += ["| point | median µs | p95 µs | READ % | TFLOP/s |", "|---|---:|---:|---:|---:|"]
    for p in r.points:
        m: dict[str, Any] = p["metrics"]
        out.append(
            f"| {p['qtype']} {p['policy']} [{p['n']},{p['k']}] T={p['t']} | "
            f"{p['median_us']:.2f} | {p['p95_us']:.2f} | {m.get('READ_pct', float('nan')):.1f} | "
            f"{m.get('useful_TFLOPs', float('nan')):.2f} |"
        )
    return "\n".join(out) + "\n"
