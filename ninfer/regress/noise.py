"""Where the noise lives: ``ninfer-regress noise`` measures it level by level.

Kalibera & Jones ("Rigorous benchmarking in reasonable time", ISMM 2013): find the
level at which the variance enters — samples of one allocation, allocations of one
process, processes of one machine, machines — and replicate at that level. The command
runs P fresh processes, each with A fresh allocations of the whole suite (the points
of each allocation in a shuffled order), under each memory layout asked for; records of
several machines are then decomposed together (``--from``).

For each point, on log time (so every figure is a relative sd, in %):
- within: the samples of one round (1.4826 · MAD, the median over rounds);
- alloc: round medians of one process, less what ``within`` explains;
- process: process means of one machine, less what ``alloc`` explains;
- machine: machine means, less what ``process`` explains.
And the causes it can show: the order inside a round (position, and the weight size of
the point before), the first process of a machine against the later ones, and the SM
clock and temperature read around the point.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import stats as sps

from ..record import PointKey, Results, key_str, point_key


@dataclass(frozen=True)
class Levels:
    """Relative sd (log scale) of one point at each level; nan where not measured."""

    key: PointKey
    median_us: float
    within: float
    alloc: float
    process: float
    machine: float
    rounds: int
    processes: int
    machines: int
    slow: float  # share of rounds > 3 % above the point's median round

    @property
    def between_rounds(self) -> float:
        """What the gate's rounds (a fresh process each) see between them."""
        parts = [x for x in (self.alloc, self.process) if math.isfinite(x)]
        return math.sqrt(sum(x * x for x in parts)) if parts else math.nan


def _mad_sd(x: np.ndarray) -> float:
    return float(1.4826 * np.median(np.abs(x - np.median(x)))) if x.size > 1 else math.nan


def _pooled_sd(groups: Sequence[np.ndarray]) -> tuple[float, float]:
    """Pooled sd of several groups and the mean group size (nan without a pair)."""
    ss, df, sizes = 0.0, 0, []
    for g in groups:
        if g.size >= 2:
            ss += float(np.sum((g - g.mean()) ** 2))
            df += g.size - 1
            sizes.append(g.size)
    return (math.sqrt(ss / df), float(np.mean(sizes))) if df else (math.nan, math.nan)


def _or(x: float, default: float) -> float:
    """``x``, or ``default`` where a level was not measured (nan)."""
    return x if math.isfinite(x) else default


def _less(total: float, explained: float) -> float:
    """sd left at a level once the level below is accounted for (never negative)."""
    if not math.isfinite(total):
        return math.nan
    e = _or(explained, 0.0)
    return math.sqrt(max(total * total - e * e, 0.0))


def rounds_of(results: Sequence[Results]) -> dict[PointKey, list[dict[str, Any]]]:
    """Every kept round of every point, tagged with its machine, process and alloc."""
    out: dict[PointKey, list[dict[str, Any]]] = defaultdict(list)
    for ri, res in enumerate(results):
        meta = {m["index"]: m for m in res.rounds}
        for p in res.points:
            for r in p["rounds"]:
                if r.get("throttled"):
                    continue
                m = meta.get(r["round"], {})
                x = np.log(np.asarray(r["samples_us"], float))
                out[point_key(p)].append({
                    "machine": str(m.get("machine") or f"record{ri}"),
                    "process": (ri, int(m.get("process", r["round"]))),
                    "alloc": int(m.get("alloc", 0)),
                    "v": float(np.median(x)), "within": _mad_sd(x), "n": x.size,
                    "position": r.get("position"), "after": r.get("after"),
                    "sm_mhz": (r.get("telemetry") or {}).get("after", {}).get("sm_mhz"),
                    "temp_c": (r.get("telemetry") or {}).get("after", {}).get("temp_c"),
                    "median_us": float(np.median(r["samples_us"])),
                })  # fmt: skip
    return out


def decompose(results: Sequence[Results]) -> list[Levels]:
    out = []
    for key, rs in rounds_of(results).items():
        within = float(np.nanmedian([r["within"] for r in rs])) if rs else math.nan
        n = float(np.mean([r["n"] for r in rs]))
        by_proc: dict[Any, list[float]] = defaultdict(list)
        proc_machine: dict[Any, str] = {}
        for r in rs:
            by_proc[r["process"]].append(r["v"])
            proc_machine[r["process"]] = r["machine"]
        alloc_tot, a = _pooled_sd([np.asarray(v) for v in by_proc.values()])
        alloc = _less(alloc_tot, within / math.sqrt(n))
        pmeans: dict[str, list[float]] = defaultdict(list)
        for p, v in by_proc.items():
            pmeans[proc_machine[p]].append(float(np.mean(v)))
        proc_tot, pp = _pooled_sd([np.asarray(v) for v in pmeans.values()])
        a = _or(a, 1.0)  # allocations a process (1 where no process had two)
        process = _less(proc_tot, math.sqrt(_or(alloc, 0.0) ** 2 / a + within**2 / (n * a)))
        mmeans = np.asarray([np.mean(v) for v in pmeans.values()])
        machine = math.nan
        if mmeans.size >= 2:
            tot = float(np.std(mmeans, ddof=1))
            machine = _less(tot, _or(process, 0.0) / math.sqrt(_or(pp, 1.0)))
        vs = np.asarray([r["v"] for r in rs])
        slow = float(np.mean(vs - np.median(vs) > 0.03))
        out.append(Levels(key, float(np.median([r["median_us"] for r in rs])), within, alloc,
                          process, machine, len(rs), len(by_proc), len(pmeans), slow))  # fmt: skip
    return out


