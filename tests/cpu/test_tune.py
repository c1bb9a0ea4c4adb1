"""The tune command's table synthesis and its record (no GPU: measurements are made up
here, the way a real record holds them)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from ninfer import Policy, QType
from ninfer.bench.points import load_suite
from ninfer.regress.tune import (
    K_EDGES,
    N_EDGES,
    T_GRID,
    Shape,
    candidates,
    first_step,
    last_t,
    read_record,
    record_doc,
    segments,
    suite_shapes,
    table_from,
)
from ninfer.routes import Problem, select
from ninfer.routes.table import FILES, LAUNCHERS, TABLE_DIR, dumps_table, parse_table

CC = 90
META = {
    "cc": CC, "gpu": "NVIDIA H200", "sms": 132, "commit": "0" * 40,
    "kernel_fingerprint": "0225f84ec119fd40", "created": "2026-12-03T00:00:00+0000",
    "suite": "all", "rounds": 3, "statistic": "the lower quartile of round medians",
}  # fmt: skip


def _shipped_winner_times(shapes: list[Shape]) -> dict[tuple[Shape, int], dict[str, float]]:
    """Times where the shipped sm_90 table's route is 20 % ahead of every other candidate."""
    out = {}
    for s in shapes:
        for t in T_GRID:
            cands = candidates(s, t, CC)
            win = select(Problem(s.qtype, Policy.A16, s.n, s.k, t, CC)).name
            out[(s, t)] = {r: (10.0 if r == win else 12.0) * (1 + t / 64) for r in cands}
    return out


@pytest.fixture(scope="module")
def shipped() -> tuple[list[Shape], dict[tuple[Shape, int], dict[str, float]]]:
    shapes = suite_shapes(load_suite("all"))
    return shapes, _shipped_winner_times(shapes)


def test_suite_shapes_are_distinct_and_cover_every_format() -> None:
    shapes = suite_shapes(load_suite("all"))
    assert len(shapes) == len(set(shapes))
    assert {s.qtype for s in shapes} == set(QType)


def test_candidates_are_what_each_kernel_can_run() -> None:
    s = Shape(QType.Q4, 6144, 5120)
    assert candidates(s, 64, 90) == ["dec_q", "dq_gemm", "dq_mma", "dq_rs"]
    assert candidates(s, 65, 90) == ["dq_gemm", "dq_mma", "dq_rs"]
    assert candidates(s, 16, 120) == ["dec_q", "dq_gemm", "dq_mma"]
    assert last_t("dec_q", s, 90) == 64 and last_t("dq_gemm", s, 90) is None


def test_the_tuned_table_covers_every_problem_once(shipped) -> None:  # type: ignore[no-untyped-def]
    _, measured = shipped
    t = table_from(measured, META, "ninfer/routes/tables/sm_90.tune.json")
    sizes = sorted({1, 640, 2047, 2048, 4095, 4096, 4607, 4608, 8191, 8192, 14335, 14336, 248320})
    for q in QType:
        for n in sizes:
            for k in sizes:
                for tt in (*range(1, 80), 95, 96, 97, 1023, 1024, 1025, 2048, 3000, 10**6):
                    p = Problem(q, Policy.A16, n, k, tt, CC)
                    owners = [r for r in t.rows if r.supports(p)]
                    assert len(owners) == 1, (p, owners)
                    assert owners[0].launcher.supports(p), (p, owners[0])


def test_a_shape_alone_in_its_cell_gets_its_winners(shipped) -> None:  # type: ignore[no-untyped-def]
    shapes, measured = shipped
    t = table_from(measured, META, "x")
    cells: dict[tuple[QType, int, int], list[Shape]] = {}
    for s in shapes:
        key = (s.qtype, sum(s.n >= e for e in N_EDGES), sum(s.k >= e for e in K_EDGES))
        cells.setdefault(key, []).append(s)
    alone = [v[0] for v in cells.values() if len(v) == 1]
    assert len(alone) >= 20
    for s in alone:
        for tt in T_GRID:
            m = measured[(s, tt)]
            got = select(Problem(s.qtype, Policy.A16, s.n, s.k, tt, CC), {CC: t.rows}).name
            assert got == min(m, key=m.__getitem__), (s, tt)


