"""The run record (ninfer/record.py): schema v2, the v1 reader, atomic and incremental writes."""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path
from typing import Any

import pytest

from ninfer import record
from ninfer.formats.qtype import QType
from ninfer.policy import Policy
from ninfer.record import GpuMismatchError, ResultsError, load_baseline, load_results
from ninfer.regress.runner import merge_rounds

ROOT = Path(__file__).resolve().parents[2]
V1_RUN = ROOT / "tests/fixtures/bench_all_cublas_h200_2026-11-30.json"  # one process, v1
BASELINE = ROOT / "baselines/h200/all.json"  # 10 rounds, v2


def _doc(path: Path = BASELINE) -> dict[str, Any]:
    return dict(json.loads(path.read_text()))


def _write(tmp: Path, name: str, doc: dict[str, Any]) -> Path:
    p = tmp / name
    p.write_text(json.dumps(doc))
    return p


def test_committed_baselines_are_round_records() -> None:
    for suite, n in (("all", 68), ("qwen3_6_27b", 49), ("qwen3_6_35b_a3b", 37)):
        b = load_baseline(ROOT / f"baselines/h200/{suite}.json", "h200")
        assert b.version == 2 and len(b.points) == n
        meta = b.doc["baseline"]
        assert meta["commit"] and meta["dirty"] is False and meta["rounds"] >= 10
        assert meta["kernel_fingerprint"] == b.fingerprint
        # every round a fresh process, every point in every round, noise stored
        assert len({r["process"] for r in b.rounds}) == len(b.rounds) >= 10
        assert all(
            len(p["rounds"]) == len(b.rounds) and p["noise"]["rounds"] >= 10 for p in b.points
        )
        md = (ROOT / f"baselines/h200/{suite}.md").read_text()
        assert f"`{record.pair_digest(b.doc)}`" in md, "the .md names its .json's digest"


def test_v1_reads_as_one_round() -> None:
    r = load_results(V1_RUN)
    assert r.version == 1 and len(r.rounds) == 1 and len(r.points) == 68
    assert all(len(p["rounds"]) == 1 and len(p["rounds"][0]["samples_us"]) == 20 for p in r.points)


def test_schema_enums_match_the_package() -> None:
    point = record.json_schema()["$defs"]["point"]["properties"]
    assert set(point["qtype"]["enum"]) == {q.value for q in QType}
    assert set(point["policy"]["enum"]) == {p.value for p in Policy}


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda d: d.pop("timing"), "'timing' is a required property"),
        (lambda d: d.pop("rounds"), "'rounds' is a required property"),
        (lambda d: d["points"][0].pop("rounds"), "points/0"),
        (lambda d: d["points"][0]["rounds"][0].update(samples_us=[]), "points/0/rounds/0/samples_us"),
        (lambda d: d["points"][3]["rounds"][1].update(samples_us=[1.0, -2.0]), "points/3/rounds/1/samples_us/1"),
        (lambda d: d["points"][0].update(qtype="q3"), "points/0/qtype"),
        (lambda d: d["environment"].update(sms="132"), "environment/sms"),
        (lambda d: d["points"].append(copy.deepcopy(d["points"][0])), "more than once"),
        (lambda d: d["points"][2]["rounds"][0].update(round=99), "round 99 is not one of"),
        (lambda d: d["points"][2]["rounds"][0]["samples_us"].append(float("nan")), "expected finite"),
        (lambda d: d.update(schema="other"), "expected schema 'ninfer.results'"),
        (lambda d: d.update(schema_version=3), "schema_version 3 is not one"),
    ],
)  # fmt: skip
def test_malformed_files_are_rejected(tmp_path: Path, mutate: Any, message: str) -> None:
    d = _doc()
    mutate(d)
    p = tmp_path / "bad.json"
    p.write_text(json.dumps(d, allow_nan=True))
    with pytest.raises(ResultsError) as e:
        load_results(p)
    assert message in str(e.value)


def test_unreadable_huge_and_deep_files(tmp_path: Path) -> None:
    with pytest.raises(ResultsError, match="no such file"):
        load_results(tmp_path / "missing.json")
    (tmp_path / "x.json").write_text("{not json")
    with pytest.raises(ResultsError, match="not a readable JSON"):
        load_results(tmp_path / "x.json")
    (tmp_path / "deep.json").write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(ResultsError, match=r"not a readable JSON|expected a JSON object"):
        load_results(tmp_path / "deep.json")
    big = tmp_path / "big.json"
    with big.open("wb") as f:
        f.truncate(record.MAX_FILE_BYTES + 1)
    with pytest.raises(ResultsError, match="expected a results file under"):
        load_results(big)


