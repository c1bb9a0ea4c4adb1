"""The route tables as data: their files, their evidence, and the page generated from them."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from ninfer.routes import doc
from ninfer.routes.table import FILES, ROUTE_TABLES, TABLE_DIR, dumps_table, parse_table, read_table

ROOT = Path(__file__).resolve().parents[2]


def test_docs_routes_md_is_generated_from_the_tables(capsys: pytest.CaptureFixture[str]) -> None:
    rc = doc.main(["--check", str(ROOT / "docs/routes.md")])
    assert rc == 0, capsys.readouterr().err + " (run: python -m ninfer.routes.doc)"


def test_a_stale_page_is_caught_and_rewritten(tmp_path: Path) -> None:
    page = tmp_path / "routes.md"
    text = (ROOT / "docs/routes.md").read_text()
    row = next(line for line in text.splitlines() if line.startswith("| `dec_q` | 1 … "))
    assert row in text
    page.write_text(text.replace(row, row.replace("| 1 … ", "| 1 … 1", 1), 1))
    assert doc.main(["--check", str(page)]) == 1
    assert doc.main([str(page)]) == 0
    assert page.read_text() == text


def test_one_file_per_table_in_canonical_form() -> None:
    tables = [f for f in TABLE_DIR.glob("sm_*.json") if not f.name.endswith(".tune.json")]
    files = sorted(tables, key=lambda f: int(f.stem.removeprefix("sm_")))
    assert [f.stem for f in files] == [f"sm_{cc}" for cc in sorted(ROUTE_TABLES)]
    for f in files:
        assert dumps_table(read_table(f)) == f.read_text(), (
            f"{f.name}: not as dumps_table writes it"
        )


def test_every_row_cites_evidence_and_every_evidence_is_cited() -> None:
    for cc, t in FILES.items():
        assert {r.evidence for r in t.rows} == set(t.evidence), cc
        for key, ev in t.evidence.items():
            assert ev["finding"].strip(), (cc, key)
            if t.tuned is not None:  # a tuned table's rows come from measurements
                assert ev["data"], (cc, key)


@pytest.mark.skipif(
    shutil.which("git") is None or not (ROOT / ".git").exists(), reason="needs a git checkout"
)
def test_cited_data_exist_at_their_commits() -> None:
    refs = {d for t in FILES.values() for ev in t.evidence.values() for d in ev["data"]}
    assert refs
    for ref in sorted(refs):
        path, _, commit = ref.partition("@")
        if not commit:  # a file of the tree (a tuned table's record)
            assert (ROOT / path).is_file(), f"{ref}: not in the tree"
            continue
        r = subprocess.run(
            ["git", "-C", str(ROOT), "cat-file", "-e", f"{commit}:{path}"], capture_output=True
        )
        if r.returncode and b"Not a valid object name" in r.stderr:
            pytest.skip(f"commit {commit} is not in this clone")
        assert r.returncode == 0, f"{ref}: not in the repository's history"


def _doc() -> dict[str, Any]:
    return json.loads((TABLE_DIR / "sm_90.json").read_text())


@pytest.mark.parametrize(
    ("mutate", "match"),
    [
        (lambda d: d.update(schema="x"), "expected schema 'ninfer.route_table' version 1"),
        (lambda d: d["rows"][0].update(route="gemv"), r"rows\[0\]\.route: expected one of"),
        (lambda d: d["rows"][1].update(evidence="nope"), r"rows\[1\]\.evidence: expected a key"),
        (lambda d: d["rows"][2].update(t=[0, 5]), r"rows\[2\]\.t: expected \[lo, hi\]"),
        (lambda d: d["rows"][2].update(n=[9, 3]), r"rows\[2\]\.n: expected \[lo, hi\]"),
        (lambda d: d["rows"][2].update(k=["1", None]), r"rows\[2\]\.k: expected \[lo, hi\]"),
        (
            lambda d: d["rows"][0].update(qtypes=["q3"]),
            r"rows\[0\]\.qtypes: expected 'all' or a list of",
        ),
        (lambda d: d["rows"][0].pop("t"), "not a route table"),
    ],
)
def test_a_bad_table_is_refused_naming_the_row(mutate: Any, match: str) -> None:
    d = _doc()
    mutate(d)
    with pytest.raises(ValueError, match=match):
        parse_table(d, "sm_90.json")


def test_a_file_whose_name_and_cc_disagree_is_refused(tmp_path: Path) -> None:
    f = tmp_path / "sm_120.json"
    f.write_text((TABLE_DIR / "sm_90.json").read_text())
    with pytest.raises(ValueError, match="expected cc 120, got 90"):
        read_table(f)
