"""Dispatch overrides (ninfer-bench --dispatch): what they build, and what they refuse."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ninfer import Policy, QType, UnsupportedProblem
from ninfer.bench import cli
from ninfer.bench.override import OverrideError, dispatcher_for, load
from ninfer.ops.dispatch import DEFAULT
from ninfer.routes import Problem, dec_q
from ninfer.routes.dec_q import Tile
from ninfer.routes.dq_rs import DqRsTuning
from ninfer.routes.table import TABLE_DIR


def _p(t: int, n: int = 6144, k: int = 5120, q: QType = QType.Q4, cc: int = 90) -> Problem:
    return Problem(q, Policy.A16, n, k, t, cc)


def test_force_sends_every_problem_to_one_route() -> None:
    d = dispatcher_for({"force": "dq_gemm"})
    for cc in (80, 90, 120):
        for t in (1, 16, 64, 128, 4096):
            assert d.select(_p(t, cc=cc)).name == "dq_gemm"


def test_a_forced_route_its_kernel_cannot_run_is_unsupported() -> None:
    d = dispatcher_for({"force": "dec_q"})
    assert d.select(_p(64)).name == "dec_q"
    with pytest.raises(UnsupportedProblem, match="sends Q4 N=6144 K=5120 T=65 to dec_q"):
        d.select(_p(65))
    with pytest.raises(UnsupportedProblem):
        dispatcher_for({"force": "dq_rs"}).select(_p(128, cc=120))  # sm_90a code only


def test_a_table_file_replaces_its_architectures_rows(tmp_path: Path) -> None:
    doc = json.loads((TABLE_DIR / "sm_90.json").read_text())
    for r in doc["rows"]:
        if r["route"] == "dq_rs":
            r["route"] = "dq_gemm"
    f = tmp_path / "sm_90.json"
    f.write_text(json.dumps(doc))
    d = dispatcher_for({"table": str(f)})
    assert d.select(_p(128, n=14336)).name == "dq_gemm"
    assert d.select(_p(1)).name == "dec_q"
    other = _p(128, n=14336, cc=120)
    assert d.select(other) == DEFAULT.select(other)  # other tables unchanged


def test_tuning_fields_reach_the_launchers() -> None:
    d = dispatcher_for(
        {
            "tuning": {
                "dq_rs": {"nb": 2, "stage_depths": [4]},
                "dec_q": {"tiles": {"q4": [[64, 8, 1, 8, 1, 3]]}},
            }
        }
    )
    assert d.tuning["dq_rs"] == DqRsTuning(nb=2, stage_depths=(4,))
    assert d.tuning["dec_q"].tiles[QType.Q4] == (Tile(64, 8, 1, 8, 1, 3),)
    # formats the override does not name keep their shipped rows (a W8 point of an
    # experiment on Q4 tiles failed with a KeyError before)
    assert d.tuning["dec_q"].tiles[QType.W8] == dec_q.TILES[QType.W8]
    assert set(d.tuning["dec_q"].tiles) == set(QType)


@pytest.mark.parametrize(
    ("doc", "match"),
    [
        ({}, "expected an object with keys among"),
        ({"forc": "dec_q"}, "expected an object with keys among"),
        ([], "expected an object with keys among"),
        ({"force": "gemv"}, "force: expected one of"),
        ({"force": "dec_q", "table": "x.json"}, "expected one of force and table, got both"),
        ({"table": "/nonexistent/sm_90.json"}, "table: .*No such file"),
        ({"tuning": {"gemv": {}}}, "tuning: expected route names of"),
        ({"tuning": {"dq_rs": {"nbb": 2}}}, r"tuning\.dq_rs: expected fields of"),
        ({"tuning": {"dq_rs": 2}}, r"tuning\.dq_rs: expected an object of fields"),
        ({"tuning": {"dec_q": {"tiles": {"q3": [[8, 1, 1, 1, 1, 3]]}}}}, r"tuning\.dec_q\.tiles"),
    ],
)
def test_bad_overrides_are_refused_naming_the_key(doc: Any, match: str) -> None:
    with pytest.raises(OverrideError, match=match):
        dispatcher_for(doc, "x.json")


def test_load_names_the_file(tmp_path: Path) -> None:
    f = tmp_path / "o.json"
    f.write_text("{not json")
    with pytest.raises(OverrideError, match=r"o\.json: not a readable JSON file"):
        load(f)
    f.write_text('{"force": "dq_gemm"}')
    doc, d = load(f)
    assert doc == {"force": "dq_gemm"} and d.select(_p(1)).name == "dq_gemm"


def test_the_bench_refuses_a_bad_override_before_any_gpu_work(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    f = tmp_path / "o.json"
    f.write_text('{"force": "gemv"}')
    argv = ["--qtype", "q4", "--n", "64", "--k", "128", "--t", "1", "--list", "--dispatch"]
    assert cli.main([*argv, str(f)]) == 2
    assert "force: expected one of" in capsys.readouterr().err
    assert cli.main([*argv, str(tmp_path / "none.json")]) == 2
    err = capsys.readouterr().err
    assert "--dispatch" in err and "no such file" in err
