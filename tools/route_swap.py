"""Time one public ``linear()`` call under a route table of the tool's choosing.

Shared by the crossover tools (route_crossover.py, prefill_crossover.py, dq_rs_tiles.py):
the selector is private, so they swap ``ROUTE_TABLES`` as the tests do, and put the real
table back whatever happens; and the check of one route's output against another's.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ninfer.bench.run import prepared_call
from ninfer.bench.timer import ColdTimer
from ninfer.routes import table
from ninfer.routes.table import Route


def from_t(route: str, t_from: int) -> dict[int, tuple[Route, ...]]:
    """For every architecture key: dec_q below ``t_from``, ``route`` from it on."""
    return {
        cc: (Route("dec_q", 1, t_from - 1), Route(route, t_from, None)) for cc in table.ROUTE_TABLES
    }


def parse_shapes(text: str, default: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """``NxK,...`` as (N, K) pairs; ``default`` when empty."""
    if not text:
        return default
    return [(int(n), int(k)) for n, k in (s.split("x") for s in text.split(","))]


def host_f32(out: Any) -> Any:
    """A BF16 device array as FP32 on the host (exact: BF16 is FP32's upper half)."""
    return (out.view("uint16").get().astype(np.uint32) << 16).view(np.float32)


def bf16_steps(ref: Any, got: Any) -> float:
    """Largest |got - ref| in BF16 steps at ref's largest magnitude (one step is
    2^(e - 7)); infinite when either holds a non-finite value. Two routes that round each
    weight once to BF16 and sum in FP32 differ by the summation order only: more than one
    step is a defect."""
    if not (np.isfinite(ref).all() and np.isfinite(got).all()):
        return float("inf")
    step = 2.0 ** (np.floor(np.log2(np.max(np.abs(ref)) or 1.0)) - 7)
    return float(np.max(np.abs(got - ref)) / step)


def time_under(
    tables: dict[int, tuple[Route, ...]], timer: ColdTimer, x: Any, w: Any, out: Any
) -> float:
    """Median µs of the call under ``tables``; its first call (compile, plan) is untimed."""
    import cupy as cp

    real = table.ROUTE_TABLES
    table.ROUTE_TABLES = tables
    try:
        cp.cuda.Device().synchronize()
        with timer.stream:
            call = prepared_call(x, w, out)
        return float(timer.time(call).median_us)
    finally:
        table.ROUTE_TABLES = real
