"""tools/experiment.py: an experiment file is checked before any GPU work."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location("experiment", ROOT / "tools/experiment.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


GOOD = """suite: all
only: ["w8 a16 [14336,5120] T=128"]
variants:
  shipped: {}
  nb2: {tuning: {dq_rs: {nb: 2}}}
"""


def test_a_good_experiment_loads(tmp_path: Path) -> None:
    f = tmp_path / "e.yaml"
    f.write_text(GOOD)
    doc = _tool().load(f)
    assert list(doc["variants"]) == ["shipped", "nb2"]
    assert _tool()._key("w8 a16 [14336,5120] T=128") == ("w8", "a16", 14336, 5120, 128)


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("suite: all\nvariants: {a: {}}\n", "expected two or more"),
        ("variants: {a: {}, b: {}}\n", "expected one of suite and suite_file"),
        ("suite: nope\nvariants: {a: {}, b: {}}\n", "suite: expected one of"),
        ("suite: all\nvariants: {a: {}, b: {force: gemv}}\n", r"variants\.b: force: expected"),
        ("suite: all\nvariants: {a: {}, b-c: {}}\n", "expected identifier names"),
        ("suite: all\nonly: ['q4 a16 [1,1] T=1']\nvariants: {a: {}, b: {}}\n", "not points"),
        ("suite: all\nvariant: {a: {}, b: {}}\n", "expected keys among"),
    ],
)
def test_a_bad_experiment_is_refused(tmp_path: Path, text: str, match: str) -> None:
    f = tmp_path / "e.yaml"
    f.write_text(text)
    with pytest.raises(ValueError, match=match):
        _tool().load(f)


EXPERIMENTS = sorted(ROOT.glob("experiments/**/*_exp.yaml"))


@pytest.mark.parametrize("path", EXPERIMENTS, ids=lambda p: p.name)
def test_every_committed_experiment_loads_with_its_points(path: Path) -> None:
    """A committed experiment is run later, in a device call: its overrides build and its
    points load here, on the CPU, where a typo costs nothing."""
    from ninfer.bench.points import load_suite, load_suite_file

    doc = _tool().load(path)
    pts = load_suite(doc["suite"]) if "suite" in doc else load_suite_file(ROOT / doc["suite_file"])
    assert pts
