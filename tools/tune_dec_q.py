"""Time kernels/dec_q.cu tile candidates on the GPU (a tuning aid, not the route table).

Compiles every (NT, MT, KW, U) candidate below for the formats asked, launches each on
the benchmark fixture's random weights under the same cold timer as ``ninfer-bench``
(graph replay, 256 MiB flush), checks each against the current route's output, and
prints one row per (format, N, K, T, tile). The chosen tiles go into
``ninfer/routes/dec_q.py::TILES`` by hand, with the table in docs/perf/decode_h200.md.

    python tools/tune_dec_q.py [--qtypes q4,bf16] [--json out.json] [--prefill]

``--prefill`` times GEMM-shaped tiles at T = 128, 256, 1024 beside the route and cuBLAS
(docs/perf/prefill_h200.md, "Fused decode-GEMM attempts", f0).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

import ml_dtypes
import numpy as np

from ninfer import QType
from ninfer.bench.env import environment
from ninfer.bench.fixture import random_activations, random_device_weight
from ninfer.bench.metrics import point_metrics
from ninfer.bench.peers import cublas_call
from ninfer.bench.run import ceilings, prepared_call
from ninfer.bench.timer import ColdTimer
from ninfer.routes.dec_q import Tile, expr, tile_shared_bytes
from ninfer.routes.problem import QTYPE_ID
from ninfer.runtime.sources import assembled_source

# (T values, candidate tiles (NT, MT, WR, WK, S)); NT * 8 >= every T of its row.
CANDIDATES: list[tuple[tuple[int, ...], list[tuple[int, int, int, int, int]]]] = [
    ((1, 8), [(1, 1, 1, 4, 3), (1, 2, 1, 4, 3), (1, 1, 1, 8, 3), (1, 2, 1, 2, 4)]),
    ((16,), [(2, 2, 2, 2, 3), (2, 2, 1, 4, 3), (2, 1, 2, 4, 3)]),
    ((32,), [(4, 1, 4, 2, 3), (4, 2, 2, 2, 3), (4, 2, 4, 1, 3)]),
    ((64,), [(8, 2, 4, 1, 3), (8, 1, 8, 1, 3), (8, 2, 2, 2, 3), (8, 1, 4, 1, 3)]),
]  # fmt: skip
SHAPES = [(6144, 5120), (14336, 5120)]
# --prefill: the same kernel with GEMM-shaped tiles at T >= 128 (issue 6 exploration:
# how far does in-register decode + mma.sync go before a new kernel is written?).
PREFILL_CANDIDATES: list[tuple[tuple[int, ...], list[tuple[int, int, int, int, int]]]] = [
    ((128, 256, 1024), [(8, 2, 4, 1, 3), (8, 1, 8, 1, 3), (8, 2, 8, 1, 3), (8, 4, 2, 1, 3),
                        (8, 2, 4, 1, 4), (16, 1, 4, 1, 3), (16, 2, 4, 1, 3), (4, 4, 4, 1, 3)]),
]  # fmt: skip
PREFILL_SHAPES = [(14336, 5120), (5120, 17408)]


def _f32(a: Any) -> np.ndarray:
    """A device BF16 array as host float32 (through the raw 16-bit words)."""
    return a.view("uint16").get().view(ml_dtypes.bfloat16).astype(np.float32)


def main() -> int:
    import cupy as cp

    ap = argparse.ArgumentParser()
    ap.add_argument("--qtypes", default="q4,q5,q6,w8,nvfp4,bf16")
    ap.add_argument("--json")
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--prefill", action="store_true", help="GEMM-shaped tiles at T >= 128")

    args = ap.parse_args()
    qtypes = [QType(q) for q in args.qtypes.split(",")]
    candidates = PREFILL_CANDIDATES if args.prefill else CANDIDATES
    shapes = PREFILL_SHAPES if args.prefill else SHAPES
    exprs = sorted(
        {expr(QTYPE_ID[q], Tile(64, *c)) for q in qtypes for _, tiles in candidates for c in tiles}
    )
    mod = cp.RawModule(
        code=assembled_source("dec_q"), options=("-std=c++17",), name_expressions=exprs
    )
    mod.compile()
    env = environment(0)
    ceil = ceilings(env)
    timer = ColdTimer(3, args.repeat, 256, "graph")
    rows = []
    print("qtype N K T tile(nt,mt,wr,wk,s) smem_KiB median_us READ_% max_rel_diff_vs_route")
    for q in qtypes:
        for n, k in shapes:
            w = random_device_weight(q, n, k, seed=7)
            for ts, tiles in candidates:
                for t in ts:
                    if args.prefill:
                        pc = timer.time(cublas_call(n, k, t, timer.stream.ptr))
                        print(f"{q.value:<5} {n} {k} {t:>4} cublas {pc.median_us:9.2f}", flush=True)
                        rows.append(
                            {"qtype": "cublas", "n": n, "k": k, "t": t, "median_us": pc.median_us}
                        )
                    x = random_activations(t, k)
                    ref = cp.empty((t, n), dtype=x.dtype)
                    # x and w were written on the legacy stream; the timer's stream is
                    # non-blocking and would not wait for them.
                    cp.cuda.Device().synchronize()
                    with timer.stream:
                        route = prepared_call(x, w, ref)
                    if args.prefill:  # the current route beside the candidates
                        rt = timer.time(route).median_us
                        print(f"{q.value:<5} {n} {k} {t:>4} route {rt:9.2f}", flush=True)
                        rows.append({"qtype": q.value, "n": n, "k": k, "t": t, "route_us": rt})
                    want = _f32(ref)
                    for c in tiles:
                        tl = Tile(64, *c)
                        shared = tile_shared_bytes(q, t, tl)
                        if shared > 227 * 1024:
                            continue
                        fn = mod.get_function(expr(QTYPE_ID[q], tl))
                        if shared > 48 * 1024:
                            fn.max_dynamic_shared_size_bytes = shared
                        out = cp.empty((t, n), dtype=x.dtype)
                        out.view(cp.uint16).fill(0x7FC0)  # NaN: unwritten outputs show
                        cp.cuda.Device().synchronize()
                        kargs = (
                            *(np.uint64(ptr) for ptr in w.plane_ptrs),
                            np.float32(w.tensor_scale), np.int32(n), np.int32(k),
                            np.int32(w.k_pad), np.uint64(x.data.ptr), np.uint64(out.data.ptr),
                            np.int32(t), np.int32(1),
                        )  # fmt: skip
                        grid = tl.grid(n, t)

                        def call(fn=fn, grid=grid, tl=tl, kargs=kargs, shared=shared) -> None:  # type: ignore[no-untyped-def]
                            fn(grid, (tl.threads, 1, 1), kargs, shared_mem=shared)

                        s = timer.time(call)
                        got = _f32(out)
                        diff = float(np.max(np.abs(got - want)) / (np.max(np.abs(want)) or 1.0))
                        m = point_metrics(q, n, k, t, s.median_us, ceil)
                        row: dict[str, object] = {
                            "qtype": q.value, "n": n, "k": k, "t": t, "tile": list(c),
                            "shared_bytes": shared, "median_us": s.median_us,
                            "READ_pct": m["READ_pct"], "max_rel_diff": diff,
                            "samples_us": s.samples_us,
                        }  # fmt: skip
                        rows.append(row)
                        print(
                            f"{q.value:<5} {n} {k} {t:>2} {','.join(map(str, c)):<11} "
                            f"{shared / 1024:6.1f} {s.median_us:9.2f} {m['READ_pct']:6.1f} {diff:.2e}",
                            flush=True,
                        )
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"environment": env, "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
