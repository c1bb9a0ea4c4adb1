"""The noise decomposition (ninfer-regress noise --from) recovers known levels."""

from __future__ import annotations

import copy
from pathlib import Path

import numpy as np

from ninfer import record
from ninfer.regress.noise import decompose, markdown

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = record.load_results(ROOT / "baselines/h200/all.json").doc


def _machine(rng: np.random.Generator, name: str, offset: float, procs: int, allocs: int,
             sd: dict[str, float]) -> record.Results:  # fmt: skip
    doc = copy.deepcopy(TEMPLATE)
    doc.pop("baseline")
    doc["points"] = doc["points"][:6]
    doc["rounds"] = [{"index": p * allocs + a, "process": p, "alloc": a, "machine": name}
                     for p in range(procs) for a in range(allocs)]  # fmt: skip
    for pt in doc["points"]:
        pt.pop("noise", None)
        pt["rounds"] = []
        for p in range(procs):
            lp = offset + rng.normal(0, sd["process"])
            for a in range(allocs):
                la = lp + rng.normal(0, sd["alloc"])
                s = pt["median_us"] * np.exp(la + rng.normal(0, sd["within"], 20))
                pt["rounds"].append({"round": p * allocs + a, "samples_us": [float(x) for x in s]})
        record.summarize(pt)
    return record.Results(Path(f"{name}.json"), doc)


def test_levels_are_recovered() -> None:
    rng = np.random.default_rng(1)
    sd = {"within": 0.01, "alloc": 0.004, "process": 0.02}
    recs = [_machine(rng, f"m{i}", rng.normal(0, 0.03), 12, 3, sd) for i in range(6)]
    lv = decompose(recs)
    assert len(lv) == 6
    med = {
        f: float(np.median([getattr(v, f) for v in lv]))
        for f in ("within", "alloc", "process", "machine")
    }
    assert abs(med["within"] - 0.01) < 0.002
    assert abs(med["process"] - 0.02) < 0.006
    assert med["alloc"] < 0.008
    assert 0.01 < med["machine"] < 0.06
    text = markdown(recs)
    assert (
        "| point | median µs | within % | alloc % | process % | machine % | slow rounds % |" in text
    )
    assert "6 machine(s)" in text
