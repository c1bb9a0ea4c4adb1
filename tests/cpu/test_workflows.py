"""The workflows' guards (docs/ci.md, "Trust model") and the PR comment renderer."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
WF = ROOT / ".github" / "workflows"


def _load(name: str) -> dict:
    doc = yaml.safe_load((WF / name).read_text())
    doc["on"] = doc.pop(True, doc.get("on"))  # YAML 1.1 reads the key `on` as True
    return doc


def test_every_action_is_pinned_by_commit_sha_with_its_version() -> None:
    for f in WF.glob("*.yml"):
        for line in f.read_text().splitlines():
            m = re.search(r"uses:\s*(\S+)", line)
            if m:
                assert re.fullmatch(r"[\w.-]+/[\w.-]+@[0-9a-f]{40}", m.group(1)), (f.name, line)
                assert re.search(r"# v\d", line), (f.name, line)


def test_gpu_pr_guards_forks_at_job_level_and_holds_a_read_only_token() -> None:
    doc = _load("gpu-pr.yml")
    assert doc["permissions"] == {}
    job = doc["jobs"]["gpu"]
    assert job["permissions"] == {"contents": "read"}
    guard = job["if"]
    assert "github.event.pull_request.head.repo.full_name == github.repository" in guard
    assert "github.event.label.name == 'gpu-run'" in guard
    assert "gpu-pr-${{ github.event.pull_request.number" in doc["concurrency"]["group"]


def test_every_checkout_drops_its_credentials() -> None:
    for f in WF.glob("*.yml"):
        for job in _load(f.name)["jobs"].values():
            for step in job["steps"]:
                if str(step.get("uses", "")).startswith("actions/checkout@"):
                    assert step["with"]["persist-credentials"] is False, f.name


def test_jobs_that_write_run_no_repository_code() -> None:
    for f in WF.glob("*.yml"):
        for name, job in _load(f.name)["jobs"].items():
            perms = job.get("permissions", {})
            if "write" not in perms.values():
                continue
            assert job["runs-on"] == "ubuntu-latest", (f.name, name)
            script = "\n".join(s.get("run", "") for s in job["steps"])
            for code in ("nox", "python", "pip install", "bash tools", "./"):
                assert code not in script, (f.name, name, code)


def test_no_concurrency_group_is_shared_between_workflows() -> None:
    groups = [_load(f.name).get("concurrency", {}).get("group") for f in WF.glob("*.yml")]
    groups = [g for g in groups if g]
    assert len(groups) == len(set(groups))


def test_codeowners_cover_the_gates_trusted_paths() -> None:
    text = (ROOT / ".github" / "CODEOWNERS").read_text()
    for path in ("/baselines/", "/.github/", "/noxfile.py", "/ninfer/regress/"):
        assert re.search(rf"^{re.escape(path)}\s+@", text, re.M), path


def _gate_dir(tmp_path: Path, slow: float) -> Path:
    """A run folder against the committed H200 baseline; W8 points slowed by ``slow``."""
    import json

    from ninfer.regress import cli

    doc = json.loads((ROOT / "baselines/h200/all.json").read_text())
    for p in doc["points"]:
        if p["qtype"] == "w8" and p["t"] <= 16:
            p["median_us"] *= slow
            for r in p.get("rounds", []):
                r["samples_us"] = [s * slow for s in r["samples_us"]]
            if "samples_us" in p:
                p["samples_us"] = [s * slow for s in p["samples_us"]]
    run = tmp_path / "run"
    run.mkdir()
    (run / "results.json").write_text(json.dumps(doc))
    assert cli.main(["report", str(run), "--baseline", str(ROOT / "baselines/h200/all.json")]) == 0
    return run


@pytest.mark.parametrize("slow,outcome", [(1.0, "pass"), (1.3, "regression")])
def test_comment_and_summary_render_from_the_verdict(
    tmp_path: Path, slow: float, outcome: str
) -> None:
    pytest.importorskip("matplotlib")  # cmd_report draws the plots
    from ninfer.regress import verdict

    run = _gate_dir(tmp_path, slow)
    doc = verdict.read(run)
    assert doc is not None and doc["outcome"] == outcome
    url = "https://github.com/o/r/actions/runs/1/artifacts/2"
    text = verdict.render_comment(doc, url, ["baselines/h200/all.json"])
    summary = verdict.render_summary(doc, url, [])
    assert text.startswith(verdict.MARKER) and f"[artifact]({url})" in text
    for md in (text, summary):
        assert not re.search(r"!\[[^\]]*\]\((?!https?://)", md)  # no relative images
        rows = [ln for ln in md.splitlines() if ln.startswith("|")]
        assert len({ln.count("|") - ln.count("\\|") for ln in rows}) <= 1  # one column count
    if outcome == "regression":
        assert "w8 a16" in text and "**slower**" in text and "Refresh the baselines" in text
    assert "code owner" in text


def test_a_missing_verdict_is_an_environment_error(tmp_path: Path) -> None:
    from ninfer.regress import verdict

    out = tmp_path / "outcome"
    assert verdict.main([str(tmp_path), "--exit-code", "1", "--artifact-url", "u",
                         "--comment", str(tmp_path / "c.md"), "--outcome-file", str(out)]) == 0  # fmt: skip
    assert out.read_text().strip() == "error"
    assert "environment error" in (tmp_path / "c.md").read_text()


def test_the_no_baseline_comment_renders_from_real_h200_records(tmp_path: Path) -> None:
    """A new GPU's first PR: the A/B of the planted W8 regression measured on an H200
    (tests/fixtures/h200/planted_ab_*), rendered as the comment says it."""
    import gzip

    from ninfer import record
    from ninfer.regress import verdict
    from ninfer.regress.compare import compare

    sides = []
    for s in "AB":
        out = tmp_path / f"{s}.json"
        out.write_bytes(
            gzip.decompress((ROOT / f"tests/fixtures/h200/planted_ab_{s}.json.gz").read_bytes())
        )
        sides.append(record.load_results(out))
    c = compare(*sides, same_runner=True)
    doc = verdict.build(c, exit_code=c.exit_code, mode="ab-no-baseline",
                        gpu={"name": "NVIDIA H200", "key": "h200"}, ab_ref="7627899" + "0" * 33)  # fmt: skip
    assert doc["outcome"] == "regression"
    text = verdict.render_comment(doc, "https://example.invalid/a", [])
    assert "No committed baseline for this GPU (NVIDIA H200)" in text and "`7627899" in text
    rows = [ln for ln in text.splitlines() if ln.startswith("|")]
    assert rows[0].startswith("| point | labels | A µs (ref) | B µs (PR) | change | gate |")
    assert len({ln.count("|") for ln in rows}) == 1
    assert "w8 a16 [34816,5120] T=16 | 27b.mtp_gate_up" in text and "**slower**" in text
