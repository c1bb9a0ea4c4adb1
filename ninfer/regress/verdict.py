"""The gate's machine-readable verdict (``verdict.json``) and what the PR author reads.

``build`` turns a comparison into the verdict document; the gate writes it into its run
folder (cli.py, with record.write_text_atomic). ``render_comment`` / ``render_summary`` turn that document into the
sticky PR comment and the step summary: the verdict line, the points that are not
"same" with their model labels, the artifact's link, and how to refresh baselines.

This module imports only the standard library, at module level and below, so a workflow
can run it as a file (``python3 ninfer/regress/verdict.py RUN_DIR ...``) with any Python,
without installing ninfer or its dependencies. Schema: docs/ci.md ("verdict.json").
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .compare import Comparison

SCHEMA, VERSION = "ninfer.verdict", 1
MARKER = "<!-- ninfer-gpu-pr -->"  # finds the sticky comment to update in place
OUTCOMES = {0: "pass", 1: "regression", 2: "error"}
_TITLE = {
    "pass": "✅ pass",
    "regression": "❌ regression",
    "error": "⚠️ environment error (no verdict on the code)",
}
# Shared with report.py (it imports these): the run's report and the PR comment read alike.
ICON = {"slower": "🔴 slower", "faster": "🟢 faster", "same": "same", "unknown": "⚪ unknown"}
ORDER = {"slower": 0, "unknown": 1, "faster": 2, "same": 3}
MAX_ROWS = 60  # a PR comment holds 65536 characters; the artifact has every row
COMMENT_LIMIT = 60000


def md_cell(text: str) -> str:
    """One markdown table cell: a label with | or a newline must not break the table."""
    return str(text).replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


def _verdict(v: Any) -> dict[str, Any]:
    return {"state": v.state, "change_pct": round(v.change_pct, 2), "ci": list(v.ci),
            "threshold": v.threshold}  # fmt: skip


def build(
    c: Comparison | None,
    *,
    exit_code: int,
    mode: str,
    gpu: dict[str, str],
    message: str = "",
    ab_ref: str | None = None,
    refresh: str = "",
) -> dict[str, Any]:
    """The verdict document. ``mode``: baseline (against a committed baseline, A/B for
    the points not "same"), ab (an A/B against ``ab_ref``), ab-no-baseline (the same,
    because the GPU has no committed baseline), compare (two results files,
    ``ninfer-regress compare --json``), none (nothing compared)."""
    doc: dict[str, Any] = {
        "schema": SCHEMA, "version": VERSION, "outcome": OUTCOMES.get(exit_code, "error"),
        "exit_code": exit_code, "mode": mode, "gpu": gpu, "ab_ref": ab_ref,
        "message": message, "refresh": refresh,
    }  # fmt: skip
    if c is None:
        doc.update(headline=message, counts={}, failing=[], points=[], not_measured=[],
                   failures=[], baseline=None, new=None)  # fmt: skip
        return doc
    rows = [r for r in c.rows if r.state != "same" or r.verdict.state != "same"]
    rows.sort(key=lambda r: (ORDER[r.state], -abs(r.verdict.change_pct)))
    doc.update(
        headline=c.summary(),
        counts={s: c.count(s) for s in ("slower", "faster", "same", "unknown")} | {
            "points": len(c.rows)},
        failing=c.failing(),
        baseline={"path": str(c.base.path), "commit": c.base.commit,
                  "fingerprint": c.base.fingerprint},
        new={"commit": c.new.commit, "fingerprint": c.new.fingerprint,
             "dirty": bool(c.new.env.get("dirty"))},
        fingerprint_changed=c.fingerprint_changed,
        points=[
            {"point": str(r.key), "labels": list(r.labels), "base_us": r.base_median_us,
             "new_us": r.new_median_us, "separate": _verdict(r.verdict),
             "ab": _verdict(r.confirm) if r.confirm is not None else None, "gate": r.state}
            for r in rows
        ],
        not_measured=[str(k) for k in c.only_base],
        failures=list(c.failures),
    )  # fmt: skip
    return doc


def read(run_dir: Path) -> dict[str, Any] | None:
    p = run_dir / "verdict.json"
    try:
        doc = json.loads(p.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
        return None
    return doc


def missing(exit_code: int, run_dir: Path) -> dict[str, Any]:
    """What the report says when the gate wrote no verdict (it stopped before)."""
    why = (
        f"The gate wrote no verdict.json (its step exited {exit_code}): it stopped before "
        f"comparing (GPU, driver, install or conformance). See {run_dir}/run.log in the "
        "artifact, or the job log."
    )
    return build(None, exit_code=2, mode="none", gpu={}, message=why)


def _table(points: list[dict[str, Any]], ab_run: bool) -> list[str]:
    # In an A/B run the comparison is itself the A/B: no second column for it.
    if ab_run:
        out = ["| point | labels | A µs (ref) | B µs (PR) | change | gate |",
               "|---|---|---:|---:|---:|---|"]  # fmt: skip
    else:
        out = ["| point | labels | base µs | new µs | change | A/B | gate |",
               "|---|---|---:|---:|---:|---|---|"]  # fmt: skip
    for p in points[:MAX_ROWS]:
        s, ab = p["separate"], p["ab"]
        labels = ", ".join(p["labels"][:2]) + (" …" if len(p["labels"]) > 2 else "")
        if ab_run:
            abt = ""
        elif ab:
            abt = f"{ab['change_pct']:+.1f}% {ICON[ab['state']]} | "
        else:
            abt = "– | "
        out.append(
            f"| {md_cell(p['point'])} | {md_cell(labels)} | {p['base_us']:.2f} | {p['new_us']:.2f} | "
            f"{s['change_pct']:+.1f}% {ICON[s['state']]} | {abt}**{p['gate']}** |"
        )
    if len(points) > MAX_ROWS:
        out.append(f"\n_{len(points) - MAX_ROWS} more rows in the artifact's report.md._")
    return out


def _body(doc: dict[str, Any], artifact_url: str, trusted_changes: list[str]) -> list[str]:
    out = [f"**{md_cell(doc['headline'] or doc['message'])}**", ""]
    mode = doc["mode"]
    ab_run = mode.startswith("ab")
    if mode == "ab-no-baseline":
        out += [f"> No committed baseline for this GPU ({doc['gpu'].get('name', '?')}): this "
                f"check is an A/B of the PR against `{(doc['ab_ref'] or '?')[:12]}` (its "
                "merge-base) on this runner. Create the baseline: dispatch the "
                "*baseline-refresh* workflow on main.", ""]  # fmt: skip
    elif mode == "ab":
        out += [f"A/B against `{(doc['ab_ref'] or '?')[:12]}` on this runner.", ""]
    elif mode == "baseline" and doc.get("baseline"):
        b = doc["baseline"]
        out += [f"Against `{md_cell(b['path'])}` (commit `{(b['commit'] or '?')[:10]}`), from the "
                "base branch; every point not *same* re-measured by an A/B against that "
                "commit on this runner.", ""]  # fmt: skip
    if doc["message"] and doc["headline"] and doc["message"] != doc["headline"]:
        out += [md_cell(doc["message"]), ""]
    flagged = [p for p in doc["points"] if p["gate"] != "same"]
    cleared = [p for p in doc["points"] if p["gate"] == "same"]
    if flagged:
        out += ["Points the gate does not call *same*:", "", *_table(flagged, ab_run), ""]
    if cleared:
        out += [f"<details><summary>{len(cleared)} point(s) the separate comparison left open, "
                "found <i>same</i> by the A/B on this runner</summary>", "", *_table(cleared, ab_run),
                "", "</details>", ""]  # fmt: skip
    if doc["not_measured"]:
        out += [f"Not measured ({len(doc['not_measured'])}): "
                + ", ".join(f"`{k}`" for k in doc["not_measured"][:20]), ""]  # fmt: skip
    for f in doc["failures"][:20]:
        out.append(
            f"- failed to run: `{md_cell(f.get('point', '?'))}`: {md_cell(f.get('error', ''))}"
        )
    if doc["failures"]:
        out.append("")
    if trusted_changes:
        out += ["⚠️ This PR changes the gate's trusted files; the gate used the base branch's "
                "baselines, and these changes need a code owner's review: "
                + ", ".join(f"`{md_cell(p)}`" for p in trusted_changes[:20]), ""]  # fmt: skip
    out.append(f"Run folder (results, report.md with plots, logs): [artifact]({artifact_url})")
    if doc["outcome"] == "regression" or doc.get("fingerprint_changed"):
        out += ["", "<details><summary>The change is deliberate? Refresh the baselines</summary>",
                "", "Dispatch the *baseline-refresh* workflow (Actions tab) on this branch with "
                "a reason, or on the GPU: `nox -s baseline -- --suite all --reason '<why>'`; "
                "commit `baselines/<gpu>/` in this PR. A code owner reviews it.",
                "", "</details>"]  # fmt: skip
    return out


def render_comment(doc: dict[str, Any], artifact_url: str, trusted_changes: list[str]) -> str:
    gpu = doc["gpu"].get("name") or "GPU"
    out = [MARKER, f"### ninfer GPU gate ({md_cell(gpu)}): {_TITLE[doc['outcome']]}", ""]
    text = "\n".join(out + _body(doc, artifact_url, trusted_changes)) + "\n"
    return text[:COMMENT_LIMIT]


def render_summary(doc: dict[str, Any], artifact_url: str, trusted_changes: list[str]) -> str:
    out = [f"## ninfer GPU gate: {_TITLE[doc['outcome']]}", ""]
    return "\n".join(out + _body(doc, artifact_url, trusted_changes)) + "\n"


def _write_atomic(path: Path, text: str) -> None:
    # ninfer.record.write_text_atomic's rule (temp file beside it, then rename), here
    # because this file runs with the standard library alone (the module docstring).
    import os
    import tempfile

    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent or ".")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        umask = os.umask(0)  # the mode open() would give, as record.write_text_atomic does
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="verdict.py", description="Render the gate's verdict.json for a PR and a summary."
    )
    ap.add_argument("run_dir", type=Path, help="the gate's run folder")
    ap.add_argument("--exit-code", type=int, default=2,
                    help="the gate step's exit status, used only when verdict.json is missing")  # fmt: skip
    ap.add_argument("--artifact-url", required=True, help="where the run folder was uploaded")
    ap.add_argument("--trusted-changes", type=Path, help="file: trusted paths this PR changes")
    ap.add_argument("--comment", type=Path, help="write the PR comment here")
    ap.add_argument("--summary", type=Path, help="append the step summary here")
    ap.add_argument("--outcome-file", type=Path, help="write pass / regression / error here")
    a = ap.parse_args(argv)
    doc = read(a.run_dir) or missing(a.exit_code, a.run_dir)
    changes: list[str] = []
    if a.trusted_changes is not None and a.trusted_changes.exists():
        changes = [ln.strip() for ln in a.trusted_changes.read_text().splitlines() if ln.strip()]
    if a.comment is not None:
        _write_atomic(a.comment, render_comment(doc, a.artifact_url, changes))
    if a.summary is not None:  # GITHUB_STEP_SUMMARY is appended to: one write, not atomic
        with a.summary.open("a") as f:
            f.write(render_summary(doc, a.artifact_url, changes))
    if a.outcome_file is not None:
        _write_atomic(a.outcome_file, doc["outcome"] + "\n")
    print(f"gate outcome: {doc['outcome']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
