"""PNG plots (matplotlib, the ``report`` extra): latency vs T per shape, new vs baseline,
and a roofline chart against the run's own measured ceilings."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from ..record import Results
from .compare import Comparison

_COLORS = {"slower": "tab:red", "faster": "tab:green", "same": "tab:gray", "unknown": "tab:orange"}


def _plt() -> Any:
    import matplotlib

    matplotlib.use("Agg")  # headless runners: no display
    import matplotlib.pyplot as plt

    return plt


def save(fig: Any, path: Path) -> Path:
    """Lay out, write at the reports' one resolution, and free the figure (long runs
    draw many: pyplot keeps every open figure alive)."""
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    _plt().close(fig)
    return path


def _groups(r: Results) -> dict[tuple[str, str, int, int], list[dict[str, Any]]]:
    g: dict[tuple[str, str, int, int], list[dict[str, Any]]] = {}
    for p in r.points:
        g.setdefault((p["qtype"], p["policy"], p["n"], p["k"]), []).append(p)
    for v in g.values():
        v.sort(key=lambda p: p["t"])
    return g


def _y_ticks(ax: Any, values: list[float]) -> None:
    """Labelled y ticks on every panel. A log axis over less than a decade gets at most one
    major tick (often none), so a narrow panel stays linear; a wide one is log with ticks
    at 1, 2 and 5 of each decade."""
    from matplotlib import ticker

    lo, hi = min(values), max(values)
    if hi / lo < 4:
        ax.yaxis.set_major_locator(ticker.MaxNLocator(4))
    else:
        ax.set_yscale("log")
        ax.yaxis.set_major_locator(ticker.LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        ax.yaxis.set_minor_formatter(ticker.NullFormatter())  # minor labels would overlap
    ax.yaxis.set_major_formatter(ticker.FuncFormatter(lambda v, _: f"{v:g}"))


def latency_vs_t(new: Results, base: Results | None, path: Path) -> Path:
    """One panel per shape: median with the p95 whisker, new over the baseline."""
    plt = _plt()
    gn = _groups(new)
    gb = _groups(base) if base else {}
    keys = sorted(gn)
    cols = min(6, len(keys))
    rows = math.ceil(len(keys) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(3.2 * cols, 2.6 * rows), squeeze=False)
    for ax, key in zip(axes.ravel(), keys, strict=False):
        for res, pts, style, name in (
            (base, gb.get(key, []), "s--", "baseline"),
            (new, gn[key], "o-", "new"),
        ):
            if res is None or not pts:
                continue
            t = [p["t"] for p in pts]
            med = [p["median_us"] for p in pts]
            err = [[0] * len(pts), [p["p95_us"] - p["median_us"] for p in pts]]
            ax.errorbar(t, med, yerr=err, fmt=style, ms=3, lw=1, capsize=2, label=name)
        ax.set_xscale("log", base=2)
        _y_ticks(ax, [p["median_us"] for p in gn[key] + gb.get(key, [])])
        ax.set_title(f"{key[0]} {key[1]} [{key[2]},{key[3]}]", fontsize=8)
        ax.tick_params(labelsize=7)
    for ax in axes.ravel()[len(keys) :]:
        ax.axis("off")
    axes[0][0].legend(fontsize=7)
    fig.supxlabel("T (tokens)")
    fig.supylabel("median latency µs (whisker: p95)")
    fig.suptitle(f"{new.env['gpu_name']}: latency vs T", fontsize=10)
    return save(fig, path)


def new_vs_base(c: Comparison, path: Path) -> Path:
    """Hodges–Lehmann ratio new/base per point with its interval, coloured by verdict."""
    plt = _plt()
    rows = sorted(c.rows, key=lambda r: r.key)
    fig, ax = plt.subplots(figsize=(max(6.0, 0.16 * len(rows)), 3.6))
    for i, r in enumerate(rows):
        v = r.verdict
        if v.ratio != v.ratio:
            ax.plot(i, 1.0, "x", color=_COLORS["unknown"])
            continue
        lo, hi = v.ci
        hi = min(hi, 10.0)
        ax.errorbar(
            i, v.ratio, yerr=[[v.ratio - lo], [hi - v.ratio]], fmt="o", ms=3,
            color=_COLORS[v.state], capsize=1.5,
        )  # fmt: skip
    for y in (1 + c.threshold, 1 / (1 + c.threshold)):
        ax.axhline(y, color="k", ls=":", lw=0.8)
    ax.axhline(1.0, color="k", lw=0.5)
    ax.set_xticks(range(len(rows)))
    ax.set_xticklabels([f"{r.key[0]} {r.key[2]}x{r.key[3]} T{r.key[4]}" for r in rows],
                       rotation=90, fontsize=5)  # fmt: skip
    from matplotlib.lines import Line2D

    states = sorted({r.verdict.state for r in rows if r.verdict.ratio == r.verdict.ratio})
    handles = [Line2D([], [], marker="o", ls="", ms=4, color=_COLORS[s], label=s) for s in states]
    if any(r.verdict.ratio != r.verdict.ratio for r in rows):
        handles.append(Line2D([], [], marker="x", ls="", color=_COLORS["unknown"],
                              label="no ratio (too few rounds)"))  # fmt: skip
    handles.append(Line2D([], [], color="k", ls=":", lw=0.8, label=f"±{c.threshold:.0%}"))
    ax.legend(handles=handles, fontsize=6, loc="upper right", ncol=len(handles))
    ax.set_ylabel("new / baseline (HL, interval)")
    ax.set_title(
        f"new vs baseline: {c.count('slower')} slower, {c.count('faster')} faster, "
        f"{c.count('unknown')} unknown (dotted: ±{c.threshold:.0%})",
        fontsize=9,
    )
    return save(fig, path)


def roofline(r: Results, path: Path) -> Path:
    """Useful TFLOP/s against arithmetic intensity over model bytes (DESIGN §8)."""
    plt = _plt()
    ceil = r.doc["ceilings"]
    bw = float(ceil["sustained_read_gbps"])  # GB/s
    peak = ceil.get("bf16_dense_tflops")
    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    by_q: dict[str, tuple[list[float], list[float]]] = {}
    for p in r.points:
        ai = 2.0 * p["n"] * p["k"] * p["t"] / p["bytes"]["model_bytes"]
        tf = p["metrics"]["useful_TFLOPs"]
        by_q.setdefault(p["qtype"], ([], []))
        by_q[p["qtype"]][0].append(ai)
        by_q[p["qtype"]][1].append(tf)
    lo = min(min(v[0]) for v in by_q.values()) / 2
    hi = max(max(v[0]) for v in by_q.values()) * 2
    xs = [lo * (hi / lo) ** (i / 100) for i in range(101)]
    ys = [x * bw / 1e3 for x in xs]  # FLOP/byte * GB/s -> TFLOP/s
    if peak:
        ys = [min(y, peak) for y in ys]
    ax.plot(
        xs,
        ys,
        "k-",
        lw=1,
        label=f"roof: read {bw:.0f} GB/s" + (f", {peak:g} TFLOP/s" if peak else ""),
    )
    for q, (ai, tf) in sorted(by_q.items()):
        ax.plot(ai, tf, "o", ms=4, label=q)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOP / model byte)")
    ax.set_ylabel("useful TFLOP/s")
    ax.set_title(f"{r.env['gpu_name']}: roofline ({len(r.points)} points)", fontsize=10)
    ax.legend(fontsize=7)
    return save(fig, path)


def all_plots(new: Results, c: Comparison | None, out: Path) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    paths = [latency_vs_t(new, c.base if c else None, out / "latency_vs_T.png")]
    if c is not None:
        paths.append(new_vs_base(c, out / "new_vs_baseline.png"))
    paths.append(roofline(new, out / "roofline.png"))
    return paths
