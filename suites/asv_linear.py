"""asv benchmarks of the public ``linear()`` call, generated from the model suites.

One class per model suite file (``Qwen3_6_27b``, ``Qwen3_6_35b_a3b``), built at import
time from ``ninfer.bench.points.load_suite``; every suite point is one value of the
``point`` parameter, so asv stores, plots and compares each point on its own.

Each asv sample is the device time of ONE cold-cache call, taken with CUDA events under
ninfer-bench's contract (ninfer/bench/timer.py): a 256 MiB flush on the timing stream
completes before the start event, and one captured CUDA graph holding one call sits
between the events. asv reads that time through the benchmark's ``timer`` attribute
(accumulated event seconds) with ``number = 1`` and no wall-clock warm-up, so
``asv compare`` / ``asv continuous`` run their statistics on the same samples that
ninfer-bench reports. The reasoning is in docs/asv.md.
"""

from __future__ import annotations

import functools
import hashlib
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

from ninfer.bench.points import MODEL_SUITES, BenchPoint, load_suite
from ninfer.runtime.cupy_env import gpu_available

# ninfer-bench's defaults (ninfer/bench/cli.py), so both tools time the same thing.
WARMUP = 3
REPEAT = 20
FLUSH_MIB = 256
EXECUTION = "graph"
ROUNDS = 5  # ninfer-regress bench's rounds (ninfer/regress/runner.py DEFAULT_ROUNDS)

_HERE = Path(__file__).resolve().parent

# The results of a benchmark are comparable only while the measurement is unchanged.
# asv's default version hashes the source of the timed method and setup alone, which
# misses the contract constants above and the helper class below; the whole file is
# what defines the measurement, so its hash is the version. (The points themselves are
# parameters and need no version: asv keys results by parameter value.)
VERSION = hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:16]


def point_id(p: BenchPoint) -> str:
    """The asv parameter value of a point: readable, and unique within a suite."""
    return f"{p.label}/{p.qtype.value}/{p.policy.value}/N{p.n}/K{p.k}/T{p.t}"


class _ColdCall:
    """One point on the device: weight, buffers, workspace and a captured call.

    Set up as ``ninfer.bench.run.run_points`` does (same fixture and seed, workspace
    from ``linear_workspace_bytes``, first call untimed), then warmed up and captured
    once per process by ``ColdTimer.capture``; each sample is ``ColdTimer.sample_us``,
    the same per-sample body that ``ColdTimer.time`` runs for ninfer-bench.
    """

    def __init__(self, p: BenchPoint) -> None:
        # Imported here, not at module level: discovery and `asv check` import this
        # module on machines without CuPy.
        from ninfer.bench.fixture import random_activations, random_device_weight
        from ninfer.bench.timer import ColdTimer
        from ninfer.ops import linear, linear_workspace_bytes
        from ninfer.runtime.cupy_env import require_cupy

        cp = require_cupy()
        self.cp = cp
        w = random_device_weight(p.qtype, p.n, p.k, seed=hash((p.n, p.k)) & 0xFFFF)
        # run_points views T rows of a max-T allocation; T rows of their own have the
        # same row-major layout and base alignment.
        x = random_activations(p.t, p.k)
        out = cp.empty((p.t, p.n), dtype=x.dtype)
        # Not ninfer.bench.run.prepared_call: this file runs against older installed
        # commits too (see _capture below), which do not have it.
        ws_bytes = linear_workspace_bytes(w, p.t, p.policy)
        ws = cp.empty(ws_bytes, cp.uint8) if ws_bytes else None
        call = functools.partial(linear, x, w, out, policy=p.policy, workspace=ws)
        call()  # compile and first call: never timed
        cp.cuda.Device().synchronize()
        self._buffers = (w, x, out, ws)  # the captured graph points into these

        # repeat=1: asv, not the ColdTimer, decides how many samples are taken. The
        # warm-up and capture happen once per process; each asv sample is one
        # ColdTimer.sample_us, the per-sample body of ColdTimer.time.
        t = ColdTimer(WARMUP, 1, FLUSH_MIB, EXECUTION)
        self.timer = t
        self.launch, self.execution, self.note = _capture(t, call)
        if self.note:
            # ninfer-bench marks this in its JSON; asv has no field for it, so it goes to
            # stderr (shown by `asv run/continuous --show-stderr`).
            print(f"asv_linear: {point_id(p)}: {self.note}", file=sys.stderr)

        self._clock = _clock_probe()

    def measure(self) -> float:
        """Seconds between the events around one cold call (one sample).

        A sample the card ran below ninfer's clock floor (a power-state dip, the H200's
        largest noise; docs/regress.md) is taken again after a pause, as ninfer-bench
        re-measures such a round; the last try is kept either way.
        """
        for _ in range(1 + _REMEASURE):
            us = _sample_us(self.timer, self.launch, self.execution)
            if self._clock is None or self._clock():
                break
            time.sleep(0.5)
        return us / 1e6


_REMEASURE = 3


