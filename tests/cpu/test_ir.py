"""``ninfer-bench ir`` without a GPU: CuPy's NVRTC where it loads (the runtime's compiler),
else nvcc; nvdisasm for the SASS. Each arch is compiled once per module (~8 s each)."""

from __future__ import annotations

import csv
import hashlib
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from ninfer.bench import cli, ir
from ninfer.formats.qtype import QType
from ninfer.policy import Policy
from ninfer.routes import QTYPE_ID, Problem, select, table_for
from ninfer.runtime.cupy_env import gpu_available


def _missing() -> str:
    if ir.nvrtc_version() is None and ir.tool("nvcc") is None:
        return "nvcc not found (nor CuPy's NVRTC): cannot compile kernels here"
    if ir.tool("nvdisasm") is None:
        return "nvdisasm not found: no SASS (pip install nvidia-cuda-nvdisasm)"
    return ""


MISSING = _missing()
needs_tools = pytest.mark.skipif(bool(MISSING), reason=MISSING)
ARCHS = ("sm_80", "sm_90", "sm_120")


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Path]:
    cache: dict[str, Path] = {}

    def get(arch: str) -> Path:
        if arch not in cache:
            out = tmp_path_factory.mktemp(arch) / "ir"
            assert cli.main(["ir", "--arch", arch, "--out", str(out)]) == 0
            cache[arch] = out
        return cache[arch]

    return get


def index(out: Path) -> list[dict[str, str]]:
    with (out / "index.tsv").open() as f:
        return list(csv.DictReader(f, delimiter="\t"))


def tree(out: Path) -> dict[str, bytes]:
    return {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}


@needs_tools
@pytest.mark.parametrize("arch", ARCHS)
def test_one_ptx_and_sass_per_instance(arch: str, built: Callable[[str], Path]) -> None:
    cc = int(arch[3:])
    # What the runtime compiles for this arch: every instance of every routed launcher.
    want = {(r.name, e) for r in table_for(cc) for e in r.launcher.instances()}
    out = built(arch)
    rows = index(out)
    assert len(rows) == len(want)
    assert {(r["route"], r["expr"]) for r in rows} == want
    assert len(list(out.rglob("*.ptx"))) == len(list(out.rglob("*.sass"))) == len(want)
    for row in rows:
        assert row["arch"] == arch and row["kernel"].startswith(row["route"] + "__")
        qt = QType[row["kernel"].split("__")[1]]  # readable: the QType name, not its id
        assert f"QT={QTYPE_ID[qt]}" in row["template_args"]
        for kind in ("ptx", "sass"):
            text = (out / row[kind]).read_text()
            assert text.strip() and row["mangled"] in text, (row[kind], row["mangled"])
            assert hashlib.sha256(text.encode()).hexdigest() == row[f"{kind}_sha256"]
            assert "/tmp" not in text and "/usr" not in text and "/*0000*/" not in text
        assert f".target sm_{cc}" in (out / row["ptx"]).read_text()
        sass = (out / row["sass"]).read_text()
        assert 0 < int(row["loop_instrs"]) < int(row["sass_instrs"]) == sass.count(";\n")
        if row["t"] != "-":  # the T the index names is routed to this very instance
            t = int(row["t"].split("-")[0].split(",")[0].rstrip("+"))
            p = Problem(qt, Policy.A16, 128, 128, t, cc)
            route = select(p)
            assert (route.name, route.launcher.instance(p)) == (row["route"], row["expr"])
    assert arch in (out / "README.md").read_text() and "diff -r" in (out / "README.md").read_text()


