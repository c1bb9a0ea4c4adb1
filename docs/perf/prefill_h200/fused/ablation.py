"""The dq_wgmma ablation of docs/perf/prefill_h200.md ("Fused decode-GEMM attempts").

Runs against fused_gemm_rejected.diff applied on 499f7a6 (`git apply`): kernels/dq_wgmma.cu
there has a DQ_SKIP bit mask (1: no W copy, 2: no x copy, 4: no decode, 8: no
fence.proxy.async, 16: no wgmma) that removes one part of the pipeline at a time, and
this script times each variant of one tile (BM = 128 rows, BN = 128 tokens, S = 4;
``Tile(None, 1, 128, 4)`` in the diff's naming) under the cold timer of ninfer-bench.
The outputs of a skipping variant are garbage; only its time is of interest.

    PYTHONPATH=. python3 docs/perf/prefill_h200/fused/ablation.py
"""

import cupy as cp
import numpy as np
from ninfer.routes.dq_wgmma import NVRTC_OPTIONS, Tile, expr

from ninfer import QType
from ninfer.bench.fixture import random_activations, random_device_weight
from ninfer.bench.timer import ColdTimer
from ninfer.runtime.sources import assembled_source

timer = ColdTimer(3, 10, 256, "graph")
tl = Tile(None, 1, 128, 4)
for q, qid in ((QType.Q4, 0), (QType.BF16, 5)):
    n, k = 14336, 5120
    w = random_device_weight(q, n, k, seed=7)
    planes = w.planes
    first = planes.get("qs", planes.get("w"))
    for t in (128, 1024):
        x = random_activations(t, k)
        out = cp.empty((t, n), dtype=x.dtype)
        res = []
        for skip in (0, 1, 2, 4, 8, 16, 6, 7, 31):
            opts = ("-std=c++17", *NVRTC_OPTIONS, f"-DDQ_SKIP={skip}")
            mod = cp.RawModule(
                code=assembled_source("dq_wgmma"), options=opts, name_expressions=[expr(qid, tl)]
            )
            fn = mod.get_function(expr(qid, tl))
            sh = tl.shared_bytes(q)
            fn.max_dynamic_shared_size_bytes = sh
            kargs = (
                np.uint64(first.data.ptr),
                np.uint64(planes["qh"].data.ptr if "qh" in planes else 0),
                np.uint64(planes["scales"].data.ptr if "scales" in planes else 0),
                np.float32(w.tensor_scale), np.int32(n), np.int32(k), np.int32(w.k_pad),
                np.uint64(x.data.ptr), np.uint64(out.data.ptr), np.int32(t), np.int32(1),
            )  # fmt: skip
            g = tl.grid(n, t)
            cp.cuda.Device().synchronize()

            def call(fn=fn, g=g, kargs=kargs, sh=sh):  # type: ignore[no-untyped-def]
                fn(g, (256, 1, 1), kargs, shared_mem=sh)

            us = timer.time(call).median_us
            res.append(f"{skip}:{us:.0f}")
        print(q.value, t, " ".join(res), flush=True)
