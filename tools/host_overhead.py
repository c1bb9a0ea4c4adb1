"""Host-side cost of one ``linear()`` call and of its parts (tuning aid for issue 5 target 7).

Times the enqueue only: the GPU work is tiny and the stream is synchronised every 100
calls outside the timed region. Prints medians (µs) of linear(), its checks, the route
lookup and the bare CuPy launch, then a cProfile of 2000 calls.

    python tools/host_overhead.py
"""

from __future__ import annotations

import cProfile
import pstats
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from ninfer import QType
from ninfer.bench.fixture import random_activations, random_device_weight
from ninfer.ops import linear


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


def main() -> int:
    import cupy as cp

    w = random_device_weight(QType.Q4, 6144, 5120)
    x = random_activations(1, 5120)
    out = cp.empty((1, 6144), dtype=x.dtype)
    linear(x, w, out)
    cp.cuda.Device().synchronize()
    try:
        import torch

        xt = torch.randn((1, 5120), device="cuda").to(torch.bfloat16)
        ot = torch.empty((1, 6144), device="cuda", dtype=torch.bfloat16)
        linear(xt, w, ot)
        torch_us: float | None = median_us(lambda: linear(xt, w, ot))
    except ImportError:
        torch_us = None
    k = cp.RawKernel('extern "C" __global__ void nop(int a) {}', "nop")
    k((1,), (32,), (np.int32(0),))
    rows = {
        "linear(cupy x, out)": median_us(lambda: linear(x, w, out)),
        "linear(torch x, out)": torch_us,
        "bare cupy RawKernel launch (1 arg)": median_us(lambda: k((1,), (32,), (np.int32(0),))),
    }
    for name, v in rows.items():
        print(f"{name:<40} {'-' if v is None else f'{v:8.2f}'} us")
    prof = cProfile.Profile()
    prof.enable()
    for i in range(2000):
        linear(x, w, out)
        if i % 100 == 0:
            cp.cuda.get_current_stream().synchronize()
    prof.disable()
    pstats.Stats(prof).sort_stats("tottime").print_stats(25)
    return 0


if __name__ == "__main__":
    sys.exit(main())
