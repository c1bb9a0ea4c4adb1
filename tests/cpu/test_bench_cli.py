"""ninfer-bench without a GPU: usage, --list counts, a clear exit 2 for a point."""

from __future__ import annotations

from pathlib import Path

import pytest

from ninfer.bench.cli import main
from ninfer.runtime.cupy_env import gpu_available


def test_no_arguments_prints_usage(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 2
    assert "usage: ninfer-bench" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("suite", "count"), [("all", 68), ("qwen3_6_27b", 49), ("qwen3_6_35b_a3b", 37)]
)
def test_list_counts(suite: str, count: int, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--suite", suite, "--list"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[-1] == str(count)
    assert len(lines) == count + 1


def test_sweep_list(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--qtype", "q4", "--n", "64", "--k", "128", "--sweep", "1:8:2", "--list"]) == 0
    assert capsys.readouterr().out.strip().splitlines()[-1] == "4"


@pytest.mark.parametrize(
    ("argv", "msg"),
    [
        (["--qtype", "q4", "--n", "64", "--k", "128"], "exactly one of --t and --sweep"),
        (["--qtype", "q4", "--t", "1"], "needs --n --k"),
        (["--suite", "all", "--t", "4"], "--suite/--suite-file take no"),
        (
            ["--suite", "all", "--suite-file", "docs/perf/decode_h200/decode_14336.yaml"],
            "one of --suite and --suite-file",
        ),
        (
            ["--qtype", "q4", "--n", "64", "--k", "128", "--sweep", "1:8", "--profile"],
            "exactly one point",
        ),
    ],
)
def test_usage_errors_exit_2(argv: list[str], msg: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    assert msg in capsys.readouterr().err


def test_single_point_without_gpu_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    ok, _ = gpu_available()
    if ok:
        pytest.skip("a GPU is present: this checks the no-GPU path")
    assert main(["--qtype", "q4", "--n", "4096", "--k", "5120", "--t", "1"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("ninfer-bench: error:") and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize(
    ("name", "count"), [("decode_14336", 21), ("decode_heads", 9), ("decode_q4_6144", 3)]
)
def test_suite_file_lists_the_decode_tables(
    name: str, count: int, capsys: pytest.CaptureFixture[str]
) -> None:
    path = Path(__file__).resolve().parents[2] / "docs" / "perf" / "decode_h200" / f"{name}.yaml"
    assert main(["--suite-file", str(path), "--list"]) == 0
    assert capsys.readouterr().out.strip().splitlines()[-1] == str(count)


def test_suite_file_name_must_match_its_stem(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    f = tmp_path / "mine.yaml"
    f.write_text(
        "suite: other\npolicy: a16\nt_classes: {d: [1]}\n"
        "entries:\n  - {label: a, qtype: q4, n: 64, k: 128, t_class: d}\n"
    )
    assert main(["--suite-file", str(f), "--list"]) == 2
    assert "expected 'mine' (the file name)" in capsys.readouterr().err


def test_tinygemm_is_a_peer_of_q4_only() -> None:
    from ninfer.bench.peers import PEERS, applies

    assert "tinygemm" in PEERS and "cublas" in PEERS
    assert applies("tinygemm", "q4")
    assert not any(applies("tinygemm", q) for q in ("q5", "q6", "w8", "nvfp4", "bf16"))
    assert all(applies("cublas", q) for q in ("q4", "q5", "q6", "w8", "nvfp4", "bf16"))


def test_peer_choices_parse() -> None:
    from ninfer.bench.cli import build_parser

    args = build_parser().parse_args(["--peer", "tinygemm", "--peer", "cublas"])
    assert args.peer == ["tinygemm", "cublas"]


def test_the_streamed_rows_line_up_with_the_header() -> None:
    from ninfer.bench.run import COLUMNS, _fmt_header, _fmt_row, _widths

    row: dict[str, object] = {k: 123.4567 for k, _ in COLUMNS}  # as wide as real values
    row.update(label="27b.attn_qkv", qtype="q4", policy="a16", N=248320, K=5120, T=1024)
    for extra in ([], ["delta_pct", "cublas_us", "speedup_vs_cublas"]):
        head, line = _fmt_header(extra), _fmt_row({**row, "cublas_us": 3.25}, extra)
        assert len(head) == len(line)
        at = 0
        for w in _widths(extra):  # each column: a filled cell in both lines, then a gap
            assert head[at : at + w].strip() and line[at : at + w].strip()
            assert head[at + w : at + w + 1] in ("", " ") and line[at + w : at + w + 1] in ("", " ")
            at += w + 1