def test_other_gpu_and_mig_and_contract_are_refused(tmp_path: Path) -> None:
    base = load_results(BASELINE)
    other = _doc()
    other["environment"].update(gpu_name="NVIDIA GeForce RTX 5090", gpu_key="rtx5090")
    p = _write(tmp_path, "o.json", other)
    with pytest.raises(GpuMismatchError, match="expected a h200 record"):
        load_results(p, expect_gpu="h200")
    with pytest.raises(GpuMismatchError, match="GPU model differs"):
        record.check_comparable(base, load_results(p))
    mig = _doc()
    mig["environment"].update(gpu_name="NVIDIA H200 MIG 1g.18gb", sms=16)
    with pytest.raises(GpuMismatchError, match="GPU differs in sms: baseline 132 vs new 16"):
        record.check_comparable(base, load_results(_write(tmp_path, "mig.json", mig)))
    direct = _doc()
    direct["timing"]["execution"] = "direct"
    with pytest.raises(ResultsError, match="timing contract differs in 'execution'"):
        record.check_comparable(base, load_results(_write(tmp_path, "d.json", direct)))


def test_baseline_needs_a_reason(tmp_path: Path) -> None:
    with pytest.raises(ResultsError, match="'baseline' block"):
        load_baseline(V1_RUN)
    d = _doc()
    d["baseline"]["reason"] = ""
    with pytest.raises(ResultsError, match="baseline/reason"):
        load_baseline(_write(tmp_path, "b.json", d))


def test_write_is_atomic_and_checked(tmp_path: Path) -> None:
    target = tmp_path / "r.json"
    good = _doc()
    record.write_json(target, good)
    before = target.read_bytes()
    bad = _doc()
    bad["points"][0]["qtype"] = "q3"
    with pytest.raises(ResultsError):
        record.write_json(target, bad)
    assert target.read_bytes() == before  # the old record is untouched
    assert sorted(os.listdir(tmp_path)) == ["r.json"]  # no temporary left behind


def test_pair_rolls_back_when_the_second_file_fails(tmp_path: Path) -> None:
    js, md = tmp_path / "all.json", tmp_path / "all.md"
    record.write_pair(js, _doc(), md, "first\n")
    old = js.read_bytes()
    md.unlink()
    md.mkdir()  # renaming a file over a folder fails: the second rename of the pair
    (md / "x").write_text("keep")
    changed = _doc()
    changed["baseline"]["reason"] = "a second, different reason for the test"
    with pytest.raises(OSError):
        record.write_pair(js, changed, md, "second\n")
    assert js.read_bytes() == old
    assert sorted(p.name for p in tmp_path.iterdir()) == ["all.json", "all.md"]


def test_rounds_merge_and_a_crashed_round_keeps_its_points(tmp_path: Path) -> None:
    base = _doc()
    one = copy.deepcopy(base)
    one["rounds"] = one["rounds"][:1]
    for p in one["points"]:
        p["rounds"] = [dict(p["rounds"][0], round=0)]
    crashed = copy.deepcopy(one)
    crashed["points"] = crashed["points"][:7]  # the process died after 7 points
    paths = [_write(tmp_path, "r0.json", one), _write(tmp_path, "r1.json", crashed)]
    (tmp_path / "r2.json").write_text('{"schema": "ninfer.res')  # died mid-write (not ours)
    paths.append(tmp_path / "r2.json")
    merged = merge_rounds(paths, tmp_path / "results.json", ["test"])
    assert merged is not None and len(merged.rounds) == 2
    counts = [len(p["rounds"]) for p in merged.points]
    assert counts[:7] == [2] * 7 and counts[7:] == [1] * 61
    assert [r["round"] for r in merged.points[0]["rounds"]] == [0, 1]
    assert load_results(tmp_path / "results.json").doc == merged.doc


def test_one_point_key_for_bench_and_regress() -> None:
    from ninfer.bench.points import BenchPoint

    k = BenchPoint(QType.Q4, Policy.A16, 6144, 5120, 16).key
    assert isinstance(k, record.PointKey) and str(k) == "q4 a16 [6144,5120] T=16"
    assert k == record.point_key({"qtype": "q4", "policy": "a16", "n": 6144, "k": 5120, "t": 16})


def test_writer_fields_match_the_schema() -> None:
    """The writer (ninfer.bench.run) names every field the schema requires of a point."""
    import inspect

    from ninfer.bench import run

    src = inspect.getsource(run)
    req = record.json_schema()["$defs"]["point"]["required"]
    for field in [f for f in req if f not in ("median_us", "min_us", "p95_us", "rounds")]:
        assert f'"{field}"' in src, field
    for field in record.json_schema()["$defs"]["point_round"]["required"]:
        assert f'"{field}"' in src, field


def test_atomic_writes_get_the_usual_file_mode(tmp_path: Path) -> None:
    """Not mkstemp's 0600: a results file or report stays readable like any other file."""
    out = tmp_path / "r.md"
    record.write_text_atomic(out, "x\n")
    umask = os.umask(0)
    os.umask(umask)
    assert out.stat().st_mode & 0o777 == 0o666 & ~umask


def test_a_record_with_too_many_samples_is_refused_before_the_schema(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    doc = json.loads((ROOT / "baselines/h200/qwen3_6_35b_a3b.json").read_text())
    n = sum(len(r["samples_us"]) for p in doc["points"] for r in p["rounds"])
    monkeypatch.setattr(record, "MAX_SAMPLES", n - 1)
    p = tmp_path / "big.json"
    p.write_text(json.dumps(doc))
    with pytest.raises(ResultsError, match=f"{n:,} samples, expected at most {n - 1:,}"):
        load_results(p)
