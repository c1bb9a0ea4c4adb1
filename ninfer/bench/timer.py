"""The cold-cache timing contract (DESIGN §7).

Per sample: a 256 MiB buffer is written on the timing stream (evicting L2) and completes
before the start event; CUDA events wrap exactly one call. ``graph`` replays one CUDA
graph holding one call, so Python overhead stays out. ``direct`` launches the call
itself while a blocking kernel holds the stream (released by the host once the call is
enqueued, as nvbench does), so host latency is hidden too. Host dispatch time of the
call is measured apart, never mixed into device time.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..runtime.cupy_env import require_cupy

_SPIN_SRC = r"""
extern "C" __global__ void ninfer_spin(volatile int* flag, unsigned long long timeout_ns) {
  unsigned long long t0, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  } while (*flag == 0 && t - t0 < timeout_ns);
}
"""


@dataclass
class Samples:
    samples_us: list[float]
    host_us: list[float] = field(default_factory=list)
    execution: str = "graph"
    note: str = ""
    probes: list[Any] = field(default_factory=list)

    @property
    def median_us(self) -> float:
        return float(np.median(self.samples_us))

    @property
    def min_us(self) -> float:
        return float(np.min(self.samples_us))

    @property
    def p95_us(self) -> float:
        return float(np.percentile(self.samples_us, 95))

    @property
    def host_median_us(self) -> float:
        return float(np.median(self.host_us)) if self.host_us else float("nan")


class ColdTimer:
    """Times ``fn`` (which enqueues its work on ``self.stream``) under the contract."""

    def __init__(
        self,
        warmup: int = 3,
        repeat: int = 20,
        flush_mib: int = 256,
        execution: str = "graph",
        flush_buf: Any = None,
    ) -> None:
        if execution not in ("graph", "direct"):
            raise ValueError(f"execution: expected 'graph' or 'direct', got {execution!r}")
        if warmup < 0 or repeat < 1 or flush_mib < 0:
            raise ValueError(
                f"expected warmup >= 0, repeat >= 1, flush_mib >= 0, got {warmup}, {repeat}, {flush_mib}"
            )
        cp = require_cupy()
        self.cp = cp
        self.warmup, self.repeat, self.flush_mib, self.execution = (
            warmup,
            repeat,
            flush_mib,
            execution,
        )
        self.stream = cp.cuda.Stream(non_blocking=True)
        # The caller may place the flush buffer (the run's arena, bench/memory.py).
        self.flush_buf = (
            flush_buf
            if flush_buf is not None
            else cp.empty(max(flush_mib, 1) * (1 << 20) // 4, cp.int32)
        )
        self._flush_val = 0
        self.start, self.end = cp.cuda.Event(), cp.cuda.Event()
        self._spin: Any = None
        self._flag: Any = None

    def flush(self) -> None:
        if self.flush_mib == 0:
            return
        self._flush_val += 1  # a new value each time: the writes cannot be elided
        with self.stream:
            self.flush_buf.fill(self._flush_val)

    def _blocker(self) -> tuple[Any, Any]:
        if self._spin is None:
            cp = self.cp
            self._spin = cp.RawKernel(_SPIN_SRC, "ninfer_spin")
            mem = cp.cuda.alloc_pinned_memory(4)
            self._flag = np.frombuffer(mem, np.int32, 1)
            self._flag_mem = mem
        return self._spin, self._flag

    def host_dispatch_us(self, fn: Callable[[], Any], n: int = 20) -> list[float]:
        """Host time of one call (enqueue only), while a blocking kernel keeps the GPU idle."""
        spin, flag = self._blocker()
        out: list[float] = []
        for _ in range(n):
            flag[0] = 0
            with self.stream:
                spin((1,), (1,), (np.uint64(self._flag_mem.ptr), np.uint64(50_000_000)))
                t0 = time.perf_counter()
                fn()
                t1 = time.perf_counter()
            flag[0] = 1
            self.stream.synchronize()
            out.append((t1 - t0) * 1e6)
        return out

    def capture(self, fn: Callable[[], Any]) -> tuple[Callable[[], Any], str, str]:
        """Warm ``fn`` up (flushed) and capture it: (launch, execution, note).

        In graph mode ``launch`` replays one CUDA graph holding one call; a capture that
        is refused (a peer library that synchronises) falls back to direct, marked.
        """
        with self.stream:
            for _ in range(self.warmup):
                self.flush()
                fn()
        self.stream.synchronize()
        if self.execution == "direct":
            return fn, "direct", ""
        try:
            self.stream.begin_capture()
            with self.stream:
                fn()
            graph = self.stream.end_capture()
        except Exception as e:
            with contextlib.suppress(Exception):
                self.stream.end_capture()
            return fn, "direct", f"graph capture failed ({type(e).__name__}); direct fallback"
        # The first replay of a fresh graph also uploads it: keep that out of the samples.
        graph.launch(self.stream)
        self.stream.synchronize()
        return (lambda: graph.launch(self.stream)), "graph", ""

    def sample_us(self, launch: Callable[[], Any], execution: str) -> float:
        """One sample: flush, start event, one launch, end event; microseconds."""
        self.flush()
        spin, flag = self._blocker()
        with self.stream:
            if execution == "direct":
                flag[0] = 0
                spin((1,), (1,), (np.uint64(self._flag_mem.ptr), np.uint64(50_000_000)))
            self.start.record(self.stream)
            launch()
            self.end.record(self.stream)
        flag[0] = 1
        self.end.synchronize()
        return float(self.cp.cuda.get_elapsed_time(self.start, self.end)) * 1000.0

    def time(self, fn: Callable[[], Any], probe: Callable[[], Any] | None = None) -> Samples:
        """``repeat`` samples of ``fn``; ``probe`` (e.g. the SM clock through NVML) is
        read right after each sample, while the card still runs at that sample's state."""
        launch, mode, note = self.capture(fn)
        samples, probes = [], []
        for _ in range(self.repeat):
            samples.append(self.sample_us(launch, mode))
            if probe is not None:
                probes.append(probe())
        return Samples(samples, execution=mode, note=note, probes=probes)
