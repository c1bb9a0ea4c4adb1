"""The regression pipeline without a GPU: schema, loaders, verdicts, the gate, reports."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ninfer.formats.qtype import QType
from ninfer.policy import Policy
from ninfer.regress import cli
from ninfer.regress.compare import compare, find_seams
from ninfer.regress.noise import NoiseModel
from ninfer.regress.results import (
    GpuMismatchError,
    ResultsError,
    json_schema,
    load_baseline,
    load_results,
)
from ninfer.regress.stats import MIN_SAMPLES, benjamini_hochberg, decide_all

ROOT = Path(__file__).resolve().parents[2]
# A real H200 run (68 points, 20 samples each), committed with issue 3.
RUN = ROOT / "docs/perf/bench_all_cublas_h200_2026-11-30.json"
BASELINE = ROOT / "baselines/h200/all.json"  # the committed baseline (repeat 50)


def _doc(path: Path = RUN) -> dict[str, Any]:
    return dict(json.loads(path.read_text()))


def _write(tmp: Path, name: str, doc: dict[str, Any]) -> Path:
    p = tmp / name
    p.write_text(json.dumps(doc))
    return p


def _scaled(doc: dict[str, Any], f: float) -> dict[str, Any]:
    d = copy.deepcopy(doc)
    for p in d["points"]:
        p["samples_us"] = [s * f for s in p["samples_us"]]
        for k in ("median_us", "min_us", "p95_us"):
            p[k] *= f
    return d


def _states(capsys: pytest.CaptureFixture[str]) -> str:
    return capsys.readouterr().out


# --- schema and loaders ---------------------------------------------------------------


def test_committed_run_validates() -> None:
    r = load_results(RUN)
    assert r.gpu_key == "h200" and len(r.points) == 68


def test_schema_enums_match_the_package() -> None:
    point = json_schema()["$defs"]["point"]["properties"]
    assert set(point["qtype"]["enum"]) == {q.value for q in QType}
    assert set(point["policy"]["enum"]) == {p.value for p in Policy}


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda d: d.pop("timing"), "'timing' is a required property"),
        (lambda d: d["points"][0].pop("samples_us"), "samples_us"),
        (lambda d: d["points"][0].update(samples_us=[]), "points/0/samples_us"),
        (lambda d: d["points"][3].update(samples_us=[1.0, -2.0]), "points/3/samples_us/1"),
        (lambda d: d["points"][0].update(qtype="q3"), "points/0/qtype"),
        (lambda d: d["environment"].update(sms="132"), "environment/sms"),
        (lambda d: d["points"][2]["metrics"].pop("READ_pct"), "points/2/metrics"),
        (lambda d: d["points"].append(copy.deepcopy(d["points"][0])), "more than once"),
        (lambda d: d.update(schema="other"), "expected schema 'ninfer.results'"),
        (lambda d: d.update(schema_version=2), "schema_version 2 is not the one"),
    ],
)
def test_malformed_files_are_rejected(tmp_path: Path, mutate: Any, message: str) -> None:
    d = _doc()
    mutate(d)
    with pytest.raises(ResultsError) as e:
        load_results(_write(tmp_path, "bad.json", d))
    assert message in str(e.value)


def test_unreadable_files(tmp_path: Path) -> None:
    with pytest.raises(ResultsError, match="no such file"):
        load_results(tmp_path / "missing.json")
    (tmp_path / "x.json").write_text("{not json")
    with pytest.raises(ResultsError, match="not a readable JSON"):
        load_results(tmp_path / "x.json")


def test_other_gpu_is_refused(tmp_path: Path) -> None:
    other = _doc()
    other["environment"].update(gpu_name="NVIDIA GeForce RTX 5090", gpu_key="rtx5090")
    p = _write(tmp_path, "o.json", other)
    with pytest.raises(GpuMismatchError, match="expected a h200 record"):
        load_results(p, expect_gpu="h200")
    with pytest.raises(GpuMismatchError, match="GPU model differs"):
        compare(load_results(RUN), load_results(p))


def test_other_timing_contract_is_refused(tmp_path: Path) -> None:
    d = _doc()
    d["timing"]["execution"] = "direct"
    with pytest.raises(ResultsError, match="timing contract differs in 'execution'"):
        compare(load_results(RUN), load_results(_write(tmp_path, "d.json", d)))


def test_baseline_needs_a_reason(tmp_path: Path) -> None:
    with pytest.raises(ResultsError, match="'baseline' block"):
        load_baseline(RUN)
    d = _doc()
    d["baseline"] = {"reason": "", "created": "x", "commit": None, "kernel_fingerprint": "f",
                     "timing": {}}  # fmt: skip
    with pytest.raises(ResultsError, match="baseline/reason"):
        load_baseline(_write(tmp_path, "b.json", d))


# --- the gate (issue 4 acceptance, without a GPU) ------------------------------------------


@pytest.mark.parametrize("src", [RUN, BASELINE], ids=["run", "baseline"])
def test_self_compare_is_all_same(src: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["compare", str(src), str(src)]) == 0
    assert "PASS: 0 slower, 0 faster, 68 same, 0 unknown of 68 points" in _states(capsys)


@pytest.mark.parametrize("src", [RUN, BASELINE], ids=["run", "baseline"])
def test_ten_percent_slower_fails(
    src: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    p = _write(tmp_path, "slow.json", _scaled(_doc(src), 1.10))
    assert cli.main(["compare", str(src), str(p)]) == 1
    assert "FAIL: 68 slower, 0 faster, 0 same, 0 unknown of 68 points" in _states(capsys)


def test_ten_percent_faster_passes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = _write(tmp_path, "fast.json", _scaled(_doc(), 1 / 1.10))
    assert cli.main(["compare", str(RUN), str(p)]) == 0
    assert "68 faster" in _states(capsys)


@pytest.mark.parametrize("src", [RUN, BASELINE], ids=["run", "baseline"])
def test_one_percent_is_not_a_regression(
    src: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    p = _write(tmp_path, "s.json", _scaled(_doc(src), 1.01))
    assert cli.main(["compare", str(src), str(p)]) == 0
    out = _states(capsys)
    assert "0 slower" in out and "0 faster" in out


def test_committed_baseline_records_its_provenance() -> None:
    b = load_baseline(BASELINE, "h200")
    meta = b.doc["baseline"]
    assert meta["reason"] and meta["commit"] and meta["dirty"] is False
    assert meta["kernel_fingerprint"] == b.fingerprint
    assert b.timing["repeat"] >= 50 and b.timing["execution"] == "graph"


def test_threshold_flag_moves_the_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = _write(tmp_path, "s.json", _scaled(_doc(), 1.10))
    assert cli.main(["compare", str(RUN), str(p), "--threshold", "0.15"]) == 0
    assert "0 slower" in _states(capsys)


def test_usage_and_environment_errors_exit_2(tmp_path: Path) -> None:
    other = _doc()
    other["environment"].update(gpu_name="NVIDIA GeForce RTX 5090", gpu_key="rtx5090")
    p = _write(tmp_path, "o.json", other)
    assert cli.main(["compare", str(RUN), str(p)]) == 2
    assert cli.main(["compare", str(RUN), str(tmp_path / "none.json")]) == 2
    bad_out = str(tmp_path / "no" / "such" / "dir" / "r.md")
    assert cli.main(["compare", str(RUN), str(RUN), "--markdown", bad_out]) == 2
    for argv in (["compare", str(RUN)], ["compare", str(RUN), str(RUN), "--alpha", "0.9"]):
        with pytest.raises(SystemExit) as e:  # argparse: usage errors exit 2 too
            cli.main(argv)
        assert e.value.code == 2


def test_a_mig_slice_is_not_the_whole_gpu(tmp_path: Path) -> None:
    d = _doc()
    d["environment"].update(gpu_name="NVIDIA H200 MIG 1g.18gb", sms=16)
    with pytest.raises(GpuMismatchError, match="GPU differs in sms: baseline 132 vs new 16"):
        compare(load_results(RUN), load_results(_write(tmp_path, "mig.json", d)))


def test_non_finite_samples_are_rejected_and_never_pass(tmp_path: Path) -> None:
    d = _scaled(_doc(), 1.5)
    d["points"][0]["samples_us"][3] = float("nan")
    with pytest.raises(ResultsError, match="expected finite times > 0, got nan"):
        load_results(_write(tmp_path, "nan.json", d))
    pairs = [
        (p["samples_us"], q["samples_us"])
        for p, q in zip(_doc()["points"], d["points"], strict=True)
    ]
    states = [v.state for v in decide_all(pairs)]
    assert states[0] == "unknown" and states[1:].count("slower") == 67


def test_unmeasured_and_failed_points_fail_the_gate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    d = _doc()
    d["points"] = d["points"][:8]
    p = _write(tmp_path, "few.json", d)
    assert cli.main(["compare", str(RUN), str(p)]) == 1
    assert "60 baseline point(s) not measured" in capsys.readouterr().out
    assert cli.main(["compare", str(RUN), str(p), "--allow-missing"]) == 0
    d = _doc()
    d["failures"] = [{"point": "x q4 a16 N=1 K=1 T=1", "error": "RuntimeError: boom"}]
    p = _write(tmp_path, "failed.json", d)
    assert cli.main(["compare", str(RUN), str(p)]) == 1
    assert "1 failed to run" in capsys.readouterr().out


def test_all_unknown_is_undecided_not_pass(tmp_path: Path) -> None:
    d = _doc()
    for p in d["points"]:
        p["samples_us"] = p["samples_us"][:5]
    c = compare(load_results(RUN), load_results(_write(tmp_path, "five.json", d)))
    assert c.undecided and c.exit_code == 2 and c.headline == "UNDECIDED"


def test_strict_fails_on_unknown(tmp_path: Path) -> None:
    d = _doc()
    d["points"][0]["samples_us"] = d["points"][0]["samples_us"][:5]
    p = _write(tmp_path, "one.json", d)
    assert cli.main(["compare", str(RUN), str(p)]) == 0
    assert cli.main(["compare", str(RUN), str(p), "--strict"]) == 1


def test_fingerprint_change_says_how_to_refresh(tmp_path: Path) -> None:
    d = _doc()
    d["environment"]["kernel_fingerprint"] = "0" * 64
    c = compare(load_results(RUN), load_results(_write(tmp_path, "f.json", d)))
    from ninfer.regress.report import markdown

    md = markdown(c)
    assert "Route code changed" in md and "nox -s baseline -- --suite all --reason" in md


def test_missing_points_are_reported(tmp_path: Path) -> None:
    d = _doc()
    gone = d["points"].pop(5)
    c = compare(load_results(RUN), load_results(_write(tmp_path, "m.json", d)))
    assert len(c.rows) == 67 and len(c.only_base) == 1
    assert c.only_base[0][4] == gone["t"]


def test_markdown_and_plots(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib", reason="plots need the 'report' extra (matplotlib)")
    p = _write(tmp_path, "slow.json", _scaled(_doc(), 1.10))
    md = tmp_path / "out" / "report.md"
    md.parent.mkdir()
    rc = cli.main(["compare", str(RUN), str(p), "--markdown", str(md), "--plots",
                   str(tmp_path / "out" / "plots")])  # fmt: skip
    assert rc == 1
    text = md.read_text()
    assert "❌ FAIL: 68 slower" in text and "](plots/roofline.png)" in text
    for name in ("latency_vs_T", "new_vs_baseline", "roofline"):
        png = tmp_path / "out" / "plots" / f"{name}.png"
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


# --- statistics ------------------------------------------------------------------------


def test_benjamini_hochberg_matches_scipy() -> None:
    sps = pytest.importorskip("scipy.stats")
    if not hasattr(sps, "false_discovery_control"):
        pytest.skip("scipy < 1.11 has no false_discovery_control")
    p = np.random.default_rng(0).random(50) ** 3
    np.testing.assert_allclose(benjamini_hochberg(p), sps.false_discovery_control(p))


def test_too_few_samples_is_unknown() -> None:
    rng = np.random.default_rng(1)
    base = 10 + rng.random(MIN_SAMPLES - 1)
    (v,) = decide_all([(base, base * 2)])
    assert v.state == "unknown" and "too few samples" in v.why


def test_too_noisy_is_unknown_not_same() -> None:
    rng = np.random.default_rng(2)
    base = 10 * np.exp(rng.normal(0, 0.3, 20))
    new = 10 * np.exp(rng.normal(0, 0.3, 20))
    (v,) = decide_all([(base, new)])
    assert v.state == "unknown" and "too noisy" in v.why


def test_seams_flag_a_new_step_only() -> None:
    def pts(times: dict[int, float]) -> dict[Any, dict[str, Any]]:
        return {("q4", "a16", 64, 64, t): {"median_us": m} for t, m in times.items()}

    base = pts({1: 10.0, 2: 10.2, 3: 10.4, 4: 14.0, 16: 110.0})  # 3 -> 4 steps in both
    new = pts({1: 10.0, 2: 13.0, 3: 13.1, 4: 17.5, 16: 138.0})  # 4 -> 16: +689 % vs +686 %
    seams = find_seams(base, new, 0.05)
    assert [(s.t_lo, s.t_hi) for s in seams] == [(1, 2)]


SUITE_MEDIANS = np.geomspace(5.0, 10_000.0, 68)  # the span of the 68 suite points, µs


def _suite_trial(
    rng: np.random.Generator, model: NoiseModel, step: float = 1.0, at: int = -1
) -> list[str]:
    pairs = []
    for i, m in enumerate(SUITE_MEDIANS):
        base = model.run(rng, m, 50)  # a baseline is measured with repeat 50
        new = model.run(rng, m * (step if i == at else 1.0), 20)  # a PR run with repeat 20
        pairs.append((base, new))
    return [v.state for v in decide_all(pairs)]


def test_calibration_aa_false_positive_rate() -> None:
    """1000 simulated A/A comparisons of a 68-point suite: <= 1 % of points flagged."""
    rng = np.random.default_rng(2026)
    model = NoiseModel()
    flagged = total = 0
    for _ in range(1000):
        states = _suite_trial(rng, model)
        flagged += sum(s in ("slower", "faster") for s in states)
        total += len(states)
    assert flagged / total <= 0.01, f"A/A false-positive rate {flagged / total:.4f}"


def test_calibration_power_for_a_ten_percent_step() -> None:
    """A 10 % step at repeat 20 under 3 % sample noise is caught in >= 95 % of 1000 trials."""
    rng = np.random.default_rng(7)
    model = NoiseModel(sample_sd=0.03)
    hits = sum(_suite_trial(rng, model, 1.10, at=t % 68)[t % 68] == "slower" for t in range(1000))
    assert hits / 1000 >= 0.95, f"power {hits / 1000:.3f}"


# --- baseline, report, bench without a GPU -------------------------------------------------


def test_baseline_from_results(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d = _doc()
    d["timing"]["repeat"] = 20
    short = _write(tmp_path, "short.json", d)
    args = ["baseline", "--from", str(short), "--baselines", str(tmp_path / "b"),
            "--reason", "first baseline"]  # fmt: skip
    assert cli.main(args) == 2  # repeat 20 < 50: not a baseline
    assert not (tmp_path / "b").exists()
    d["timing"]["repeat"] = 50
    for p in d["points"]:
        p["samples_us"] = p["samples_us"] * 3  # 60 samples: a baseline needs >= 50
    good = _write(tmp_path, "good.json", d)
    args[2] = str(good)
    assert cli.main(args) == 0
    target = tmp_path / "b" / "h200" / "all.json"
    b = load_baseline(target, "h200")
    assert b.doc["baseline"]["reason"] == "first baseline"
    assert b.doc["baseline"]["previous"] is None
    args[-1] = "route change: faster gemv"
    assert cli.main(args) == 0
    out = capsys.readouterr().out
    assert "old baseline vs new baseline" in out and "68 same" in out
    b2 = load_baseline(target, "h200")
    assert b2.doc["baseline"]["previous"]["reason"] == "first baseline"
    assert "Old vs new" in target.with_suffix(".md").read_text()
    # a deliberate change of the timing contract: the old baseline is replaced, not a crash
    d["timing"]["flush_mib"] = 512
    args[2] = str(_write(tmp_path, "flush512.json", d))
    assert cli.main(args) == 0
    assert "not comparable" in target.with_suffix(".md").read_text()


def test_baseline_from_must_match_the_suite(tmp_path: Path) -> None:
    d = _doc()
    d["timing"]["repeat"] = 50
    for p in d["points"]:
        p["samples_us"] = p["samples_us"] * 3
    full = _write(tmp_path, "full.json", d)
    base = ["baseline", "--baselines", str(tmp_path / "b"), "--reason", "why not"]
    assert cli.main([*base, "--from", str(full), "--suite", "qwen3_6_27b"]) == 2
    d["points"] = d["points"][:3]
    few = _write(tmp_path, "few.json", d)
    assert cli.main([*base, "--from", str(few)]) == 2  # 3 points are not the suite 'all'
    assert not (tmp_path / "b").exists()


def test_baseline_reason_is_required(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        cli.main(["baseline", "--from", str(RUN)])
    assert e.value.code == 2
    assert cli.main(["baseline", "--from", str(RUN), "--reason", "  "]) == 2


def test_bench_without_gpu_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from ninfer.runtime.cupy_env import gpu_available

    if gpu_available()[0]:
        pytest.skip("a GPU is present: this test covers the no-GPU message")
    monkeypatch.chdir(tmp_path)
    assert cli.main(["bench"]) == 2
    err = capsys.readouterr().err
    assert "no GPU to measure on" in err and "nox -s tests" in err
    assert not (tmp_path / "runs").exists()


def test_shape_report(tmp_path: Path) -> None:
    out = tmp_path / "q4"
    # The suite measures Q5 [6144,5120] at several T (the seed's report shape is Q4).
    assert cli.main(["shape-report", str(RUN), "--qtype", "q5", "--n", "6144", "--k", "5120",
                     "--out", str(out)]) == 0  # fmt: skip
    text = (out / "README.md").read_text()
    assert "# Q5 [6144,5120] on NVIDIA H200" in text
    assert "model_bytes     = 20,643,840 + 2 × 5120 × T + 2 × 6144 × T" in text
    # This run predates the recorded route and its kernels are not today's: not guessed.
    assert "| 1 | unrecorded |" in text and "## Seams along T" in text
    assert cli.main(["shape-report", str(RUN), "--qtype", "q4", "--n", "7", "--k", "5120",
                     "--out", str(out)]) == 2  # fmt: skip


def test_results_written_by_bench_validate() -> None:
    """The writer (ninfer.bench.run) and the schema agree on every field name."""
    import inspect

    from ninfer.bench import run

    src = inspect.getsource(run.run_points)
    for field in json_schema()["$defs"]["point"]["required"]:
        assert f'"{field}"' in src, field


def test_commit_and_dirty_come_from_the_measured_checkout(monkeypatch: pytest.MonkeyPatch) -> None:
    """nox installs a wheel into .nox/: the checkout is found from the working directory."""
    import shutil

    from ninfer.bench import results as br

    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("needs a git checkout")
    monkeypatch.chdir(ROOT)
    br.checkout_root.cache_clear()
    try:
        assert br.checkout_root() == ROOT
        assert br.git("rev-parse", "HEAD") is not None
    finally:
        br.checkout_root.cache_clear()
