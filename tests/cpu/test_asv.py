"""The asv suite (suites/asv_linear.py, asv.conf.json) without a GPU.

Generated classes cover each model suite exactly; parameter ids are unique; the contract
constants are ninfer-bench's defaults; asv's own timing loop turns the ``timer``
attribute into one sample per call; ``asv check`` passes; setup fails
(RuntimeError, so asv exits 2) where no GPU is usable.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from ninfer.bench.cli import build_parser
from ninfer.bench.points import MODEL_SUITES, load_suite
from ninfer.runtime.cupy_env import gpu_available

REPO = Path(__file__).resolve().parents[2]
MODULE_PATH = REPO / "suites" / "asv_linear.py"
CONFIG = REPO / "asv.conf.json"


@pytest.fixture(scope="module")
def asv_linear() -> ModuleType:
    # Loaded from the checkout by path: that file is what asv imports (benchmark_dir),
    # whichever ninfer is installed.
    if not MODULE_PATH.is_file():
        pytest.skip(f"{MODULE_PATH} not present (not a source checkout)")
    spec = importlib.util.spec_from_file_location("ninfer_asv_linear_under_test", MODULE_PATH)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _asv_installed() -> bool:
    return importlib.util.find_spec("asv") is not None


@pytest.mark.parametrize("suite", MODEL_SUITES)
def test_one_class_per_suite_covers_exactly_its_points(asv_linear: ModuleType, suite: str) -> None:
    cls = asv_linear.SUITE_CLASSES[suite]
    assert getattr(asv_linear, cls.__name__) is cls  # where asv discovery looks
    expected = load_suite(suite)
    assert len(cls.params) == len(expected)
    assert [cls.points[i].key for i in cls.params] == [p.key for p in expected]
    assert cls.param_names == ["point"]


def test_param_ids_unique_and_readable(asv_linear: ModuleType) -> None:
    seen: set[str] = set()
    for suite, cls in asv_linear.SUITE_CLASSES.items():
        assert len(set(cls.params)) == len(cls.params), suite
        for pid in cls.params:
            p = cls.points[pid]
            assert pid == f"{p.label}/{p.qtype.value}/{p.policy.value}/N{p.n}/K{p.k}/T{p.t}"
        seen |= set(cls.params)
    # Labels carry the model prefix, so ids are unique across suites too.
    assert len(seen) == sum(len(c.params) for c in asv_linear.SUITE_CLASSES.values())


def test_contract_is_ninfer_bench_defaults(asv_linear: ModuleType) -> None:
    # The constants live in the asv module (they define its results' version) and must
    # not drift from what ninfer-bench times by default.
    ap = build_parser()
    got = (asv_linear.WARMUP, asv_linear.REPEAT, asv_linear.FLUSH_MIB, asv_linear.EXECUTION)
    want = tuple(ap.get_default(k) for k in ("warmup", "repeat", "flush_mib", "execution"))
    assert got == want
    # Rounds as ninfer-regress bench replicates them: a fresh process each.
    from ninfer.regress.runner import DEFAULT_ROUNDS

    assert asv_linear.ROUNDS == DEFAULT_ROUNDS
    assert all(c.rounds == DEFAULT_ROUNDS for c in asv_linear.SUITE_CLASSES.values())


def test_only_the_suite_classes_are_benchmarks(asv_linear: ModuleType) -> None:
    timed = sorted(
        name
        for name, obj in vars(asv_linear).items()
        if isinstance(obj, type) and not name.startswith("_") and hasattr(obj, "time_linear")
    )
    assert timed == sorted(c.__name__ for c in asv_linear.SUITE_CLASSES.values())


def test_setup_fails_without_gpu(asv_linear: ModuleType) -> None:
    """A failure (asv exits 2), not asv's skip: a skip on both commits is a false green."""
    ok, _ = gpu_available()
    if ok:
        pytest.skip("a GPU is usable here; the failure path is for machines without one")
    for cls in asv_linear.SUITE_CLASSES.values():
        with pytest.raises(RuntimeError, match="needs a CUDA GPU"):
            cls().setup(cls.params[0])


def test_asv_samples_are_the_event_times(
    asv_linear: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    """asv's real timing loop stores exactly one measure() per sample, nothing else."""
    # asv's own discovery step (private, but it is exactly what `asv run` does).
    discovery = pytest.importorskip("asv_runner.discovery", reason="asv is not installed")
    _get_benchmark = discovery._get_benchmark

    # Device times that no wall clock would produce; setup and the body's own wall
    # time (flush, synchronisation) must not leak into the samples.
    times = iter(k * 1e-6 for k in range(1, 1000))
    built: list[str] = []

    class FakeCall:
        def __init__(self, p: object) -> None:
            built.append(repr(p))

        def measure(self) -> float:
            return next(times)

    monkeypatch.setattr(asv_linear, "gpu_available", lambda: (True, ""))
    monkeypatch.setattr(asv_linear, "_ColdCall", FakeCall)
    monkeypatch.setattr(asv_linear, "_PREPARED", {})
    cls = asv_linear.SUITE_CLASSES[MODEL_SUITES[0]]
    bench = _get_benchmark("time_linear", asv_linear, cls, cls.time_linear)
    assert bench is not None and bench.type == "time"
    bench.set_param_idx(3)
    assert bench.do_setup() is False  # not skipped
    result = bench.do_run()
    assert result["number"] == 1
    assert result["samples"] == pytest.approx(
        [k * 1e-6 for k in range(1, asv_linear.REPEAT + 1)], rel=1e-9, abs=1e-12
    )
    assert len(built) == 1  # device state built once, though setup re-runs per sample


def test_asv_check_passes() -> None:
    if not _asv_installed():
        pytest.skip("asv is not installed (pip install asv)")
    if not CONFIG.is_file():
        pytest.skip(f"{CONFIG} not present (not a source checkout)")
    # existing:same: the interpreter running asv, so no environment is built and no
    # repository is needed; the suite imports against the installed ninfer.
    proc = subprocess.run(
        [sys.executable, "-m", "asv", "check", "--config", str(CONFIG), "-E", "existing:same"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "No problems found" in proc.stdout
