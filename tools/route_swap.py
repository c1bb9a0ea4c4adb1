"""Time one public ``linear()`` call under a route table of the tool's choosing.

Shared by the crossover tools (route_crossover.py, prefill_crossover.py): the selector is
private, so they swap ``ROUTE_TABLES`` as the tests do, and put the real table back
whatever happens.
"""

from __future__ import annotations

from typing import Any

from ninfer.bench.run import prepared_call
from ninfer.bench.timer import ColdTimer
from ninfer.routes import table
from ninfer.routes.table import Route


def from_t(route: str, t_from: int) -> dict[int, tuple[Route, ...]]:
    """For every architecture key: dec_q below ``t_from``, ``route`` from it on."""
    return {
        cc: (Route("dec_q", 1, t_from - 1), Route(route, t_from, None)) for cc in table.ROUTE_TABLES
    }


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
