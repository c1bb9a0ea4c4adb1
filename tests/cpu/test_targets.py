"""``ninfer-bench targets``: which points each of issue 26's targets holds, and its bound."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ninfer.bench import cli, targets

ROOT = Path(__file__).resolve().parents[2]
RECORD = ROOT / "experiments/issue26/peers_t1_16_h200.json"


def _pt(q: str, n: int, k: int, t: int, us: float, **peers: float) -> dict[str, Any]:
    return {
        "qtype": q, "policy": "a16", "n": n, "k": k, "t": t, "route": "dec_q", "median_us": us,
        "metrics": {"READ_pct": 0.0},
        "peers": {name: {"median_us": v} for name, v in peers.items()},
    }  # fmt: skip


def _states(points: list[dict[str, Any]], key: str) -> list[str]:
    lines, _ = targets.rows(points)
    return [
        line.split(" | ")[-1].rstrip(" |") for line in lines[2:] if line.startswith(f"| {key} ")
    ]


def test_read_targets_hold_the_big_weights_at_their_t() -> None:
    # The weight's bytes decide (from its format and shape): Q4 [131072,2048] is 143 MB,
    # under the bound; the others 357 MB and more.
    pts = [
        _pt("q6", 248320, 5120, 1, 1.0),
        _pt("q5", 248320, 5120, 1, 1.0),
        _pt("q4", 131072, 2048, 1, 1.0),
        _pt("q4", 131072, 5120, 16, 1.0),
        _pt("q4", 131072, 5120, 4, 1.0),
    ]
    pts[0]["metrics"]["READ_pct"] = 85.0
    pts[1]["metrics"]["READ_pct"] = 84.9
    pts[3]["metrics"]["READ_pct"] = 80.0
    assert _states(pts, "2.1") == ["met", "**missed**"]  # the 256 MB bound and T = 1 only
    assert _states(pts, "2.2") == ["met"]


def test_the_plain_read_bound_needs_the_read_peer() -> None:
    pts = [
        _pt("q4", 14336, 5120, 1, 13.0, read=10.0),
        _pt("w8", 14336, 5120, 1, 13.1, read=10.0),
        _pt("q5", 14336, 5120, 1, 13.0, cublas=40.0),
        _pt("q4", 14336, 5120, 4, 13.0, read=1.0),
    ]
    assert _states(pts, "2.3") == ["met", "**missed**", "no data"]
    _, counts = targets.rows(pts)
    assert counts["2.3"] == (1, 1, 1)


def test_cublas_targets_by_format_t_and_size() -> None:
    pts = [
        _pt("q4", 5120, 17408, 16, 10.0, cublas=15.9),  # 47 MB: 3.1 met, 3.2 missed
        _pt("nvfp4", 14336, 5120, 1, 10.0, cublas=16.0),  # 41 MB: both met
        _pt("q4", 6144, 5120, 1, 10.0, cublas=10.0),  # 17 MB: 3.1 only
        _pt("q5", 6144, 5120, 16, 10.0, cublas=9.9),  # 3.1 missed; Q5 is not 4-bit
        _pt("bf16", 6144, 5120, 1, 10.0, cublas=1.0),  # BF16 is not held
        _pt("w8", 14336, 5120, 17, 10.0, cublas=1.0),  # T = 17: neither
        _pt("w8", 14336, 5120, 256, 10.0, cublas=10.0),  # 78 MB: 5.1 met
        _pt("q4", 3456, 1152, 1024, 10.0, cublas=8.9),  # 2 MB: 5.2 missed
        _pt("q4", 3456, 1152, 1025, 10.0, cublas=1.0),  # T = 1025: not held
    ]
    assert _states(pts, "3.1") == ["met", "met", "met", "**missed**"]
    assert _states(pts, "3.2") == ["**missed**", "met"]
    assert _states(pts, "5.1") == ["met"]
    assert _states(pts, "5.2") == ["**missed**"]


def test_a_point_in_two_records_counts_once() -> None:
    # The copy with the most peers beside it, the first of those.
    a = _pt("q4", 14336, 5120, 1, 13.0, read=10.0)
    _, counts = targets.rows([a, {**a, "median_us": 99.0}])
    assert counts["2.3"] == (1, 0, 0)
    _, counts = targets.rows([_pt("q4", 14336, 5120, 1, 99.0), a])
    assert counts["2.3"] == (1, 0, 0)


def test_the_command_prints_the_records_and_exits_by_the_misses(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["targets", str(RECORD)]) == 1  # the heads miss 2.1 there
    out = capsys.readouterr().out
    assert "commit 2554fad" in out and "vm:554a9986" in out
    assert "2.1 T = 1, every format, weights of 256 MB or more: READ_% ≥ 85: met on 0 of 2" in out
    assert "2.3 [14336,5120] at T = 1" in out and "2 without the peer it needs" in out
    # Only what is met: exit 0; a held point without its peer is not met: exit 1.
    doc = json.loads(RECORD.read_text())
    doc["points"] = [p for p in doc["points"] if p["n"] == 6144 and p["t"] == 1]
    path = tmp_path / "met.json"
    path.write_text(json.dumps(doc))
    assert cli.main(["targets", str(path)]) == 0
    for p in doc["points"]:
        p["peers"].pop("cublas")
    path.write_text(json.dumps(doc))
    assert cli.main(["targets", str(path)]) == 1
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    assert cli.main(["targets", str(bad)]) == 2
    assert "not a readable JSON file" in capsys.readouterr().err