def test_every_bound_of_a_tuned_table_is_one_the_conformance_shapes_straddle(shipped) -> None:  # type: ignore[no-untyped-def]
    _, measured = shipped
    t = table_from(measured, META, "x")
    bounds_n = {r.n_min for r in t.rows if r.n_min > 1} | {r.n_max + 1 for r in t.rows if r.n_max}
    bounds_k = {r.k_min for r in t.rows if r.k_min > 1} | {r.k_max + 1 for r in t.rows if r.k_max}
    assert bounds_n <= set(N_EDGES) and bounds_k <= set(K_EDGES)


def test_t_boundaries_at_the_earlier_routes_tile_edge_and_the_kernels_last_t() -> None:
    s = Shape(QType.Q4, 6144, 5120)
    m: dict[tuple[Shape, int], dict[str, float]] = {}
    for t in T_GRID:
        # dec_q ahead to T = 16, dq_rs from T = 24; dec_q would stay ahead past 64 if it could.
        m[(s, t)] = {"dq_gemm": 20.0, "dq_rs": 12.0 if t >= 24 else 15.0}
        if t <= 64:
            m[(s, t)]["dec_q"] = 10.0 if t <= 16 else 13.0
    # dec_q's 16-token tile ends at T = 16 (its instance changes at 17): dq_rs from 17, not
    # from the midpoint isqrt(16 * 24) + 1 = 20.
    inst = [
        LAUNCHERS["dec_q"].instance(Problem(s.qtype, Policy.A16, s.n, s.k, t, CC)) for t in (16, 17)
    ]
    assert inst[0] != inst[1]
    assert first_step("dec_q", [s], 16, 23, CC) == 16
    assert segments([s], T_GRID, m, CC) == (("dec_q", 1, 16), ("dq_rs", 17, None))
    for t in T_GRID:
        if t <= 64:
            m[(s, t)]["dec_q"] = 1.0
    assert segments([s], T_GRID, m, CC) == (("dec_q", 1, 64), ("dq_rs", 65, None))


def test_an_edge_inside_a_gap_and_a_cell_of_shapes_with_different_edges() -> None:
    """Between grid T = 4 and 16 (midpoint 8): W8 [14336,5120]'s dec_q changes tile after
    T = 7 (the eight-k-group row ends), so dq_rs from 8; W8 [2048,4096]'s after T = 4. A
    cell holding both ends where the first of its shapes' edges is."""
    big, small = Shape(QType.W8, 14336, 5120), Shape(QType.W8, 2048, 4096)
    grid = (4, 16)
    m = {
        (s, t): {"dec_q": 10.0 if t == 4 else 30.0, "dq_rs": 20.0}
        for s in (big, small)
        for t in grid
    }
    assert first_step("dec_q", [big], 4, 15, CC) == 7
    assert first_step("dec_q", [small], 4, 15, CC) == 4
    assert segments([big], grid, m, CC) == (("dec_q", 1, 7), ("dq_rs", 8, None))
    assert segments([small], grid, m, CC) == (("dec_q", 1, 4), ("dq_rs", 5, None))
    assert segments([big, small], grid, m, CC) == (("dec_q", 1, 4), ("dq_rs", 5, None))
    # An edge past the midpoint leaves the midpoint: dq_mma ahead at T = 17, dq_rs at 48
    # (midpoint isqrt(17 * 48) = 28); dq_mma's tile changes after T = 32.
    q4 = Shape(QType.Q4, 6144, 5120)
    mm = {(q4, t): {"dq_mma": 10.0 if t == 17 else 30.0, "dq_rs": 20.0} for t in (17, 48)}
    assert first_step("dq_mma", [q4], 17, 47, CC) == 32
    assert segments([q4], (17, 48), mm, CC) == (("dq_mma", 1, 28), ("dq_rs", 29, None))


def test_a_near_tie_keeps_the_previous_route() -> None:
    s = Shape(QType.W8, 2048, 4096)
    m = {(s, t): {"dq_gemm": 10.0, "dq_rs": 10.0 * (1.004 if t > 128 else 1.2)} for t in T_GRID}
    assert segments([s], T_GRID, m, CC) == (("dq_gemm", 1, None),)
    m = {(s, t): {"dq_gemm": 10.0, "dq_rs": 10.0 * (0.98 if t > 128 else 1.2)} for t in T_GRID}
    # dq_gemm runs one instance at every T: the boundary is the geometric midpoint.
    assert first_step("dq_gemm", [s], 128, 255, CC) is None
    assert segments([s], T_GRID, m, CC) == (
        ("dq_gemm", 1, 181),
        ("dq_rs", 182, None),
    )  # isqrt(128 * 256)


