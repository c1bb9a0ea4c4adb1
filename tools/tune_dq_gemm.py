"""Time the dq_gemm route's band size on the GPU (a tuning aid, not the route table).

For each shape, T and candidate band budget (``dq_gemm.BAND_BYTES``), times one public
``linear()`` call under the same cold timer as ``ninfer-bench`` (graph replay, 256 MiB
flush) beside cuBLAS BF16 on the same shape (the ``--peer cublas`` call), and prints
one row per point. The chosen budget goes into ninfer/routes/dq_gemm.py by hand, with
the numbers in docs/perf/prefill_h200.md.

    python tools/tune_dq_gemm.py [--qtypes q4,w8] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import sys

from ninfer import Policy, QType
from ninfer.bench.env import environment
from ninfer.bench.fixture import random_activations, random_device_weight
from ninfer.bench.peers import cublas_call
from ninfer.bench.run import prepared_call
from ninfer.bench.timer import ColdTimer
from ninfer.routes import Problem, dq_gemm

SHAPES = [(14336, 5120), (5120, 17408), (34816, 5120)]
TS = [128, 1024]
BANDS_MIB = [24, 48, 1 << 20]  # the last: the whole weight in one band


def main() -> int:
    import cupy as cp

    ap = argparse.ArgumentParser()
    ap.add_argument("--qtypes", default="q4")
    ap.add_argument("--json")
    ap.add_argument("--repeat", type=int, default=20)
    args = ap.parse_args()
    env = environment(0)
    timer = ColdTimer(3, args.repeat, 256, "graph")
    rows = []
    print("qtype N K T band_MiB band_rows median_us cublas_us x_vs_cublas TFLOPs")
    for n, k in SHAPES:
        for t in TS:
            x = random_activations(t, k)
            cp.cuda.Device().synchronize()
            ref = timer.time(cublas_call(n, k, t, timer.stream.ptr)).median_us
            for q in (QType(s) for s in args.qtypes.split(",")):
                w = random_device_weight(q, n, k, seed=7)
                for mib in BANDS_MIB:
                    dq_gemm.BAND_BYTES = mib << 20
                    w.dispatch_cache.clear()  # a new band size is a new plan
                    out = cp.empty((t, n), dtype=x.dtype)
                    with timer.stream:
                        call = prepared_call(x, w, out)
                    us = timer.time(call).median_us
                    rows_band = dq_gemm.band_rows(Problem(q, Policy.A16, n, k, t, 90))
                    tflops = 2 * n * k * t / us / 1e6
                    rows.append({
                        "qtype": q.value, "n": n, "k": k, "t": t, "band_mib": mib,
                        "band_rows": rows_band, "median_us": us, "cublas_us": ref,
                    })  # fmt: skip
                    print(
                        f"{q.value:<5} {n} {k} {t:>4} {min(mib, 99999):>5} {rows_band:>6} "
                        f"{us:9.1f} {ref:9.1f} {ref / us:5.2f} {tflops:6.0f}",
                        flush=True,
                    )
                    del call, out
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"environment": env, "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
