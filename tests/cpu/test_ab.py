"""The same-runner A/B without a GPU: its schedule, its worktree, its refusals, the fixture."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from ninfer.regress.ab import AbError, resolve, schedule, worktree

ROOT = Path(__file__).resolve().parents[2]
PLANTED = ROOT / "tests/fixtures/planted_w8_dec_q.patch"
PLANTED_5PCT = ROOT / "tests/fixtures/planted_w8_dec_q_5pct.patch"
pytestmark = pytest.mark.skipif(
    shutil.which("git") is None or not (ROOT / ".git").exists(), reason="needs a git checkout"
)


def _git(*args: str, cwd: Path = ROOT) -> str:
    return subprocess.run(["git", "-C", str(cwd), *args], capture_output=True, text=True,
                          check=True).stdout.strip()  # fmt: skip


def test_rounds_alternate_abba() -> None:
    s = schedule(4)
    assert s == [("A", 0), ("B", 0), ("B", 1), ("A", 1), ("A", 2), ("B", 2), ("B", 3), ("A", 3)]
    assert sum(side == "A" for side, _ in s) == 4


def test_a_commit_missing_from_the_clone_is_no_pass() -> None:
    with pytest.raises(AbError, match=r"not in this clone.*Not a pass"):
        resolve(ROOT, "0123456789abcdef0123456789abcdef01234567")


def test_a_commit_before_round_records_is_refused() -> None:
    try:
        old = _git("rev-list", "-n1", "3d33a2c")  # the last commit before schema v2
    except subprocess.CalledProcessError:
        pytest.skip("history not in this clone")
    before = _git("worktree", "list")
    with pytest.raises(AbError, match="predates round records"), worktree(ROOT, old):
        pass
    assert _git("worktree", "list") == before  # the temporary worktree is gone again


def test_the_committed_baselines_commit_runs_rounds() -> None:
    # The gate's A/B builds a worktree of the baseline's commit: one from before the bench's
    # parser moved out of cli.py must still be accepted.
    import json

    sha = json.loads((ROOT / "baselines/h200/all.json").read_text())["environment"]["commit"]
    try:
        _git("cat-file", "-e", f"{sha}^{{commit}}")
    except subprocess.CalledProcessError:
        pytest.skip("history not in this clone")
    with worktree(ROOT, sha) as tree:
        assert _git("rev-parse", "HEAD", cwd=tree) == _git("rev-parse", sha)
    assert not tree.exists()


def test_worktree_of_head_runs_and_is_removed() -> None:
    head = _git("rev-parse", "HEAD")
    with worktree(ROOT, "HEAD") as tree:
        assert _git("rev-parse", "HEAD", cwd=tree) == head
        assert (tree / "kernels" / "dec_q.cu").exists()
    assert not tree.exists()


@pytest.mark.parametrize("patch", [PLANTED, PLANTED_5PCT], ids=["10pct", "5pct"])
def test_the_planted_regression_applies_in_a_worktree_and_touches_one_route(patch: Path) -> None:
    with worktree(ROOT, "HEAD") as tree:
        subprocess.run(["git", "-C", str(tree), "apply", str(patch)], check=True)
        changed = _git("diff", "--name-only", cwd=tree).split()
        assert changed == ["kernels/dec_q.cu"]
        diff = _git("diff", cwd=tree)
        # Only the W8 instances change: every added line is guarded by the format.
        assert "QT == QT_W8" in diff and "QT != QT_W8" in diff


def test_an_ab_stopped_part_way_keeps_both_sides_records(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import json

    from ninfer.regress import ab
    from ninfer.regress.runner import RoundPlan, Side

    doc = json.loads((ROOT / "baselines/h200/all.json").read_text())

    def fake_round(
        run_dir: Path, plan: RoundPlan, i: int, side: Side, log: object
    ) -> tuple[int, Path]:
        out = run_dir / "rounds" / f"{side.name}{i:02d}.json"
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(doc))
        return 0, out

    checks = []

    def busy(log: object) -> None:  # the GPU turns busy before the fourth round
        checks.append(1)
        if len(checks) == 4:
            raise SystemExit("ninfer-regress: the GPU is busy")

    monkeypatch.setattr(ab, "run_round", fake_round)
    with pytest.raises(SystemExit):
        ab.run_ab(tmp_path, RoundPlan("all", 20, 3, 0, 1), 4, ROOT, "HEAD", busy)
    for side in ("A", "B"):  # A B B ran: both sides' finished rounds are on disk
        assert json.loads((tmp_path / "ab" / f"{side}.json").read_text())["points"]


def _stopped_ab(monkeypatch: pytest.MonkeyPatch) -> dict[str, object]:
    """cli's A/B with the GPU check passed and run_ab replaced: it records the round plan
    it was given (``["plan"]``) and stops (exit 2)."""
    from ninfer.regress import ab, cli

    seen: dict[str, object] = {}

    def fake_ab(run_dir: Path, plan: object, *args: object, **kw: object) -> None:
        seen["plan"] = plan
        raise AbError("stopped by the test")

    monkeypatch.setattr(cli, "_gpu_or_exit", lambda a: None)
    monkeypatch.setattr(ab, "run_ab", fake_ab)
    return seen


def test_ab_qtype_measures_only_that_formats_points(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from ninfer.bench.points import load_suite
    from ninfer.regress import cli

    seen = _stopped_ab(monkeypatch)
    assert cli.main(["bench", "--ab", "HEAD", "--qtype", "w8", "--runs", str(tmp_path)]) == 2
    only = seen["plan"].only  # type: ignore[attr-defined]
    w8 = {(p.n, p.k, p.t) for p in load_suite("all") if p.qtype.value == "w8"}
    assert isinstance(only, list) and {(k.n, k.k, k.t) for k in only} == w8
    assert {k.qtype for k in only} == {"w8"}
    assert "stopped by the test" in capsys.readouterr().err


def test_qtype_without_ab_is_refused_before_measuring(capsys: pytest.CaptureFixture[str]) -> None:
    from ninfer.regress import cli

    assert cli.main(["bench", "--qtype", "w8"]) == 2
    assert "expected with --ab only" in capsys.readouterr().err


def test_ab_dispatch_puts_both_sides_under_one_override(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """--ab --dispatch: both sides' rounds get the override as an absolute file (side A
    runs in its worktree), its table file absolute too: this checkout's table on both."""
    from ninfer.regress import cli

    seen = _stopped_ab(monkeypatch)
    monkeypatch.chdir(Path(__file__).resolve().parents[2])
    over = tmp_path / "portable.json"
    over.write_text(json.dumps({"table": "ninfer/routes/tables/sm_80.json"}))
    argv = ["bench", "--ab", "HEAD", "--dispatch", str(over), "--runs", str(tmp_path / "runs")]
    assert cli.main(argv) == 2
    assert "stopped by the test" in capsys.readouterr().err
    extra = list(seen["plan"].extra)  # type: ignore[attr-defined]
    f = Path(extra[extra.index("--dispatch") + 1])
    assert f.is_absolute() and f.is_file()
    table = Path(json.loads(f.read_text())["table"])
    assert table.is_absolute() and table.read_text().startswith("{")


