"""Where a dq_rs stage goes: the kernel timed with parts of it taken out (docs/perf/prefill_h200.md).

A measurement aid, not a route: each variant is kernels/dq_rs.cu with text patches
(below) compiled in place of the real source for this process, then one public
``linear()`` call is timed under the cold timer of ``ninfer-bench`` (graph replay, 256
MiB flush). The variants compute garbage on purpose (no output is checked):

- ``full``: the kernel as it is;
- ``nodecode``: the consumers skip the decode (the fragments keep stale register values;
  the MMAs, the ring and the copies stay);
- ``nomma``: no ``wgmma`` is issued (decode, ring and copies stay; the fragments stay
  live through the fence that takes them as operands);
- ``nocopy``: the copy thread issues no TMA and arrives on each stage's barrier at once
  (the consumers decode and multiply stale shared memory);
- ``mma_only`` (``nodecode`` + ``nocopy``) and ``decode_only`` (``nomma`` + ``nocopy``).

    python tools/dq_rs_ablate.py [--points q4:14336x5120:128,...] [--variants full,nodecode]
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable

from route_swap import time_under  # tools/ is the script's sys.path[0]

from ninfer import QType
from ninfer.bench.fixture import random_activations, random_device_weight
from ninfer.bench.results import environment
from ninfer.bench.timer import ColdTimer
from ninfer.routes import launch, table
from ninfer.runtime import compile as rt_compile
from ninfer.runtime.sources import assembled_source

# (the text as in kernels/dq_rs.cu, its replacement): each must occur exactly once.
_DECODE = (
    "    rs_frag<QT>(wr + s * WST, lane_codes, s * WST, band, s & 1, gid, tig, a);",
    "    (void)lane_codes;",
)
_MMA = (
    "for (int h = 0; h < NB; ++h) wgmma_rs(acc[h], a[ks], rs_desc(xb + h * RS_X_HALF + 32 * ks));",
    "for (int h = 0; h < NB; ++h) (void)xb;",
)
_COPY = [
    ("          mbar_expect_tx(full(s), xbytes + WST);", "          mbar_arrive(full(s));"),
    ("          tma_2d(xs0 + s * XT, xm, g * RS_BK, t0, full(s));", ""),
    (
        "          tma_2d(dst, &wcodes, (sst * 2 * B::CODES + half * B::CODES) / 8, n0 / 16, full(s));",
        "",
    ),
    (
        "          if constexpr (B::QH > 0) tma_2d(dst + 8 * B::CODES, &whigh, sst * B::QH / 8, n0 / 16, full(s));",
        "",
    ),
    (
        "          if constexpr (B::SC > 0) tma_2d(dst + 8 * (B::CODES + B::QH), &wscale, sst * B::SC / 8, n0 / 16, full(s));",
        "",
    ),
]
VARIANTS: dict[str, list[tuple[str, str]]] = {
    "full": [],
    "nodecode": [_DECODE],
    "nomma": [_MMA],
    "nocopy": _COPY,
    "mma_only": [_DECODE, *_COPY],
    "decode_only": [_MMA, *_COPY],
}
POINTS = "q4:14336x5120:128,q4:14336x5120:256,q4:14336x5120:1024,q6:14336x5120:128,nvfp4:14336x5120:128,bf16:14336x5120:128"


def patched(patches: list[tuple[str, str]]) -> Callable[[str], str]:
    text = assembled_source("dq_rs")
    for old, new in patches:
        if text.count(old) != 1:
            raise SystemExit(f"dq_rs_ablate: patch target not found once in dq_rs.cu: {old!r}")
        text = text.replace(old, new)

    def source(name: str) -> str:
        return text if name == "dq_rs" else assembled_source(name)

    return source


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--points", default=POINTS, help="qtype:NxK:T,...")
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--json")
    ap.add_argument("--repeat", type=int, default=10)
    args = ap.parse_args()
    points = []
    for spec in args.points.split(","):
        q, nk, t = spec.split(":")
        n, k = (int(v) for v in nk.split("x"))
        points.append((QType(q), n, k, int(t)))
    env = environment(0)
    timer = ColdTimer(3, args.repeat, 256, "graph")
    weights = {(q, n, k): random_device_weight(q, n, k, seed=7) for q, n, k, _ in points}
    rows: list[dict[str, object]] = []
    variants = args.variants.split(",")
    print("qtype N K T " + " ".join(f"{v}_us" for v in variants))
    results: dict[tuple[QType, int, int, int], dict[str, float]] = {p: {} for p in points}
    for v in variants:
        rt_compile.assembled_source = patched(VARIANTS[v])  # type: ignore[assignment]
        rt_compile._cache.clear()
        launch._kernels.clear()
        try:
            for q, n, k, t in points:
                w = weights[(q, n, k)]
                w.dispatch_cache.clear()  # plans hold the kernel they were built with
                x = random_activations(t, k)
                import cupy as cp

                out = cp.empty((t, n), dtype=x.dtype)
                results[(q, n, k, t)][v] = time_under(table.ROUTE_TABLES, timer, x, w, out)
        finally:
            rt_compile.assembled_source = assembled_source
            rt_compile._cache.clear()
            launch._kernels.clear()
            for w in weights.values():
                w.dispatch_cache.clear()
    for (q, n, k, t), us in results.items():
        rows.append({"qtype": q.value, "n": n, "k": k, "t": t, **us})
        cols = " ".join(f"{us[v]:8.2f}" for v in variants)
        print(f"{q.value:<5} {n} {k} {t:>4} {cols}", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"environment": env, "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