def test_loop_instrs_counts_the_longest_backward_branch() -> None:
    sass = """
        MOV R1, c[0x0][0x28] ;
.L_x_0:
        IADD3 R2, R2, 0x1, RZ ;
.L_x_1:
        LOP3.LUT R3, R3, R2, RZ, 0xc0, !PT ;
        ISETP.NE.AND P0, PT, R3, RZ, PT ;
    @P0 BRA `(.L_x_1) ;
        ISETP.NE.AND P1, PT, R2, 0x10, PT ;
    @P1 BRA `(.L_x_0) ;
    @P1 BRA `(.L_x_2) ;
        EXIT ;
.L_x_2:
        BRA `(.L_x_2);
"""
    # .L_x_0 ... its branch: IADD3, LOP3, ISETP, BRA, ISETP, BRA; the forward branch to
    # .L_x_2 is no loop; the self-loop at the end is one instruction
    assert ir.loop_instrs(sass) == 6
    assert ir.loop_instrs("        EXIT ;\n") == 0


@needs_tools
def test_rerun_is_byte_identical(built: Callable[[str], Path], tmp_path: Path) -> None:
    # Rewriting an earlier output in place is allowed, and the bytes come out the same.
    again = tmp_path / "again"
    shutil.copytree(built("sm_90"), again)
    (again / "sm_90" / "stale.ptx").write_text("from an older run")
    # an index from before a column was added (loop_instrs) is still an ir output
    idx = again / "index.tsv"
    idx.write_text(idx.read_text().replace("\tloop_instrs", ""))
    assert cli.main(["ir", "--arch", "90", "--out", str(again)]) == 0
    assert tree(again) == tree(built("sm_90"))


@pytest.mark.skipif(gpu_available()[0], reason="a GPU is present: its arch is the default")
def test_no_arch_without_gpu_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["ir", "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "error" in err[0] and "--arch" in err[0]


def test_no_compiler_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ir, "tool", lambda name: None)
    monkeypatch.setattr(ir, "nvrtc_version", lambda: None)
    assert cli.main(["ir", "--arch", "sm_90", "--out", str(tmp_path / "o")]) == 2
    assert "no compiler" in capsys.readouterr().err


def test_bad_arch_and_foreign_out_exit_2(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert cli.main(["ir", "--arch", "sm_75", "--out", str(tmp_path / "o")]) == 2
    assert cli.main(["ir", "--arch", "hopper", "--out", str(tmp_path / "o")]) == 2
    monkeypatch.setattr(ir, "tool", lambda name: "/bin/true")  # never reached: refused first
    (tmp_path / "mine.txt").write_text("keep me")
    assert cli.main(["ir", "--arch", "sm_90", "--out", str(tmp_path)]) == 2
    assert (tmp_path / "mine.txt").read_text() == "keep me"


@needs_tools
def test_a_dispatch_override_compiles_and_indexes_its_variant(tmp_path: Path) -> None:
    # An experiment's variant: dec_q forced with a Q4 tile the shipped rows do not have.
    # Its instances are what the override launches, named to the problems it serves.
    f = tmp_path / "variant.json"
    f.write_text(
        '{"force": "dec_q", "tuning": {"dec_q": {"tiles": {"q4": [[64, 8, 2, 2, 2, 3]]}}}}'
    )
    out = tmp_path / "ir"
    assert cli.main(["ir", "--arch", "sm_80", "--dispatch", str(f), "--out", str(out)]) == 0
    rows = index(out)
    assert {r["route"] for r in rows} == {"dec_q"}  # forced: the one route compiled
    q4 = [r for r in rows if r["qtypes"] == "Q4"]
    assert [r["expr"] for r in q4] == ["dec_q<0, 8, 2, 2, 2, 3>"]
    assert q4[0]["t"] == "1-64" and int(q4[0]["regs"]) > 0
    assert str(f) in (out / "README.md").read_text()


def test_a_bad_dispatch_override_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    f = tmp_path / "bad.json"
    f.write_text('{"force": "no_such_route"}')
    assert (
        cli.main(["ir", "--arch", "sm_90", "--dispatch", str(f), "--out", str(tmp_path / "o")]) == 2
    )
    assert "--dispatch" in capsys.readouterr().err