def test_a_cell_of_several_shapes_takes_the_least_geometric_mean() -> None:
    a, b = Shape(QType.Q4, 5120, 6144), Shape(QType.Q4, 6144, 5120)
    # One shape loses 5 % with dq_gemm, the other 30 % with dq_rs: dq_gemm for both.
    m = {}
    for t in (128, 256):
        m[(a, t)] = {"dq_gemm": 10.5, "dq_rs": 10.0}
        m[(b, t)] = {"dq_gemm": 10.0, "dq_rs": 13.0}
    assert segments([a, b], (128, 256), m, CC) == (("dq_gemm", 1, None),)


def test_the_record_replays_to_the_same_table(shipped) -> None:  # type: ignore[no-untyped-def]
    _, measured = shipped
    doc = json.loads(json.dumps(record_doc(measured, META)))
    again, rec = read_record(doc, "rec")
    assert again.keys() == measured.keys()
    assert all(
        math.isclose(again[k][r], v, abs_tol=5e-5) for k in again for r, v in measured[k].items()
    )
    t1 = table_from(measured, META, "r.json")
    t2 = table_from(again, {k: rec[k] for k in META}, "r.json")
    assert dumps_table(t1) == dumps_table(t2)
    assert parse_table(json.loads(dumps_table(t1)), "x") == t1
    assert t1.tuned is not None and t1.tuned["gpu"] == "NVIDIA H200"
    assert set(t1.evidence) == {f"tune-{q.value}" for q in QType}


def test_the_shipped_sm90_table_is_its_record_replayed() -> None:
    """ninfer/routes/tables/sm_90.json is what today's rules build from sm_90.tune.json:
    a change to the boundary rules (or a hand edit of either file) that moves a row fails
    here until the table is replayed (ninfer-regress tune --replay) and A/B'd on the GPU."""
    rec_path = TABLE_DIR / "sm_90.tune.json"
    measured, rec = read_record(json.loads(rec_path.read_text()), str(rec_path))
    rebuilt = table_from(measured, rec, "ninfer/routes/tables/sm_90.tune.json")
    assert rebuilt.rows == FILES[90].rows


@pytest.mark.parametrize(
    ("mutate", "match"),
    [
        (lambda d: d.update(schema="x"), "expected schema 'ninfer.tune_record'"),
        (lambda d: d["points"][0]["us"].update(gemv=1.0), "expected route times > 0"),
        (lambda d: d["points"][0]["us"].update(dq_gemm=-1.0), "expected route times > 0"),
        (lambda d: d["points"][0].pop("t"), "not a tune record"),
    ],
)
def test_a_bad_record_is_refused(shipped, mutate, match) -> None:  # type: ignore[no-untyped-def]
    _, measured = shipped
    doc = record_doc(measured, META)
    mutate(doc)
    with pytest.raises(ValueError, match=match):
        read_record(doc, "rec.json")


