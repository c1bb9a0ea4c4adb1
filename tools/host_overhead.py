"""Host-side cost of one ``linear()`` call per route, and where it goes (cProfile).

Times the enqueue only (the stream is synchronised every 100 calls, outside the timed
region). Prints the median (µs) of a bare CuPy launch, then for each point the median of
linear() and a cProfile of 2000 calls.

    python tools/host_overhead.py --point q4:6144:5120:1 --point q4:14336:5120:128
"""

from __future__ import annotations

import cProfile
import functools
import pstats
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from ninfer import QType
from ninfer.bench.fixture import random_activations, random_device_weight
from ninfer.ops import linear, linear_workspace_bytes
from ninfer.ops.dispatch import DEFAULT


def median_us(fn: Callable[[], Any], n: int = 2000) -> float:
    import cupy as cp

    out = []
    for i in range(n):
        if i % 100 == 0:
            cp.cuda.get_current_stream().synchronize()
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    cp.cuda.get_current_stream().synchronize()
    return float(np.median(out)) * 1e6


def main(argv: list[str] | None = None) -> int:
    import argparse

    import cupy as cp

    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument(
        "--point", action="append", metavar="Q:N:K:T",
        help="a point to time, e.g. q4:6144:5120:1 (repeatable; default: that one)",
    )  # fmt: skip
    ap.add_argument("--profile", type=int, default=25, help="cProfile rows per point (0: none)")
    a = ap.parse_args(argv)
    k = cp.RawKernel('extern "C" __global__ void nop(int a) {}', "nop")
    k((1,), (32,), (np.int32(0),))
    print(
        f"{'bare cupy RawKernel launch (1 arg)':<44} {median_us(lambda: k((1,), (32,), (np.int32(0),))):8.2f} us"
    )
    for spec in a.point or ["q4:6144:5120:1"]:
        q, n, kk, t = spec.split(":")
        w = random_device_weight(QType(q), int(n), int(kk))
        x = random_activations(int(t), int(kk))
        out = cp.empty((int(t), int(n)), dtype=x.dtype)
        need = linear_workspace_bytes(w, int(t))
        ws = cp.empty(need, cp.uint8) if need else None
        call = functools.partial(linear, x, w, out, workspace=ws)
        call()
        cp.cuda.Device().synchronize()
        route = DEFAULT.plan(w, int(t)).__class__.__name__
        print(
            f"linear {spec} ({route}){'':<{max(0, 24 - len(spec) - len(route))}} {median_us(call):8.2f} us"
        )
        if a.profile:
            prof = cProfile.Profile()
            prof.enable()
            for i in range(2000):
                call()
                if i % 100 == 0:
                    cp.cuda.get_current_stream().synchronize()
            prof.disable()
            pstats.Stats(prof).sort_stats("tottime").print_stats(a.profile)
        cp.cuda.Device().synchronize()
    return 0


if __name__ == "__main__":
    sys.exit(main())
