"""Execute expanded points: one weight per (qtype, policy, N, K), x/out for the group's max T.

Allocation, fixture, first call and compile stay outside timing; each point is one
public ``linear()`` call under the cold-cache timer (timer.py).
"""

from __future__ import annotations

import argparse
import functools
import sys
import time
from collections.abc import Callable
from typing import Any

from ..gpus import lookup
from ..ops import linear, linear_workspace_bytes
from ..policy import Policy
from .fixture import random_activations, random_device_weight
from .metrics import Ceilings, byte_breakdown, point_metrics
from .peers import PeerUnavailable, applies, cublas_call, tinygemm_call
from .points import BenchPoint, group_points
from .results import SCHEMA, SCHEMA_VERSION, environment
from .timer import ColdTimer


def prepared_call(
    x: Any, w: Any, out: Any, policy: Policy | str = Policy.A16
) -> Callable[[], None]:
    """``linear(x, w, out)`` as every timed caller runs it: a workspace of the public
    query's size (held by the returned call), one first call (compile, plan) that is
    never timed, then a device synchronize. The returned call enqueues on the current
    stream, so a timer that makes its stream current times it there."""
    import cupy as cp

    need = linear_workspace_bytes(w, x.shape[0], policy)
    ws = cp.empty(need, cp.uint8) if need else None
    call = functools.partial(linear, x, w, out, policy=policy, workspace=ws)
    call()
    cp.cuda.Device().synchronize()
    return call


def ceilings(env: dict[str, Any]) -> Ceilings:
    from ..gpus.probe import cached_probe, probe_and_cache

    spec = lookup(env["gpu_name"])
    if spec is not None and spec.measured_read_gbps:
        read, source = spec.measured_read_gbps, f"table: {spec.read_note}"
    else:
        pr = cached_probe(env["gpu_key"]) or probe_and_cache(env["gpu_key"])
        read, source = float(pr["sustained_read_GBps"]), f"probe {pr['measured_at']}"
    dram = spec.dram_spec_gbps if spec else read
    return Ceilings(env["gpu_name"], dram, read, source, spec.bf16_dense_tflops if spec else None)


class Progress:
    def __init__(self, total: int, enabled: bool) -> None:
        self.total, self.done, self.enabled, self.t0 = total, 0, enabled and total > 1, time.time()

    def step(self, label: str) -> None:
        self.done += 1
        if self.enabled:
            width = 30
            fill = width * self.done // self.total
            sys.stderr.write(
                f"\r[{'#' * fill}{'.' * (width - fill)}] {self.done}/{self.total} "
                f"{time.time() - self.t0:6.1f}s {label[:40]:40s}"
            )
            if self.done == self.total:
                sys.stderr.write("\n")
            sys.stderr.flush()


COLUMNS = [
    ("label", "{:<34}"),
    ("qtype", "{:<5}"),
    ("policy", "{:<4}"),
    ("N", "{:>7}"),
    ("K", "{:>6}"),
    ("T", "{:>5}"),
    ("median_us", "{:>10.3f}"),
    ("min_us", "{:>9.3f}"),
    ("p95_us", "{:>9.3f}"),
    ("model_GB", "{:>8.4f}"),
    ("effective_GBps", "{:>9.1f}"),
    ("DRAM_pct", "{:>7.2f}"),
    ("READ_pct", "{:>7.2f}"),
    ("useful_TFLOPs", "{:>8.2f}"),
    ("memory_floor_pct", "{:>8.2f}"),
    ("host_us", "{:>8.2f}"),
]


def _fmt_row(row: dict[str, Any], extra: list[str]) -> str:
    cells = [f.format(row[k]) for k, f in COLUMNS]
    for k in extra:
        v = row.get(k)
        cells.append(f"{v:>9.2f}" if isinstance(v, float) else f"{'-':>9}")
    return " ".join(cells)