def test_tune_replay_writes_the_table_without_a_gpu(
    shipped,  # type: ignore[no-untyped-def]
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from ninfer.regress import cli
    from ninfer.routes.table import read_table

    _, measured = shipped
    rec = tmp_path / "rec.json"
    rec.write_text(json.dumps(record_doc(measured, META)))
    tables = tmp_path / "tables"
    tables.mkdir()
    monkeypatch.chdir(tmp_path)  # no docs/routes.md here: the page is left alone
    assert cli.main(["tune", "--replay", str(rec), "--tables", str(tables)]) == 0
    assert "wrote" in capsys.readouterr().out
    t = read_table(tables / "sm_90.json")
    assert t.tuned is not None and t.tuned["commit"] == META["commit"]
    assert not (tables / "sm_90.tune.json").exists()  # a replay writes no record


def test_tune_list_needs_no_gpu(capsys: pytest.CaptureFixture[str]) -> None:
    from ninfer.regress import cli

    assert cli.main(["tune", "--list", "--t-grid", "1,16,128"]) == 0
    out = capsys.readouterr().out
    assert "dec_q" in out and "dq_rs" in out and "dq_gemm" in out


def test_tune_refuses_a_bad_grid(capsys: pytest.CaptureFixture[str]) -> None:
    from ninfer.regress import cli

    with pytest.raises(SystemExit):
        cli.main(["tune", "--t-grid", "0,4"])
    assert "expected T >= 1" in capsys.readouterr().err


def test_keep_takes_the_t_outside_the_new_grid_from_an_earlier_record(shipped) -> None:  # type: ignore[no-untyped-def]
    from ninfer.regress.tune import kept_times

    shapes, measured = shipped
    old = record_doc(measured, META)
    grid = (1, 4, 8, 16, 32, 64)  # 24 and 48 lie inside its range: re-tuned, not kept
    s0 = shapes[0]
    new = {k: dict(v) for k, v in measured.items() if k[1] in grid}
    new[(s0, 16)] = {r: 10.0 for r in new[(s0, 16)]} | {"dq_rs": 7.0}
    times, kept = kept_times(
        *read_record(old, "old.json"), "old.json", CC, "NVIDIA H200", shapes, grid
    )
    assert kept["t"] == [96, 128, 256, 512, 1024, 1536, 2048]
    assert (kept["record"], kept["commit"], kept["unmeasured"]) == ("old.json", META["commit"], [])
    assert {t for _, t in times} == set(kept["t"]) and (s0, 24) not in times
    both = {**new, **times}
    assert both[(s0, 16)]["dq_rs"] == 7.0 and both[(s0, 1024)] == measured[(s0, 1024)]
    t = table_from(both, {**META, "kept": kept}, "new.json")
    assert t.tuned is not None
    assert "T 96, 128, 256, 512, 1024, 1536, 2048 kept from old.json" in t.tuned["method"]
    assert "had no time" not in t.tuned["method"]
    assert all(e["data"] == ["new.json", "old.json"] for e in t.evidence.values())


def test_keep_says_which_routes_the_record_never_timed(shipped) -> None:  # type: ignore[no-untyped-def]
    # A route added since the record (dq_mma after 336d1ee's) cannot be chosen at the kept
    # T; the record and the table say so.
    from ninfer.regress.tune import kept_times

    shapes, measured = shipped
    no_mma = {k: {r: v for r, v in us.items() if r != "dq_mma"} for k, us in measured.items()}
    _, kept = kept_times(
        *read_record(record_doc(no_mma, META), "old.json"),
        "old.json",
        CC,
        "NVIDIA H200",
        shapes,
        (1, 64),
    )
    assert kept["unmeasured"] == ["dq_mma"]
    t = table_from(no_mma, {**META, "kept": kept}, "new.json")
    assert t.tuned is not None and t.tuned["method"].endswith("where dq_mma had no time")


def test_keep_refuses_another_gpu_and_a_shape_it_lacks(shipped) -> None:  # type: ignore[no-untyped-def]
    from ninfer.regress.tune import kept_times

    shapes, measured = shipped
    old = record_doc(measured, META)
    with pytest.raises(
        ValueError, match=r"old.json: measured on NVIDIA H200 \(sm_90\), expected NVIDIA H100"
    ):
        kept_times(*read_record(old, "old.json"), "old.json", CC, "NVIDIA H100", shapes, (1, 64))
    # A shape tuned now that the record lacks would leave its ladder cell without the kept T.
    lacking = record_doc({k: v for k, v in measured.items() if k[0] != shapes[0]}, META)
    with pytest.raises(
        ValueError, match=r"no times for 1 shape\(s\) at T \[96, .*tune the whole grid"
    ):
        kept_times(
            *read_record(lacking, "old.json"), "old.json", CC, "NVIDIA H200", shapes, (1, 64)
        )
    # The shapes tuned now only: the record's others are not kept.
    times, _ = kept_times(
        *read_record(old, "old.json"), "old.json", CC, "NVIDIA H200", shapes[:1], (1, 64)
    )
    assert {s for s, _ in times} == {shapes[0]}


def test_tune_keep_is_checked_before_the_gpu(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from ninfer.regress import cli

    bad = tmp_path / "rec.json"
    bad.write_text(json.dumps({"schema": "x"}))
    assert cli.main(["tune", "--keep", str(bad), "--list"]) == 2
    assert "not a tune record" in capsys.readouterr().err


def test_a_grid_over_the_records_range_keeps_nothing(shipped) -> None:  # type: ignore[no-untyped-def]
    from ninfer.regress.tune import kept_times

    shapes, measured = shipped
    times, kept = kept_times(
        *read_record(record_doc(measured, META), "old.json"),
        "old.json",
        CC,
        "NVIDIA H200",
        shapes,
        T_GRID,
    )
    assert times == {} and kept["t"] == []
    t = table_from(measured, {**META, "kept": kept}, "new.json")
    assert t.tuned is not None and "kept" not in t.tuned["method"]
    assert all(e["data"] == ["new.json"] for e in t.evidence.values())
