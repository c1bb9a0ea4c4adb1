"""``ninfer-bench cliffs``: issue 26's no-cliff rules over sweeps, on synthetic and
committed records."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ninfer.bench import cli, cliffs

ROOT = Path(__file__).resolve().parents[2]


def _sweep(times: dict[int, float], route: str = "dec_q") -> list[dict[str, Any]]:
    return [
        {
            "qtype": "q4",
            "policy": "a16",
            "n": 6144,
            "k": 5120,
            "t": t,
            "median_us": us,
            "route": route,
        }
        for t, us in times.items()
    ]


def test_a_smooth_sweep_has_none() -> None:
    assert cliffs.find(_sweep({1: 10.0, 2: 10.1, 3: 10.0, 4: 10.4, 8: 11.0, 16: 12.9})) == []


def test_a_larger_t_faster_than_a_smaller_one_names_the_worst_pair() -> None:
    # T = 16 on a slow route, T = 17 ... 64 on a faster one: one finding, the fastest.
    found = cliffs.find(_sweep({8: 30.0, 16: 64.0, 17: 47.0, 32: 46.2, 64: 46.5}))
    faster = [c for c in found if c.kind == "faster"]
    assert [(c.t_from, c.t_to) for c in faster] == [(16, 32)]
    steps = [(c.t_from, c.t_to) for c in found if c.kind == "step"]
    assert steps == [(8, 16), (16, 17)]  # +113 % and -27 %
    # Within 3 % is not a cliff.
    assert cliffs.find(_sweep({1: 10.0, 2: 9.75})) == []
    assert [c.kind for c in cliffs.find(_sweep({1: 10.0, 2: 9.65}))] == ["faster"]


def test_shapes_and_formats_are_separate_sweeps() -> None:
    a = _sweep({1: 10.0, 2: 10.2})
    b = [{**p, "qtype": "w8", "median_us": 5.0} for p in a]
    assert cliffs.find(a + b) == []


def test_the_committed_q4_sweep_shows_dec_q_tile_edge(capsys: pytest.CaptureFixture[str]) -> None:
    """`git show a69f8e5:docs/perf/decode_h200.md`, target 6: Q4 [6144,5120] +23.7 % at T 8 -> 9
    (b9c0e3b)."""
    rec = ROOT / "docs/perf/decode_h200/sweep_q4.json"
    assert cli.main(["cliffs", str(rec)]) == 1
    out = capsys.readouterr().out
    assert "q4 a16 [6144,5120]: T 8 -> 9: 18.26 -> 22.58 us (+23.7%, step; dec_q)" in out
    assert out.strip().endswith("1 cliff(s) over 1 shape(s), 64 points")


def test_an_unreadable_record_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["cliffs", str(tmp_path / "missing.json")]) == 2
    assert "ninfer-bench cliffs: error" in capsys.readouterr().err
