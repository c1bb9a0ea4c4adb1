"""ninfer-bench ncu-table (ninfer/bench/ncu_page.py) on real Nsight Compute pages
(tests/fixtures/ncu/, README there): the figures the perf reports copy from them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ninfer.bench import cli, ncu_page

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "ncu"
DQ_GEMM = FIX / "dq_gemm_q4_3456x1152_T128_3de5b04.txt"
DEC_Q = FIX / "dec_q_q6_248320x5120_T1_c04c9ec.txt"
STALLS = FIX / "dq_wgmma_stalls_q4_14336x5120_T128.txt"


def test_a_call_of_two_kernels_gives_two_rows_in_the_page_order() -> None:
    ks = ncu_page.read(DQ_GEMM)
    assert [k.short_name for k in ks] == ["dq_gemm<0>", "nvjet_sm90_tst_72x64_64x12_4x2_h_bz_TNN"]
    assert [(k.grid, k.block, k.cc) for k in ks] == [
        ((216, 3, 1), (256, 1, 1), "9.0"),
        ((8, 12, 1), (384, 1, 1), "9.0"),
    ]


def test_the_figures_are_the_pages_own() -> None:
    # Each value below is in the page as printed (thousands commas and all).
    dec, gemm = ncu_page.rows([DQ_GEMM])
    assert dec["µs"] == 4.83 and gemm["µs"] == 6.82
    assert dec["warp instr."] == 1_520_640 and dec["registers"] == 32
    assert gemm["registers"] == 168 and gemm["occupancy % (theor.)"] == 18.75
    assert dec["eligible / sched."] == 1.65 and dec["active / sched."] == 7.8
    assert dec["issue slots %"] == 28.39 and dec["spill requests"] == 0
    (q6,) = ncu_page.rows([DEC_Q])
    assert q6["kernel"] == "dec_q<2, 1, 1, 1, 8, 3>" and q6["grid"] == "15520x1x1"
    assert q6["µs"] == 400.9 and q6["DRAM %"] == 51.65 and q6["warp instr."] == 272_981_280


def test_every_column_is_found_in_a_full_page() -> None:
    for row in ncu_page.rows([DQ_GEMM, DEC_Q]):
        missing = [h for h, _, _ in ncu_page.COLUMNS if row[h] is None]
        assert not missing, (row["page"], row["kernel"], missing)


def test_advice_paragraphs_are_not_metrics() -> None:
    # OPT / INF / WRN paragraphs and their wrapped lines sit inside the sections: the
    # first section's rows are exactly the table's, though an OPT paragraph follows it.
    dec = ncu_page.read(DQ_GEMM)[0]
    sol = [name for section, name in dec.metrics if section == "GPU Speed Of Light Throughput"]
    assert sol == [
        "DRAM Frequency", "SM Frequency", "Elapsed Cycles", "Memory Throughput",
        "DRAM Throughput", "Duration", "L1/TEX Cache Throughput", "L2 Cache Throughput",
        "SM Active Cycles", "Compute (SM) Throughput",
    ]  # fmt: skip
    for k in ncu_page.read(DQ_GEMM):
        for section, name in k.metrics:
            assert not name.startswith(("OPT", "INF", "WRN", "Est.")), (section, name)


def test_a_word_value_and_a_unitless_value() -> None:
    dec = ncu_page.read(DQ_GEMM)[0]
    assert dec.metrics[("Launch Statistics", "Cluster Scheduling Policy")] == ("", "PolicySpread")
    assert dec.metrics[("Launch Statistics", "Grid Size")] == ("", "648")
    assert dec.value("Launch Statistics", "Cluster Scheduling Policy") is None
    assert dec.value("No Such Section", "Duration") is None


def test_a_file_without_a_kernel_is_an_error_naming_it(tmp_path: Path) -> None:
    page = tmp_path / "ncu_q4_1x1_T1.txt"
    page.write_text("==PROF== Connected to process 1\n==ERROR== the profiled process failed\n")
    with pytest.raises(ncu_page.NcuPageError, match=r"ncu_q4_1x1_T1\.txt: expected an `ncu"):
        ncu_page.read(page)


def test_the_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["ncu-table", str(DQ_GEMM), str(DEC_Q)]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].startswith("| page")
    assert "dq_gemm<0>" in out and "1,520,640" in out and "272,981,280" in out
    assert cli.main(["ncu-table", "--json", str(DEC_Q)]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert row["page"] == DEC_Q.stem and row["registers"] == 72
    missing = tmp_path / "none.txt"
    assert cli.main(["ncu-table", str(missing)]) == 2
    assert "none.txt: expected a readable Nsight Compute page" in capsys.readouterr().err


def test_rows_are_cut_at_the_rules_columns() -> None:
    # A name as wide as its column sits one space from a unit as wide as its own: only the
    # rule's columns tell them apart. A two-run rule (between advice paragraphs) opens no
    # table.
    page = "\n".join([
        "  k (1, 1, 1)x(32, 1, 1), Context 1, Stream 7, Device 0, CC 9.0",
        "    Section: Launch Statistics",
        "    -------------------- --------------- ------------",
        "    Metric Name              Metric Unit Metric Value",
        "    -------------------- --------------- ------------",
        "    Registers Per Thread register/thread           72",
        "    Block Size                                     32",
        "    -------------------- --------------- ------------",
        "    ----- ---------------------------------------------",
        "    OPT   Est. Speedup: 9.9%",
        "    Uncoalesced Rows                              999",
    ])  # fmt: skip
    (k,) = ncu_page.parse(page)
    assert k.metrics == {
        ("Launch Statistics", "Registers Per Thread"): ("register/thread", "72"),
        ("Launch Statistics", "Block Size"): ("", "32"),
    }


def test_the_stall_reasons_of_a_page_that_asked_for_them() -> None:
    # The page's "Command line profiler metrics" (tools/device.sh ncufull's --metrics):
    # the three longest waits, the issue itself ("selected", 1.00 here) left out.
    (k,) = ncu_page.read(STALLS)
    stalls = k.stalls()
    assert set(stalls) == set(ncu_page.STALL_REASONS) - {"selected"}
    assert stalls["long_scoreboard"] == 1.15 and stalls["wait"] == 1.14
    (row,) = ncu_page.rows([STALLS])
    assert (
        row["top stalls (cycles / issue)"]
        == "long_scoreboard 1.15, wait 1.14, short_scoreboard 0.71"
    )
    assert row["µs"] is None  # this page has no Speed Of Light section: "—", not a guess
    assert ncu_page.rows([DEC_Q])[0]["top stalls (cycles / issue)"] is None


def test_the_device_step_asks_for_every_stall_reason_the_reader_knows() -> None:
    # tools/device.sh ncufull passes STALL_METRICS to ncu; the fixture page (an earlier
    # call that asked for the same metrics by name) has each of them.
    names = {name for _, name in ncu_page.read(STALLS)[0].metrics}
    assert set(ncu_page.STALL_METRICS.split(",")) <= names
    step = (Path(__file__).resolve().parents[2] / "tools" / "device.sh").read_text()
    assert "ncu_page import STALL_METRICS" in step and "ncu-table" in step


def test_units_are_converted_to_the_headings(tmp_path: Path) -> None:
    # Nsight Compute scales units to the value: a long kernel's Duration in ms, a clock in
    # Mhz, a count in Kinst (a page of an earlier call printed "Duration ms 1.10").
    page = "\n".join([
        "  k (1, 1, 1)x(32, 1, 1), Context 1, Stream 7, Device 0, CC 9.0",
        "    Section: GPU Speed Of Light Throughput",
        "    ------------ ----------- ------------",
        "    Metric Name  Metric Unit Metric Value",
        "    ------------ ----------- ------------",
        "    SM Frequency         Mhz     1,755.00",
        "    Duration              ms         1.10",
        "    ------------ ----------- ------------",
        "    Section: Instruction Statistics",
        "    --------------------- ----------- ------------",
        "    Metric Name           Metric Unit Metric Value",
        "    --------------------- ----------- ------------",
        "    Executed Instructions       Kinst       512.50",
        "    --------------------- ----------- ------------",
        "    Section: Launch Statistics",
        "    ----------- ----------- ------------",
        "    Metric Name Metric Unit Metric Value",
        "    ----------- ----------- ------------",
        "    Block Size      fortnight         32",
        "    ----------- ----------- ------------",
    ])  # fmt: skip
    f = tmp_path / "ncu_long.txt"
    f.write_text(page + "\n")
    (row,) = ncu_page.rows([f])
    assert row["µs"] == 1100 and row["SM GHz"] == 1.755 and row["warp instr."] == 512_500
    (k,) = ncu_page.read(f)
    assert k.figure("µs", "Launch Statistics", "Block Size") is None  # not a time unit


def test_keep_going_reports_a_failed_page_and_keeps_the_others(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    failed = tmp_path / "ncu_q4_1x1_T1.txt"
    failed.write_text("==ERROR== the profiled process failed\n")
    assert cli.main(["ncu-table", "--keep-going", str(failed), str(DQ_GEMM)]) == 1
    out, err = capsys.readouterr()
    assert "dq_gemm<0>" in out and "left out: " in err and "ncu_q4_1x1_T1.txt" in err
    assert cli.main(["ncu-table", str(failed), str(DQ_GEMM)]) == 2