def run_points(args: argparse.Namespace, points: list[BenchPoint]) -> int:
    import cupy as cp

    cp.cuda.Device(args.device).use()
    env = environment(args.device)
    ceil = ceilings(env)
    timer = ColdTimer(args.warmup, args.repeat, args.flush_mib, args.execution)
    sweep = bool(args.sweep)
    extra = (
        (["delta_pct"] if sweep else [])
        + [f"{p}_us" for p in args.peer]
        + [f"speedup_vs_{p}" for p in args.peer]
    )
    if not args.profile:
        print(f"gpu={env['gpu_name']}")
        print(f"dram_spec={ceil.dram_spec_gbps:g} GB/s")
        print(f"sustained_read={ceil.sustained_read_gbps:g} GB/s ({ceil.read_source})")
        print(f"cache=cold flush_mib={args.flush_mib}")
        print(f"execution={args.execution} warmup={args.warmup} repeat={args.repeat}")
        print(" ".join(k for k, _ in COLUMNS) + ("  " + " ".join(extra) if extra else ""))
    rows: list[dict[str, Any]] = []
    records: list[dict[str, Any]] = []
    failures: list[dict[str, Any]] = []
    progress = Progress(len(points), not args.no_progress and not args.profile)
    t_start = time.time()
    for group, pts in group_points(points).items():
        qtype, policy, n, k = group
        try:
            w = random_device_weight(qtype, n, k, seed=hash((n, k)) & 0xFFFF)
            tmax = max(p.t for p in pts)
            xbuf = random_activations(tmax, k)
            obuf = cp.empty((tmax, n), dtype=xbuf.dtype)
        except Exception as e:
            for p in pts:
                failures.append({"point": _point_id(p), "error": f"{type(e).__name__}: {e}"})
                progress.step(p.label)
            continue
        prev_median: float | None = None
        for p in pts:
            try:
                call = prepared_call(xbuf[: p.t], w, obuf[: p.t], policy)
                if args.profile:
                    return profile_one(timer, call)
                s = timer.time(call)
                host = timer.host_dispatch_us(call, n=min(args.repeat, 20))
            except Exception as e:
                failures.append({"point": _point_id(p), "error": f"{type(e).__name__}: {e}"})
                progress.step(p.label)
                continue
            bb = byte_breakdown(qtype, n, k, p.t)
            m = point_metrics(qtype, n, k, p.t, s.median_us, ceil)
            row: dict[str, Any] = {
                "label": p.label,
                "qtype": qtype.value,
                "policy": policy.value,
                "N": n,
                "K": k,
                "T": p.t,
                "median_us": s.median_us,
                "min_us": s.min_us,
                "p95_us": s.p95_us,
                **m,
                "host_us": _median(host),
            }
            rec: dict[str, Any] = {
                "labels": list(p.labels),
                "qtype": qtype.value,
                "policy": policy.value,
                "n": n,
                "k": k,
                "t": p.t,
                "route": _route_name(qtype, policy, n, k, p.t),
                "samples_us": s.samples_us,
                "median_us": s.median_us,
                "min_us": s.min_us,
                "p95_us": s.p95_us,
                "host_dispatch_us": host,
                "execution": s.execution,
                "bytes": bb,
                "metrics": m,
                "peers": {},
            }
            if s.note:
                rec["note"] = s.note
            if sweep:
                row["delta_pct"] = (s.median_us / prev_median - 1) * 100 if prev_median else None
                prev_median = s.median_us
            for peer in args.peer:
                if not applies(peer, qtype.value):
                    row[f"{peer}_us"] = row[f"speedup_vs_{peer}"] = None
                    continue
                try:
                    ps = _time_peer(peer, timer, n, k, p.t)
                except PeerUnavailable as e:  # e.g. tinygemm on a K it cannot tile
                    row[f"{peer}_us"] = row[f"speedup_vs_{peer}"] = None
                    rec["peers"][peer] = {"unavailable": str(e)}
                    continue
                row[f"{peer}_us"] = ps.median_us
                row[f"speedup_vs_{peer}"] = ps.median_us / s.median_us
                rec["peers"][peer] = {
                    "samples_us": ps.samples_us,
                    "median_us": ps.median_us,
                    "min_us": ps.min_us,
                    "p95_us": ps.p95_us,
                    "execution": ps.execution,
                    "speedup": ps.median_us / s.median_us,
                    **({"note": ps.note} if ps.note else {}),
                }
            rows.append(
                {
                    **row,
                    **bb,
                    "warmup": args.warmup,
                    "repeat": args.repeat,
                    "execution": s.execution,
                    "gpu": env["gpu_name"],
                    "cupy": env["cupy"],
                    "commit": env["commit"],
                    "kernel_fingerprint": env["kernel_fingerprint"],
                }
            )
            records.append(rec)
            progress.step(p.label)
            print(_fmt_row(row, extra), flush=True)
    wall = time.time() - t_start
    print(f"points={len(records)} failed={len(failures)} wall_s={wall:.1f}")
    if failures:
        print("failures:")
        for f in failures:
            print(f"  {f['point']}: {f['error']}")
    doc = {
        "schema": SCHEMA,
        "schema_version": SCHEMA_VERSION,
        "command": ["ninfer-bench", *sys.argv[1:]],
        "environment": env,
        "timing": {
            "cache": "cold",
            "flush_mib": args.flush_mib,
            "warmup": args.warmup,
            "repeat": args.repeat,
            "execution": args.execution,
            "timer": "cuda-events",
        },
        "ceilings": {
            "dram_spec_gbps": ceil.dram_spec_gbps,
            "sustained_read_gbps": ceil.sustained_read_gbps,
            "read_source": ceil.read_source,
            "bf16_dense_tflops": ceil.bf16_dense_tflops,
        },
        "suite": args.suite,
        "wall_s": wall,
        "points": records,
        "failures": failures,
    }
    if args.json_out:
        from .cli import write_json

        write_json(args.json_out, doc)
    if args.csv_out:
        from .cli import write_csv

        write_csv(args.csv_out, rows)
    return 1 if failures else 0


def _route_name(qtype: Any, policy: Any, n: int, k: int, t: int) -> str:
    """The route the selector took for this point (recorded: later tables may differ)."""
    import cupy as cp

    from ..routes import Problem, select

    cc = int(cp.cuda.Device().compute_capability)
    return select(Problem(qtype, policy, n, k, t, cc)).name


def _time_peer(peer: str, timer: ColdTimer, n: int, k: int, t: int) -> Any:
    make = {"cublas": cublas_call, "tinygemm": tinygemm_call}[peer]
    call = make(n, k, t, timer.stream.ptr)
    return timer.time(call)


def profile_one(timer: ColdTimer, call: Any) -> int:
    """``timer.warmup`` untimed calls, the L2 flush, then one call between
    cudaProfilerStart/Stop (for ``ncu --profile-from-start off``); ``--profile`` and
    tools/dq_rs_ablate.py's."""
    import cupy as cp

    for _ in range(timer.warmup):
        call()
    timer.flush()
    cp.cuda.Device().synchronize()
    cp.cuda.profiler.start()
    call()
    cp.cuda.Stream.null.synchronize()
    cp.cuda.Device().synchronize()
    cp.cuda.profiler.stop()
    print("profile: one public linear() call between cudaProfilerStart/Stop")
    return 0


def _median(v: list[float]) -> float:
    import numpy as np

    return float(np.median(v))


def _point_id(p: BenchPoint) -> str:
    return f"{p.label} {p.qtype.value} {p.policy.value} N={p.n} K={p.k} T={p.t}"