HEAVY_BEFORE_US = 1000.0  # a predecessor this long a call kept the card at full power


def causes(results: Sequence[Results]) -> dict[str, Any]:
    """Suite-wide effects on a round's residual (its log median less the point's mean)."""
    medians = {key_str(point_key(p)): float(p["median_us"]) for r in results for p in r.points}
    rows = []
    for rs in rounds_of(results).values():
        mean = float(np.mean([r["v"] for r in rs]))
        first_proc: dict[str, Any] = {}
        for r in sorted(rs, key=lambda r: r["process"]):
            first_proc.setdefault(r["machine"], r["process"])
        for r in rs:
            rows.append(
                {**r, "res": r["v"] - mean, "first": r["process"] == first_proc[r["machine"]]}
            )
    out: dict[str, Any] = {"rounds": len(rows)}

    def corr(xs: list[Any], ys: list[float]) -> tuple[float, float, int]:
        pairs = [(x, y) for x, y in zip(xs, ys, strict=True) if x is not None and math.isfinite(y)]
        if len(pairs) < 10 or len({x for x, _ in pairs}) < 3:
            return math.nan, math.nan, len(pairs)
        rho, p = sps.spearmanr([x for x, _ in pairs], [y for _, y in pairs])
        return float(rho), float(p), len(pairs)

    res = [r["res"] for r in rows]
    out["position"] = corr([r["position"] for r in rows], res)
    out["sm_clock"] = corr([r["sm_mhz"] for r in rows], res)
    out["temperature"] = corr([r["temp_c"] for r in rows], res)
    heavy = [r["res"] for r in rows if medians.get(r["after"] or "", 0.0) >= HEAVY_BEFORE_US]
    light = [r["res"] for r in rows if 0 < medians.get(r["after"] or "", 0.0) < HEAVY_BEFORE_US]
    out["after_heavy"] = (
        (float(np.mean(heavy)) * 100, float(np.mean(np.asarray(heavy) > 0.03)) * 100, len(heavy),
         float(np.mean(light)) * 100, float(np.mean(np.asarray(light) > 0.03)) * 100, len(light))
        if heavy and light else None
    )  # fmt: skip
    first = [r["res"] for r in rows if r["first"]]
    later = [r["res"] for r in rows if not r["first"]]
    out["first_process"] = (
        (float(np.mean(first)) * 100, float(np.mean(later)) * 100) if first and later else None
    )
    return out


def _pct(x: float) -> str:
    return "–" if not math.isfinite(x) else f"{x * 100:.2f}"


def markdown(results: Sequence[Results], extra: dict[str, Sequence[Results]] | None = None) -> str:
    """The per-point table of the levels, then the causes."""
    lv = sorted(
        decompose(results),
        key=lambda v: -(v.between_rounds if v.between_rounds == v.between_rounds else 0),
    )
    alt = {k: {v.key: v for v in decompose(r)} for k, r in (extra or {}).items()}
    machines = sorted({str(m.get("machine")) for r in results for m in r.rounds})
    head = "| point | median µs | within % | alloc % | process % | machine % | slow rounds % | rounds |"
    sep = "|---|---:|---:|---:|---:|---:|---:|---:|"
    for name in alt:
        head += f" {name}: process % |"
        sep += "---:|"
    lines = [
        f"{len(machines)} machine(s), {sum(len(r.rounds) for r in results)} rounds. "
        "Relative sd of log time at each level (what the level adds beyond the one below).",
        "", head, sep,
    ]  # fmt: skip
    for v in lv:
        row = (f"| {key_str(v.key)} | {v.median_us:.2f} | {_pct(v.within)} | {_pct(v.alloc)} | "
               f"{_pct(v.process)} | {_pct(v.machine)} | {v.slow * 100:.0f} | {v.rounds} |")  # fmt: skip
        for name in alt:
            o = alt[name].get(v.key)
            row += f" {_pct(o.process) if o else '–'} |"
        lines.append(row)
    med = {
        f: float(np.nanmedian([getattr(v, f) for v in lv]))
        for f in ("within", "alloc", "process", "machine")
    }
    lines += [
        "",
        "Median over points: " + ", ".join(f"{k} {_pct(x)} %" for k, x in med.items()),
        "",
    ]
    thr = sum(bool(r.get("throttled")) for res in results for p in res.points for r in p["rounds"])
    again = sum(
        int(r.get("remeasured", 0)) for res in results for p in res.points for r in p["rounds"]
    )
    lines.append(f"Point-rounds re-measured for a clock under the floor: {again}; still "
                 f"throttled and left out: {thr}.")  # fmt: skip
    lines.append("")
    c = causes(results)
    lines.append("Causes (Spearman ρ of a round's residual against it, p, rounds):")
    for name in ("position", "sm_clock", "temperature"):
        rho, p, n = c[name]
        lines.append(f"- {name}: ρ = {rho:.3f}, p = {p:.2g}, n = {n}")
    if c["after_heavy"]:
        h, hs, hn, lt, ls, ln = c["after_heavy"]
        lines.append(
            f"- after a point of >= {HEAVY_BEFORE_US:.0f} µs a call: mean residual {h:+.2f} %, "
            f"{hs:.0f} % of rounds > 3 % slow (n = {hn}); after a lighter point {lt:+.2f} %, "
            f"{ls:.0f} % (n = {ln})"
        )
    if c["first_process"]:
        f, later = c["first_process"]
        lines.append(
            f"- first process of a machine: mean residual {f:+.2f} %, later {later:+.2f} %"
        )
    return "\n".join(lines) + "\n"