def _suite_file(tmp_path: Path, name: str = "nvfp4_heads") -> Path:
    f = tmp_path / f"{name}.yaml"
    f.write_text(
        json.dumps(
            {
                "suite": "nvfp4_heads",
                "policy": "a16",
                "t_classes": {"dec": [1, 16]},
                "entries": [
                    {"label": "h", "qtype": "nvfp4", "n": 248320, "k": 5120, "t_class": "dec"},
                    {"label": "m", "qtype": "q4", "n": 6144, "k": 5120, "t_class": "dec"},
                ],
            }
        )
    )
    return f


def test_ab_suite_file_measures_its_points(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """--ab --suite-file: points no named suite has (the suites hold no NVFP4 weight), the
    file by its absolute path (side A runs in its worktree), --qtype within it."""
    from ninfer.regress import cli
    from ninfer.regress.runner import Side, _command

    seen = _stopped_ab(monkeypatch)
    f = _suite_file(tmp_path)
    argv = [
        "bench",
        "--ab",
        "HEAD",
        "--suite-file",
        str(f),
        "--qtype",
        "nvfp4",
        "--runs",
        str(tmp_path / "runs"),
    ]
    assert cli.main(argv) == 2
    assert "stopped by the test" in capsys.readouterr().err
    plan = seen["plan"]
    assert plan.suite == str(f.resolve())  # type: ignore[attr-defined]
    assert {(k.qtype, k.n, k.t) for k in plan.only} == {("nvfp4", 248320, 1), ("nvfp4", 248320, 16)}  # type: ignore[attr-defined]
    cmd = _command(plan, tmp_path / "r.json", 0, Side("A", tmp_path), None)  # type: ignore[arg-type]
    assert cmd[cmd.index("--suite-file") + 1] == str(f.resolve()) and "--suite" not in cmd
    assert [d.name.split("_2")[0] for d in (tmp_path / "runs").iterdir()] == ["ab_nvfp4_heads"]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["bench", "--dispatch", "x.json"], "expected with --ab only"),
        (["bench", "--ab", "HEAD", "--dispatch", "/nonexistent/x.json"], "--dispatch /nonexistent"),
        (["bench", "--suite-file", "{f}"], "expected with --ab only"),
        (["bench", "--ab", "HEAD", "--suite-file", "{bad}"], "expected 'other' (the file name)"),
        (["bench", "--ab", "HEAD", "--suite-file", "/nonexistent/x.yaml"], "no such file"),
    ],
)
def test_ab_options_are_checked_before_measuring(
    argv: list[str],
    message: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from ninfer.regress import ab, cli

    def no_ab(*args: object, **kw: object) -> None:
        raise AssertionError("measured")

    monkeypatch.setattr(cli, "_gpu_or_exit", lambda a: None)
    monkeypatch.setattr(ab, "run_ab", no_ab)
    files = {"{f}": str(_suite_file(tmp_path)), "{bad}": str(_suite_file(tmp_path, "other"))}
    runs = tmp_path / "runs"
    assert cli.main([files.get(x, x) for x in argv] + ["--runs", str(runs)]) == 2
    assert message in capsys.readouterr().err
    assert not runs.exists(), "a run folder was made"
