"""The regression pipeline without a GPU: round-level verdicts, the gate, the CLI, reports."""

from __future__ import annotations

import copy
import io
import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ninfer import record
from ninfer.record import load_results
from ninfer.regress import cli
from ninfer.regress.compare import compare, find_seams, with_confirmation
from ninfer.regress.stats import Noise, benjamini_hochberg, decide_all

ROOT = Path(__file__).resolve().parents[2]
BASELINE = ROOT / "baselines/h200/all.json"  # 10 rounds, H200
V1_RUN = ROOT / "tests/fixtures/bench_all_cublas_h200_2026-11-30.json"  # one process, v1


def _doc(path: Path = BASELINE) -> dict[str, Any]:
    d = dict(json.loads(path.read_text()))
    d.pop("baseline", None)
    for p in d["points"]:
        p.pop("noise", None)
    return d


def _write(tmp: Path, name: str, doc: dict[str, Any]) -> Path:
    p = tmp / name
    p.write_text(json.dumps(doc))
    return p


def _scaled(doc: dict[str, Any], f: float, rounds: int | None = None) -> dict[str, Any]:
    d = copy.deepcopy(doc)
    if rounds is not None:
        d["rounds"] = d["rounds"][:rounds]
    for p in d["points"]:
        p["rounds"] = [
            {**r, "samples_us": [s * f for s in r["samples_us"]]}
            for r in p["rounds"][: rounds or None]
        ]
        record.summarize(p)
    return d


def _out(capsys: pytest.CaptureFixture[str]) -> str:
    return capsys.readouterr().out


# --- verdicts ------------------------------------------------------------------------


def test_self_compare_has_no_change(capsys: pytest.CaptureFixture[str]) -> None:
    b = str(BASELINE)
    assert cli.main(["compare", b, b]) == 0
    out = _out(capsys)
    assert "0 slower, 0 faster" in out and "separate runs" in out
    assert cli.main(["compare", b, b, "--same-runner"]) == 0
    out = _out(capsys)
    # Identical rounds: nothing moved; a point whose rounds spread past the threshold
    # stays unknown, never slower or faster.
    assert re.search(r"PASS: 0 slower, 0 faster, \d+ same", out) and "same-runner A/B" in out


@pytest.mark.parametrize("same_runner", [False, True])
def test_ten_percent_slower_fails_and_faster_passes(
    tmp_path: Path, same_runner: bool, capsys: pytest.CaptureFixture[str]
) -> None:
    flag = ["--same-runner"] if same_runner else []
    slow = _write(tmp_path, "slow.json", _scaled(_doc(), 1.10, rounds=5))
    assert cli.main(["compare", str(BASELINE), str(slow), *flag]) == 1
    out = _out(capsys)
    assert "FAIL: 6" in out and "0 faster, 0 same" in out  # 67 or 68 of 68 slower
    fast = _write(tmp_path, "fast.json", _scaled(_doc(), 1 / 1.10, rounds=5))
    assert cli.main(["compare", str(BASELINE), str(fast), *flag]) == 0
    assert "0 slower" in _out(capsys)


def _five_rounds(tmp: Path, f: float) -> tuple[str, str]:
    """The baseline's first five rounds, and the same five scaled by f: a uniform change
    alone (against all ten rounds, a point whose first five differ from its last five,
    as the Q6 head's T = 1024 rounds do at aaf8654, reads as a change of its own)."""
    base = _write(tmp, "base5.json", _scaled(_doc(), 1.0, rounds=5))
    new = _write(tmp, "s.json", _scaled(_doc(), f, rounds=5))
    return str(base), str(new)


