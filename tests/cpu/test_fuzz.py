"""Seeded fuzz of the CLIs and the loaders (CPU only): no input makes a traceback.

Each case mutates a real input (a committed results record, a suite YAML, an argv of
valid options) and runs the command in-process. It must end with exit 0, 1 or 2 and one
error line, never a traceback or an "internal error". A failing case prints its seed and
the input that broke it, so it can be re-run alone.
"""

from __future__ import annotations

import copy
import json
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ninfer.bench import cli as bench_cli
from ninfer.regress import cli as regress_cli

ROOT = Path(__file__).resolve().parents[2]
# A committed baseline cut to its first points: the same structure, a fraction of the
# parse and validation time per case.
RECORD = json.loads((ROOT / "baselines/h200/qwen3_6_35b_a3b.json").read_text())
RECORD["points"] = RECORD["points"][:4]
SUITE = (ROOT / "suites/qwen3_6_27b.yaml").read_text()
CASES = 120
ODD: list[Any] = [None, "", "x", -1, 0, 2**63, 1e308, -0.0, [], {}, [[[]]], True, "NaN", "1e999"]


def _paths(doc: Any, at: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [at]
    if isinstance(doc, dict):
        for k, v in doc.items():
            out += _paths(v, (*at, k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc[:3]):  # a few list items: the rest have the same shape
            out += _paths(v, (*at, i))
    return out


def _mutate_record(rng: random.Random) -> tuple[str, str]:
    doc = copy.deepcopy(RECORD)
    paths = _paths(doc)[1:]
    what = []
    for _ in range(rng.randint(1, 3)):
        path = rng.choice(paths)
        parent = doc
        try:
            for k in path[:-1]:
                parent = parent[k]
            if rng.random() < 0.3 and isinstance(parent, dict):
                parent.pop(path[-1], None)
                what.append(f"del {path}")
            else:
                parent[path[-1]] = v = copy.deepcopy(rng.choice(ODD))
                what.append(f"{path} = {v!r}")
        except (KeyError, IndexError, TypeError):
            continue  # an earlier mutation removed the way there
    text = json.dumps(doc)
    if rng.random() < 0.15:
        cut = rng.randrange(len(text))
        text, what = text[:cut], [*what, f"truncated at {cut}"]
    return text, "; ".join(what)


def _mutate_suite(rng: random.Random) -> tuple[str, str]:
    lines = SUITE.splitlines()
    i = rng.randrange(len(lines))
    choice = rng.randrange(5)
    if choice == 0:
        lines[i] = lines[i].replace("n: ", "n: -", 1)
    elif choice == 1:
        lines[i] = lines[i].replace("qtype: ", "qtype: zz", 1)
    elif choice == 2:
        lines.insert(i, lines[i])  # a duplicated line: duplicate key or entry
    elif choice == 3:
        lines[i] = lines[i][: rng.randrange(len(lines[i]) + 1)]
    else:
        lines[i] = lines[i].replace("5120", str(rng.choice([0, 2**31, 2**40, -5])), 1)
    return "\n".join(lines) + "\n", f"line {i + 1} -> {lines[i] if i < len(lines) else ''!r}"


def _run(main: Callable[[list[str]], int], argv: list[str]) -> int:
    try:
        return main(argv)
    except SystemExit as e:  # argparse's usage errors
        return e.code if isinstance(e.code, int) else 2


def _check(rc: int, err: str, seed: int, what: str) -> None:
    assert rc in (0, 1, 2), f"seed {seed}: exit {rc} for {what}"
    assert "Traceback" not in err and "internal error" not in err, (
        f"seed {seed}: a traceback for {what}:\n{err[-1500:]}"
    )


@pytest.mark.parametrize("seed", range(CASES))
def test_results_loader_fuzz(seed: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rng = random.Random(seed)
    text, what = _mutate_record(rng)
    bad = tmp_path / "bad.json"
    bad.write_text(text)
    base = str(tmp_path / "base.json")
    Path(base).write_text(json.dumps(RECORD))
    for argv in (["compare", base, str(bad)], ["compare", str(bad), base, "--json", "-"]):
        rc = _run(regress_cli.main, argv)
        _check(rc, capsys.readouterr().err, seed, f"{argv[0]} with record mutation {what}")


@pytest.mark.parametrize("seed", range(CASES))
def test_suite_file_fuzz(seed: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rng = random.Random(seed)
    text, what = _mutate_suite(rng)
    suite = tmp_path / "s.yaml"
    suite.write_text(text)
    rc = _run(bench_cli.main, ["--suite-file", str(suite), "--list"])
    _check(rc, capsys.readouterr().err, seed, f"--suite-file with {what}")


_BENCH_OPTS: dict[str, list[str]] = {
    "--qtype": ["q4", "w8", "nvfp4", "zz", ""],
    "--policy": ["a16", "a4", "x"],
    "--n": ["4096", "0", "-1", "2147483648", "1e3", "x"],
    "--k": ["5120", "0", "-7", "99999999999"],
    "--t": ["1", "0", "-1", "2147483648"],
    "--sweep": ["1:64", "64:1", "0:4", "1:", "a:b", "1:2147483648"],
    "--repeat": ["20", "0", "-3", "x"],
    "--warmup": ["3", "-1"],
    "--flush-mib": ["256", "-5", "0"],
    "--suite": ["all", "nope"],
    "--json-out": ["/", "/nonexistent/dir/r.json"],
}


@pytest.mark.parametrize("seed", range(CASES))
def test_bench_argv_fuzz(seed: int, capsys: pytest.CaptureFixture[str]) -> None:
    """--list never touches the GPU, so every combination must end in a clean exit."""
    rng = random.Random(seed)
    opts = rng.sample(sorted(_BENCH_OPTS), rng.randint(1, 5))
    argv = [a for o in opts for a in (o, rng.choice(_BENCH_OPTS[o]))] + ["--list"]
    rc = _run(bench_cli.main, argv)
    _check(rc, capsys.readouterr().err, seed, f"ninfer-bench {' '.join(argv)}")