def _clock_probe() -> Callable[[], bool] | None:
    """True while the SM clock reads at or above the floor; None without NVML or
    without ninfer.bench.telemetry (an older measured commit)."""
    try:
        import cupy as cp

        from ninfer.bench.telemetry import CLOCK_FLOOR, Telemetry
    except ImportError:
        return None
    tel = Telemetry(pci_bus_id=cp.cuda.Device().pci_bus_id)
    top = tel.max_sm_mhz() if tel.available else None
    if not top:
        return None
    return lambda: (tel.sm_mhz() or top) >= CLOCK_FLOOR * top


# asv imports THIS file (the checkout's) but runs it against each measured commit's
# installed ninfer, so it may only rely on what the oldest measured commit has. ninfer
# before ColdTimer.capture/sample_us (e.g. 9c43876) gets the same steps inline.
def _capture(t: Any, call: Callable[[], Any]) -> tuple[Callable[[], Any], str, str]:
    if hasattr(t, "capture"):
        launch, execution, note = t.capture(call)
        return launch, execution, note
    with t.stream:
        for _ in range(WARMUP):
            t.flush()
            call()
    t.stream.synchronize()
    t.stream.begin_capture()
    with t.stream:
        call()
    graph = t.stream.end_capture()
    graph.launch(t.stream)  # upload, untimed
    t.stream.synchronize()
    return (lambda: graph.launch(t.stream)), "graph", ""


def _sample_us(t: Any, launch: Callable[[], Any], execution: str) -> float:
    if hasattr(t, "sample_us"):
        return float(t.sample_us(launch, execution))
    t.flush()
    with t.stream:
        t.start.record(t.stream)
        launch()
        t.end.record(t.stream)
    t.end.synchronize()
    return float(t.cp.cuda.get_elapsed_time(t.start, t.end)) * 1000.0


# asv re-runs setup before every sample (and teardown after), in one process per
# benchmark parameter; the device state is built once per process and kept here.
_PREPARED: dict[str, _ColdCall] = {}


class _LinearSuite:
    """Base of the generated suite classes (asv skips names with a leading underscore)."""

    suite: ClassVar[str] = ""
    points: ClassVar[dict[str, BenchPoint]] = {}
    params: ClassVar[list[str]] = []
    param_names: ClassVar[list[str]] = ["point"]

    # asv timing attributes. number=1: a sample is one call, never an average of calls
    # (and asv's calibration of `number` is skipped). repeat: ninfer-bench's sample
    # count. warmup_time=0: asv's warm-up is wall-clock driven; the contract's warm-up
    # (WARMUP calls) is done in setup instead. rounds=ROUNDS: asv runs each round in a
    # fresh process, benchmarks interleaved, which is the level the H200's noise lives
    # at (docs/regress.md): the same replication as ninfer-regress bench.
    number = 1
    repeat = REPEAT
    rounds = ROUNDS
    warmup_time = 0.0
    timeout = 300.0  # seconds; the first process of a run compiles the kernels
    version = VERSION

    _gpu_s = 0.0
    _measure: Callable[[], float]  # set by setup

    def setup(self, point: str) -> None:
        ok, reason = gpu_available()
        if not ok:
            # A failure, not asv's skip (NotImplementedError): a skipped point reads n/a
            # on both commits, and `asv continuous` then says "not significantly changed"
            # and exits 0, a green run that measured nothing. A failed one exits 2.
            raise RuntimeError(f"needs a CUDA GPU with CuPy: {reason}")
        key = f"{self.suite}:{point}"
        if key not in _PREPARED:
            _PREPARED[key] = _ColdCall(self.points[point])
        self._measure = _PREPARED[key].measure

    def time_linear(self, point: str) -> None:
        self._gpu_s += self._measure()

    def timer(self) -> float:
        """asv's clock for this benchmark: device seconds accumulated by time_linear.

        asv (through timeit) reads it right before and right after the timed call and
        stores the difference, so each sample is exactly one call's event time; flush,
        event synchronisation and Python overhead in the body never reach it.
        """
        return self._gpu_s


def _suite_class(suite: str) -> type[_LinearSuite]:
    # Points come from the YAML next to this file, i.e. from the checkout asv runs
    # in, not from the ninfer installed in the asv environment: both commits of
    # `asv continuous` then time the same points under the same parameter indices.
    by_id = {point_id(p): p for p in load_suite(suite, root=_HERE)}
    name = suite[:1].upper() + suite[1:]
    attrs = {
        "__module__": __name__,
        "__doc__": f"Cold-cache public linear() over the points of suites/{suite}.yaml.",
        "suite": suite,
        "points": by_id,
        "params": list(by_id),
    }
    return type(name, (_LinearSuite,), attrs)


SUITE_CLASSES: dict[str, type[_LinearSuite]] = {s: _suite_class(s) for s in MODEL_SUITES}
# asv collects benchmark classes from the module namespace.
globals().update({cls.__name__: cls for cls in SUITE_CLASSES.values()})