def test_one_percent_is_not_a_change(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base, new = _five_rounds(tmp_path, 1.01)
    assert cli.main(["compare", base, new, "--same-runner"]) == 0
    out = _out(capsys)
    assert "0 slower, 0 faster" in out


def test_threshold_flag_moves_the_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base, new = _five_rounds(tmp_path, 1.10)
    assert cli.main(["compare", base, new, "--threshold", "0.15", "--same-runner"]) == 0
    assert "0 slower" in _out(capsys)
    # the same change against the default 5 % line is slower: the flag moved it
    assert cli.main(["compare", base, new, "--same-runner"]) == 1


def test_three_times_slower_on_five_samples_fails() -> None:
    """Unknown never passes silently: a gross change is slower even with few samples."""
    rng = np.random.default_rng(3)
    base = [list(20.0 * np.exp(rng.normal(0, 0.005, 20))) for _ in range(10)]
    five = [list(60.0 * np.exp(rng.normal(0, 0.005, 5)))]
    assert decide_all([(base, five)])[0].state == "slower"  # one round against ten
    assert decide_all([([base[0][:5]], five)])[0].state == "slower"  # one against one
    # ... and a small change on one round a side decides nothing.
    v = decide_all([([base[0][:5]], [[x * 1.02 for x in base[1][:5]]])])[0]
    assert v.state == "unknown" and "too few" in v.why


def test_the_round_is_the_unit_not_the_sample() -> None:
    """Two rounds 3 % apart with tight samples: pooled samples would call it a change."""
    rng = np.random.default_rng(4)
    base = [list(50.0 * np.exp(rng.normal(0, 0.002, 20)))]
    new = [list(51.5 * np.exp(rng.normal(0, 0.002, 20)))]
    assert decide_all([(base, new)])[0].state == "unknown"


def test_a_slow_round_neither_moves_nor_hides_a_point() -> None:
    rng = np.random.default_rng(5)

    def rounds(level: float, n: int, slow: int) -> list[list[float]]:
        rs = [list(level * np.exp(rng.normal(0, 0.004, 20))) for _ in range(n)]
        for r in rs[:slow]:  # what a clock dip after a heavy point does to a round
            r[:] = [x * 1.15 for x in r]
        return rs

    assert decide_all([(rounds(30, 10, 1), rounds(30, 8, 1))], same_runner=True)[0].state == "same"
    assert decide_all([(rounds(30, 8, 1), rounds(33, 8, 1))], same_runner=True)[0].state == "slower"


def test_separate_runs_widen_the_threshold_of_a_noisy_point_and_say_so() -> None:
    rng = np.random.default_rng(6)
    noisy = [list(40 * np.exp(rng.normal(0, 0.04) + rng.normal(0, 0.003, 20))) for _ in range(10)]
    again = [list(40 * np.exp(rng.normal(0, 0.04) + rng.normal(0, 0.003, 20))) for _ in range(5)]
    sep, ab = decide_all([(noisy, again)]), decide_all([(noisy, again)], same_runner=True)
    assert sep[0].threshold > 0.10 and sep[0].widened_pct > 5 and "widened" in sep[0].why
    assert ab[0].threshold == 0.05
    quiet = [list(40 * np.exp(rng.normal(0, 0.002, 20))) for _ in range(10)]
    assert decide_all([(quiet, quiet[:5])])[0].threshold == 0.05


def test_stored_noise_is_a_floor() -> None:
    rng = np.random.default_rng(7)
    b = [list(10 * np.exp(rng.normal(0, 0.001, 20))) for _ in range(4)]
    n = [list(10.6 * np.exp(rng.normal(0, 0.001, 20))) for _ in range(4)]
    assert decide_all([(b, n)], same_runner=True)[0].state == "slower"
    v = decide_all([(b, n)], same_runner=True, noise=[Noise(round_sd=0.05)])[0]
    assert v.state == "unknown" and v.round_sd == pytest.approx(0.05)


def test_benjamini_hochberg_adjusts_as_the_step_up_rule() -> None:
    # Sorted 0.005, 0.01, 0.03, 0.04 -> p * m / rank = 0.02, 0.02, 0.04, 0.04 (monotone).
    assert np.allclose(benjamini_hochberg([0.01, 0.04, 0.03, 0.005]), [0.02, 0.04, 0.04, 0.02])
    assert np.allclose(benjamini_hochberg([0.9, 0.8]), [0.9, 0.9])  # capped, monotone
    assert benjamini_hochberg([]).size == 0
    with pytest.raises(ValueError, match="finite"):
        benjamini_hochberg([0.1, float("nan")])


def test_v1_records_decide_only_gross_changes(tmp_path: Path) -> None:
    """One process a side: no round variance, so only complete separation decides."""
    v1 = json.loads(V1_RUN.read_text())
    slow = copy.deepcopy(v1)
    for p in slow["points"]:
        p["samples_us"] = [s * 2 for s in p["samples_us"]]
    c = compare(load_results(V1_RUN), load_results(_write(tmp_path, "slow.json", slow)))
    assert c.count("slower") == 68
    c = compare(load_results(V1_RUN), load_results(V1_RUN))
    assert c.count("same") == 0 and c.undecided and c.exit_code == 2


# --- the gate --------------------------------------------------------------------------


def test_confirmation_decides_the_gate(tmp_path: Path) -> None:
    new = load_results(_write(tmp_path, "n.json", _scaled(_doc(), 1.10, rounds=5)))
    c = compare(load_results(BASELINE), new)
    assert c.count("slower") > 60 and c.exit_code == 1
    # The A/B on this runner finds the same code: its verdict is the gate's.
    ab_doc = _scaled(_doc(), 1.0, rounds=8)
    a = load_results(_write(tmp_path, "a.json", ab_doc))
    ab = compare(a, a, same_runner=True)
    c = with_confirmation(c, ab)
    assert c.count("slower") == 0 and c.exit_code == 0
    assert all(r.confirm is not None for r in c.rows)
    assert sum(r.verdict.state == "slower" and r.state == "same" for r in c.rows) > 60
    assert "confirmed by A/B on this runner" in c.summary()


def test_a_confirmation_that_cannot_run_is_no_pass(tmp_path: Path) -> None:
    new = load_results(_write(tmp_path, "n.json", _scaled(_doc(), 1.0, rounds=5)))
    c = compare(load_results(BASELINE), new)
    c.confirm_error = "commit 'abc' is not in this clone"
    assert c.exit_code == 2 and "not confirmed" in c.summary()


def test_unmeasured_and_failed_points_fail_the_gate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    d = _scaled(_doc(), 1.0, rounds=5)
    d["points"] = d["points"][:8]
    p = _write(tmp_path, "few.json", d)
    assert cli.main(["compare", str(BASELINE), str(p)]) == 1
    out = _out(capsys)
    assert "60 baseline point(s) not measured" in out
    missing = {record.point_key(q) for q in _doc()["points"][8:]}
    named = [ln for ln in out.splitlines() if ln.startswith("not measured (in the baseline")]
    assert len(named) == 60 and all(record.key_str(k) in out for k in missing)  # by name
    assert cli.main(["compare", str(BASELINE), str(p), "--allow-missing"]) == 0
    d = _scaled(_doc(), 1.0, rounds=5)
    d["failures"] = [{"point": "x q4 a16 N=1 K=1 T=1", "error": "RuntimeError: boom", "round": 2}]
    p = _write(tmp_path, "failed.json", d)
    assert cli.main(["compare", str(BASELINE), str(p)]) == 1
    assert "1 failed to run" in _out(capsys)


def test_strict_fails_on_unknown(tmp_path: Path) -> None:
    d = _scaled(_doc(), 1.0, rounds=5)
    # One point measured in one round only, 3 % off: too little to call it same.
    d["points"][0]["rounds"] = [
        {**d["points"][0]["rounds"][0],
         "samples_us": [x * 1.03 for x in d["points"][0]["rounds"][0]["samples_us"]]}
    ]  # fmt: skip
    b1 = _write(tmp_path, "b1.json", _scaled(_doc(), 1.0, rounds=1))
    p = _write(tmp_path, "one.json", d)
    c = compare(load_results(b1), load_results(p))
    assert c.rows[0].state == "unknown" and c.count("slower") == 0
    assert cli.main(["compare", str(b1), str(p), "--strict"]) == 1


def test_usage_and_environment_errors_exit_2(tmp_path: Path) -> None:
    other = _doc()
    other["environment"].update(gpu_name="NVIDIA GeForce RTX 5090", gpu_key="rtx5090")
    p = _write(tmp_path, "o.json", other)
    b = str(BASELINE)
    assert cli.main(["compare", b, str(p)]) == 2
    assert cli.main(["compare", b, str(tmp_path / "none.json")]) == 2
    assert cli.main(["compare", b, b, "--markdown", str(tmp_path / "no" / "dir" / "r.md")]) in (
        0,
        2,
    )
    for argv in (["compare", b], ["compare", b, b, "--alpha", "0.9"], ["bench", "--rounds", "1"]):
        with pytest.raises(SystemExit) as e:  # argparse: usage errors exit 2 too
            cli.main(argv)
        assert e.value.code == 2


def test_fingerprint_change_says_how_to_refresh(tmp_path: Path) -> None:
    d = _scaled(_doc(), 1.0, rounds=5)
    d["environment"]["kernel_fingerprint"] = "0" * 16
    c = compare(load_results(BASELINE), load_results(_write(tmp_path, "f.json", d)))
    from ninfer.regress.report import markdown

    md = markdown(c)
    assert "Route code changed" in md and "nox -s baseline -- --suite all --reason" in md


def test_compiler_change_is_named_where_both_records_know_it(tmp_path: Path) -> None:
    from ninfer.regress.report import markdown

    def run(base_nvrtc: str | None, new_nvrtc: str | None) -> tuple[Any, str]:
        b, n = _doc(), _scaled(_doc(), 1.0, rounds=5)
        b["environment"]["nvrtc"], n["environment"]["nvrtc"] = base_nvrtc, new_nvrtc
        c = compare(
            load_results(_write(tmp_path, "b.json", b)), load_results(_write(tmp_path, "n.json", n))
        )
        return c.compiler_changed, markdown(c)

    changed, md = run("13.0", "13.5")
    assert changed == ("13.0", "13.5")
    assert "Compiler changed" in md and "(13.0 -> 13.5)" in md and "NVRTC 13.5" in md
    for same in (("13.0", "13.0"), (None, "13.5"), ("13.0", None)):  # unknown is no change
        changed, md = run(*same)
        assert changed is None and "Compiler changed" not in md


def test_seams_flag_a_new_step_only() -> None:
    b = load_results(BASELINE).by_key()
    n = copy.deepcopy(b)
    k1 = next(k for k in n if k.t == 16)
    for r in n[k1]["rounds"]:
        r["samples_us"] = [s * 1.4 for s in r["samples_us"]]
    record.summarize(n[k1])
    seams = find_seams(b, n, 0.05)
    assert [(s.group, s.t_hi) for s in seams] == [(k1.shape, 16)]
    assert find_seams(b, b, 0.05) == []


def test_markdown_and_plots(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib", reason="the 'report' extra is not installed")
    p = _write(tmp_path, "slow.json", _scaled(_doc(), 1.10, rounds=5))
    md = tmp_path / "out" / "report.md"
    md.parent.mkdir()
    assert (
        cli.main(
            [
                "compare",
                str(BASELINE),
                str(p),
                "--markdown",
                str(md),
                "--plots",
                str(tmp_path / "out" / "plots"),
            ]
        )
        == 1
    )
    text = md.read_text()
    assert "## ninfer bench: ❌ FAIL" in text and "round medians" in text
    assert list((tmp_path / "out" / "plots").glob("*.png"))


# --- baselines and the GPU-less paths ---------------------------------------------------


def test_baseline_reason_must_be_a_sentence() -> None:
    for reason in ("", "  ", "fix", "wip wip"):
        assert cli.main(["baseline", "--from", str(BASELINE), "--reason", reason]) == 2
    assert cli.is_sentence("dec_q: 8 k-groups at T<=8 after the tile change")


def test_baseline_refuses_a_record_that_is_not_heads(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """The committed baseline was measured at an earlier commit: promoting it again is refused
    (dirty tree or another commit, whichever this checkout shows first). Into tmp_path: run
    at the commit that measured it, it would be accepted."""
    reason = "promote the old run again please"
    rc = cli.main(
        ["baseline", "--from", str(BASELINE), "--reason", reason, "--baselines", str(tmp_path)]
    )
    assert rc == 2
    err = capsys.readouterr().err
    assert "uncommitted changes" in err or "a baseline is HEAD's" in err or "git checkout" in err


def test_baseline_refuses_an_experiments_record(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import json

    from ninfer.bench import env

    doc = json.loads(BASELINE.read_text())
    doc["environment"]["dispatch"] = {"force": "dq_gemm"}
    rec = tmp_path / "all.json"
    rec.write_text(json.dumps(doc))
    monkeypatch.setattr(env, "git", lambda *a: "" if a[0] == "status" else "0" * 40)
    rc = cli.main(["baseline", "--from", str(rec), "--reason", "promote an experiment by mistake",
                   "--baselines", str(tmp_path)])  # fmt: skip
    assert rc == 2
    assert "never a baseline" in capsys.readouterr().err


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
    out = tmp_path / "q5"
    assert cli.main(["shape-report", str(BASELINE), "--qtype", "q5", "--n", "6144", "--k", "5120",
                     "--out", str(out)]) == 0  # fmt: skip
    text = (out / "README.md").read_text()
    assert "# Q5 [6144,5120] on NVIDIA H200" in text
    assert "model_bytes     = 20,643,840 + 2 × 5120 × T + 2 × 6144 × T" in text
    assert "| 1 | dec_q |" in text and "## Seams along T" in text


def test_commit_and_dirty_come_from_the_measured_checkout(monkeypatch: pytest.MonkeyPatch) -> None:
    """nox installs a wheel into .nox/: the checkout is found from the working directory."""
    import shutil

    from ninfer.bench import env

    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("needs a git checkout")
    monkeypatch.chdir(ROOT)
    env.checkout_root.cache_clear()
    try:
        assert env.checkout_root() == ROOT
        assert env.git("rev-parse", "HEAD") is not None
    finally:
        env.checkout_root.cache_clear()


def test_the_idle_wait_counts_from_each_check(monkeypatch: pytest.MonkeyPatch) -> None:
    import argparse

    from ninfer.bench import telemetry
    from ninfer.regress import session

    clock = [0.0]
    monkeypatch.setattr(session.time, "monotonic", lambda: clock[0])
    monkeypatch.setattr(session.time, "sleep", lambda s: clock.__setitem__(0, clock[0] + s))
    readings = iter(["GPU utilization 11 %", None])
    monkeypatch.setattr(telemetry, "busy_reason", lambda device: next(readings))
    check = session.busy_check(argparse.Namespace(idle_wait=120.0, device=0))
    clock[0] = 600.0  # ten minutes of rounds later, one busy reading is waited out
    check(io.StringIO())
    readings = iter(["another process is using the GPU: 1234"] * 1000)
    with pytest.raises(SystemExit, match="GPU is busy"):
        check(io.StringIO())
    assert clock[0] >= 720.0  # and a GPU that stays busy is refused after --idle-wait


def test_compare_json_gives_the_verdicts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Twice as slow: every point of the committed baseline is judged slower at 5 rounds,
    # whatever its own between-round noise (5e54677's Q6 [248320,5120] T = 1024 has 4.9 %:
    # a 30 % step there is "unknown" at 5 rounds, its threshold 21 %).
    slow = _write(tmp_path, "slow.json", _scaled(_doc(), 2.0, rounds=5))
    out = tmp_path / "v.json"
    assert cli.main(["compare", str(BASELINE), str(slow), "--json", str(out)]) == 1
    doc = json.loads(out.read_text())
    assert doc["outcome"] == "regression" and doc["mode"] == "compare"
    assert doc["counts"]["slower"] == 68 and {p["gate"] for p in doc["points"]} == {"slower"}
    capsys.readouterr()
    assert cli.main(["compare", str(BASELINE), str(slow), "--json", "-"]) == 1
    assert json.loads(capsys.readouterr().out)["counts"] == doc["counts"]  # stdout: JSON only


def test_compare_plots_without_matplotlib_still_writes_markdown(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib -> ImportError
    md = tmp_path / "r.md"
    rc = cli.main(["compare", str(BASELINE), str(BASELINE), "--plots", str(tmp_path / "p"),
                   "--markdown", str(md)])  # fmt: skip
    assert rc == 0 and md.exists()
    assert "plots skipped" in capsys.readouterr().err
