"""``ninfer-bench peer-table``: the peer table of docs/perf/peers_h200.md from its record."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ninfer.bench import cli, peer_table

ROOT = Path(__file__).resolve().parents[2]
RECORD = ROOT / "docs/perf/peers_h200/peer_table.json"


@pytest.mark.parametrize(
    ("record", "count"),
    [
        (RECORD, "on 29 of 40 points"),
        (ROOT / "experiments/issue26/peers_t1_16_h200.json", "on 11 of 16 points"),
    ],
    ids=["peer_table", "t1_16"],
)
def test_the_report_prints_the_committed_table(
    record: Path, count: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["peer-table", str(record)]) == 0
    out = capsys.readouterr().out
    table = [line for line in out.splitlines() if line.startswith("|")]
    page = (ROOT / "docs/perf/peers_h200.md").read_text()
    assert "\n".join(table) in page, "peers_h200.md's table is not this record's"
    assert count in out


def test_met_is_at_most_the_best_int_peer() -> None:
    doc = json.loads(RECORD.read_text())
    p = doc["points"][0]
    p["peers"] = {"cublas": {"median_us": 1.0}, "gemlite": {"median_us": p["median_us"] * 2}}
    doc["points"] = [p, {**p, "peers": {"tinygemm": {"median_us": p["median_us"] / 2}}}]
    lines, met, missed = peer_table.rows(doc)
    assert (met, missed) == (1, 1)
    assert lines[2].endswith("| gemlite | 0.50 | met |") and "**missed**" in lines[3]


def test_a_record_without_int_peers_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = json.loads(RECORD.read_text())
    for p in doc["points"]:
        p["peers"] = {"cublas": p["peers"]["cublas"]}
    f = tmp_path / "cublas_only.json"
    f.write_text(json.dumps(doc))
    assert cli.main(["peer-table", str(f)]) == 2
    assert "no point has an int peer's time" in capsys.readouterr().err
    assert cli.main(["peer-table", str(tmp_path / "missing.json")]) == 2
