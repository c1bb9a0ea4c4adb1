"""ninfer-bench ir-diff (ninfer/bench/ir_diff.py): two `ir` outputs' index.tsv compared."""

from __future__ import annotations

from pathlib import Path

import pytest

from ninfer.bench import cli, ir_diff

COLS = ("arch", "route", "kernel", "sass_sha256", "regs", "stack", "ldl_stl", "sass_instrs",
        "loop_instrs")  # fmt: skip


def _index(folder: Path, rows: list[tuple[str, ...]]) -> Path:
    folder.mkdir()
    lines = ["\t".join(COLS), *("\t".join(r) for r in rows)]
    (folder / "index.tsv").write_text("\n".join(lines) + "\n")
    return folder


A_ROWS = [
    ("sm_90", "dec_q", "dec_q__Q4__NT1", "aa", "75", "0", "0", "1264", "491"),
    ("sm_90", "dec_q", "dec_q__Q5__NT1", "bb", "76", "0", "0", "1392", "633"),
    ("sm_120", "dec_q", "dec_q__Q5__NT1", "cc", "93", "0", "0", "1392", "642"),
    ("sm_90", "dq_gemm", "dq_gemm__Q4", "dd", "32", "0", "0", "300", "0"),
]
B_ROWS = [
    ("sm_90", "dec_q", "dec_q__Q4__NT1", "aa2", "70", "0", "0", "1264", "512"),
    ("sm_90", "dec_q", "dec_q__Q5__NT1", "bb", "76", "0", "0", "1392", "633"),
    ("sm_120", "dec_q", "dec_q__Q5__NT1", "cc2", "96", "8", "2", "1424", "665"),
    ("sm_90", "dec_q", "dec_q__Q4__NT3", "ee", "108", "0", "0", "1400", "606"),
]


def test_changed_instances_new_spills_first_and_the_sides(tmp_path: Path) -> None:
    a = ir_diff.read_index(_index(tmp_path / "a", A_ROWS))
    b = ir_diff.read_index(_index(tmp_path / "b", B_ROWS))
    d = ir_diff.diff(a, b)
    # Q5 on sm_90 kept its SASS: not listed. The spill comes first though it sorts later.
    assert [(r["arch"], r["kernel"], r["new spill"]) for r in d["changed"]] == [
        ("sm_120", "dec_q__Q5__NT1", "yes"),
        ("sm_90", "dec_q__Q4__NT1", ""),
    ]
    spill, q4 = d["changed"]
    assert (
        spill["regs"] == "93 -> 96" and spill["LDL/STL"] == "0 -> 2" and spill["stack"] == "0 -> 8"
    )
    assert q4["regs"] == "75 -> 70" and q4["loop"] == "491 -> 512" and q4["instrs"] == "1264"
    assert d["only_a"] == [{"arch": "sm_90", "kernel": "dq_gemm__Q4"}]
    assert d["only_b"] == [{"arch": "sm_90", "kernel": "dec_q__Q4__NT3"}]


def test_a_spill_that_was_there_or_an_unknown_stack_is_not_new(tmp_path: Path) -> None:
    rows = [("sm_120", "dec_q", "k", "x", "128", "8", "2", "10", "5"),
            ("sm_90", "dec_q", "j", "x", "64", "-", "0", "10", "5")]  # fmt: skip
    later = [("sm_120", "dec_q", "k", "y", "128", "8", "2", "11", "5"),
             ("sm_90", "dec_q", "j", "y", "64", "-", "0", "11", "5")]  # fmt: skip
    d = ir_diff.diff(ir_diff.read_index(_index(tmp_path / "a", rows)),
                     ir_diff.read_index(_index(tmp_path / "b", later)))  # fmt: skip
    assert [r["new spill"] for r in d["changed"]] == ["", ""]


def test_the_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, b = _index(tmp_path / "a", A_ROWS), _index(tmp_path / "b", B_ROWS)
    assert cli.main(["ir-diff", str(a), str(b / "index.tsv")]) == 0
    out = capsys.readouterr().out
    assert out.startswith("2 of 3 instances in both differ in SASS; 1 with a new spill")
    assert "only in A: sm_90 dq_gemm__Q4" in out and "only in B: sm_90 dec_q__Q4__NT3" in out


def test_a_folder_that_is_not_an_ir_output_is_an_error(tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "index.tsv").write_text("arch\tkernel\nsm_90\tk\n")
    good = _index(tmp_path / "a", A_ROWS)
    assert cli.main(["ir-diff", str(good), str(bad)]) == 2
    err = capsys.readouterr().err
    assert "bad/index.tsv: expected index.tsv rows with columns" in err
    assert cli.main(["ir-diff", str(good), str(tmp_path / "none")]) == 2
    assert "none: expected an `ninfer-bench ir --out` folder" in capsys.readouterr().err


def test_the_columns_read_are_the_ones_ir_writes() -> None:
    from ninfer.bench import ir

    assert set(COLS) == ir_diff.NEED <= set(ir.COLUMNS)
