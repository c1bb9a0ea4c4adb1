"""Measure expanded points in one process: one or more rounds, each a fresh allocation.

A round places every buffer (bench/memory.py), then times each point under the
cold-cache contract (timer.py) in an order shuffled from ``--order-seed`` (the suite's
order without one), reading the GPU's telemetry before and after each point. A point
whose round was throttled is measured again after a pause (nvbench's rule), up to
``MAX_REMEASURE`` times, and kept marked if it stays throttled. After every point the
record is rewritten atomically (``--json-out``), so a crash keeps what finished.
Allocation, fixture, first call and compile stay outside timing.
"""

from __future__ import annotations

import argparse
import csv
import functools
import os
import random
import re
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .. import record
from ..gpus import lookup
from ..metrics import Ceilings, byte_breakdown, point_metrics
from ..ops import linear, linear_workspace_bytes
from ..ops.dispatch import Dispatcher
from ..policy import Policy
from .env import environment
from .memory import DeviceMemoryError, RunMemory, arena, check_fits, pool_groups, run_bytes
from .peers import PeerUnavailable, applies, maker
from .points import BenchPoint, group_points
from .telemetry import Telemetry, throttled
from .timer import ColdTimer

MAX_REMEASURE = 3
RECOVERY_S = 0.5  # long enough for the driver's power governor to raise the clock again
# After a point whose samples kept the card busy this long, pause before the next: on
# the H200 the driver's power cap lowered the SM clock after the T=1024 points on the
# big weights (1-4 ms a call) and the next point read +7 % on average (docs/regress.md).
HEAVY_US = 20_000.0
COOL_S = 0.3
REWRITE_S = 5.0


def prepared_call(
    x: Any,
    w: Any,
    out: Any,
    policy: Policy | str = Policy.A16,
    workspace: Any = None,
    dispatcher: Dispatcher | None = None,
) -> Callable[[], None]:
    """``linear(x, w, out)`` as every timed caller runs it: a workspace of the public
    query's size (the caller's, else one held by the returned call), one first call
    (compile, plan) that is never timed, then a device synchronize. The returned call
    enqueues on the current stream, so a timer that makes its stream current times it
    there. ``dispatcher``: an override's (``--dispatch``), whose ``linear`` runs the same
    checks and launch path as the public one."""
    import cupy as cp

    op, query = (
        (linear, linear_workspace_bytes)
        if dispatcher is None
        else (dispatcher.linear, dispatcher.workspace_bytes)
    )
    if workspace is None:
        need = query(w, x.shape[0], policy)
        workspace = cp.empty(need, cp.uint8) if need else None
    call = functools.partial(op, x, w, out, policy=policy, workspace=workspace)
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


def _widths(extra: list[str]) -> list[int]:
    # Rows print as their points finish, so the table cannot be laid out from all its
    # cells at once (as compare's tabulate table is): every column gets a fixed width,
    # wide enough for its header and its format, and the header uses the same widths.
    fmt = [max(len(k), int(re.search(r"\d+", f).group())) for k, f in COLUMNS]  # type: ignore[union-attr]
    return fmt + [max(len(k), 9) for k in extra]


def _fmt_header(extra: list[str]) -> str:
    names = [k for k, _ in COLUMNS] + extra
    aligns = [f[2] for _, f in COLUMNS] + [">"] * len(extra)
    return " ".join(f"{n:{a}{w}}" for n, a, w in zip(names, aligns, _widths(extra), strict=True))


def _fmt_row(row: dict[str, Any], extra: list[str]) -> str:
    cells = [f.format(row[k]) for k, f in COLUMNS]
    for k in extra:
        v = row.get(k)
        cells.append(f"{v:.2f}" if isinstance(v, float) else "-")
    aligns = [f[2] for _, f in COLUMNS] + [">"] * len(extra)
    return " ".join(
        f"{c.strip():{a}{w}}" for c, a, w in zip(cells, aligns, _widths(extra), strict=True)
    )


def _order(points: list[BenchPoint], seed: int | None) -> list[BenchPoint]:
    if seed is None:
        return [p for pts in group_points(points).values() for p in pts]
    out = list(points)
    random.Random(seed).shuffle(out)
    return out


class Round:
    """One allocation of the run's memory and one pass over its points."""

    def __init__(self, args: argparse.Namespace, ctx: dict[str, Any], index: int) -> None:
        self.args, self.ctx, self.index = args, ctx, index
        self.prev: str | None = None
        self.position = 0

    def measure(self, p: BenchPoint, mem: RunMemory, timer: ColdTimer) -> dict[str, Any]:
        tel: Telemetry = self.ctx["telemetry"]
        g = mem.groups[p.group]
        ws = mem.workspace_for(g.weight, p.t, p.policy)
        call = prepared_call(
            g.x[: p.t], g.weight, g.out[: p.t], p.policy, ws, getattr(self.args, "dispatcher", None)
        )
        why: list[str] = []
        remeasured = -1
        probe = tel.sm_mhz if tel.available else None
        for _ in range(1 + MAX_REMEASURE):
            remeasured += 1
            before = tel.read()
            s = timer.time(call, probe)
            after = tel.read()
            why = throttled(before, after, s.probes, self.ctx["max_sm_mhz"])
            if not why:
                break
            print(f"throttled ({', '.join(why)}): {record.key_str(_key(p))} again", flush=True)
            time.sleep(RECOVERY_S)
        if sum(s.samples_us) > HEAVY_US:
            time.sleep(COOL_S)
        host = timer.host_dispatch_us(call, n=min(self.args.repeat, self.args.host_calls))
        rnd: dict[str, Any] = {
            "round": self.index,
            "samples_us": s.samples_us,
            "position": self.position,
            "after": self.prev,
            "host_dispatch_us": host,
            "telemetry": {"before": before, "after": after, "sm_mhz_samples": s.probes},
            "throttled": bool(why),
            "remeasured": remeasured,
            "placement": mem.placement(p.group),
        }
        self.prev = record.key_str(_key(p))
        self.position += 1
        return {"samples": s, "round": rnd, "call": call}


def _key(p: BenchPoint) -> record.PointKey:
    return record.PointKey(p.qtype.value, p.policy.value, p.n, p.k, p.t)


def _static(
    p: BenchPoint, s: Any, ceil: Ceilings, disp: Dispatcher | None = None
) -> dict[str, Any]:
    return {
        "labels": list(p.labels),
        "qtype": p.qtype.value,
        "policy": p.policy.value,
        "n": p.n,
        "k": p.k,
        "t": p.t,
        "route": _route_name(p, disp),
        "execution": s.execution,
        "bytes": byte_breakdown(p.qtype, p.n, p.k, p.t),
        "metrics": point_metrics(p.qtype, p.n, p.k, p.t, s.median_us, ceil),
        "peers": {},
        **({"note": s.note} if s.note else {}),
    }


def run_points(args: argparse.Namespace, points: list[BenchPoint]) -> int:
    """Exit status 2, with one line, when the buffers do not fit the device: checked
    before the environment, the probe or any allocation, and again as each round places
    its buffers (an out-of-memory error there reads the same)."""
    import cupy as cp

    dev = cp.cuda.Device(args.device)
    dev.use()
    try:
        check_fits(run_bytes(points, args.flush_mib, getattr(args, "memory", "arena")))
        return _run(args, points, dev)
    except DeviceMemoryError as e:
        print(f"ninfer-bench: error: {e}", file=sys.stderr)
        return 2


def _run(args: argparse.Namespace, points: list[BenchPoint], dev: Any) -> int:
    timer: ColdTimer | None = None
    env = environment(args.device)
    disp: Dispatcher | None = getattr(args, "dispatcher", None)
    query = linear_workspace_bytes if disp is None else disp.workspace_bytes
    if disp is not None:
        env["dispatch"] = args.dispatch_doc  # an experiment's record: never a baseline
    ceil = ceilings(env)
    tel = Telemetry(pci_bus_id=dev.pci_bus_id)
    allocs = max(1, int(getattr(args, "allocs", 1)))
    mode = getattr(args, "memory", "arena")
    seed = getattr(args, "order_seed", None)
    timing = {
        "cache": "cold",
        "flush_mib": args.flush_mib,
        "warmup": args.warmup,
        "repeat": args.repeat,
        "execution": args.execution,
        "timer": "cuda-events",
        "rounds": 0,
        "order_seed": seed,
        "memory": mode,
        "allocs": allocs,
    }
    ceil_doc = {
        "dram_spec_gbps": ceil.dram_spec_gbps,
        "sustained_read_gbps": ceil.sustained_read_gbps,
        "read_source": ceil.read_source,
        "bf16_dense_tflops": ceil.bf16_dense_tflops,
    }
    doc = record.new_doc(["ninfer-bench", *sys.argv[1:]], env, timing, ceil_doc, args.suite)
    if args.profile:
        mem = arena(points, args.flush_mib, query)
        timer = ColdTimer(args.warmup, args.repeat, args.flush_mib, args.execution, mem.flush)
        p = points[0]
        g = mem.groups[p.group]
        call = prepared_call(g.x[: p.t], g.weight, g.out[: p.t], p.policy,
                             mem.workspace_for(g.weight, p.t, p.policy), disp)  # fmt: skip
        return profile_one(timer, call)
    sweep = bool(args.sweep)
    extra = (
        (["delta_pct"] if sweep else [])
        + [f"{p}_us" for p in args.peer]
        + [f"speedup_vs_{p}" for p in args.peer]
    )
    print(f"gpu={env['gpu_name']} machine={env['machine']}")
    print(f"dram_spec={ceil.dram_spec_gbps:g} GB/s")
    print(f"sustained_read={ceil.sustained_read_gbps:g} GB/s ({ceil.read_source})")
    print(f"cache=cold flush_mib={args.flush_mib} memory={mode} order_seed={seed}")
    print(f"execution={args.execution} warmup={args.warmup} repeat={args.repeat} allocs={allocs}")
    if not tel.available:
        print(f"telemetry: NVML unavailable ({tel.error}); rounds are not checked for throttling")
    print(_fmt_header(extra))
    ctx = {"telemetry": tel, "max_sm_mhz": tel.max_sm_mhz()}
    env["max_sm_mhz"] = ctx["max_sm_mhz"]
    env["power_limit_w"] = tel.power_limit_w()
    t_start = time.time()
    out_path: Path | None = args.json_out
    prev_median: dict[tuple[Any, ...], float] = {}
    m: dict[str, Any] | None = None
    written = t_start
    for a in range(allocs):
        rseed = None if seed is None else seed + a
        doc["rounds"].append({
            "index": a, "process": int(getattr(args, "process", 0)), "alloc": a,
            "machine": env["machine"], "seed": rseed, "pid": os.getpid(),
            "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "side": getattr(args, "side", "") or "",
            "commit": env["commit"], "memory": mode,
        })  # fmt: skip
        doc["timing"]["rounds"] = len(doc["rounds"])
        rnd = Round(args, ctx, a)
        t_round = time.time()
        batches: Any
        if mode == "arena":
            mem = arena(points, args.flush_mib, query)
            batches = [(mem, _order(points, rseed))]
        else:  # one group at a time, in suite order (memory.py says why it is kept)
            batches = pool_groups(points, args.flush_mib, query)
        for mem, pts in batches:
            timer = ColdTimer(args.warmup, args.repeat, args.flush_mib, args.execution, mem.flush)
            for p in pts:
                try:
                    m = rnd.measure(p, mem, timer)
                except Exception as e:
                    doc["failures"].append(
                        {"point": _point_id(p), "error": f"{type(e).__name__}: {e}", "round": a}
                    )
                    continue
                s = m["samples"]
                static = _static(p, s, ceil, disp)
                row = _row(p, s, static, m["round"]["host_dispatch_us"])
                if sweep:
                    prev = prev_median.get((a, p.group))
                    row["delta_pct"] = (s.median_us / prev - 1) * 100 if prev else None
                    prev_median[(a, p.group)] = s.median_us
                for peer in args.peer:
                    _peer(peer, p, timer, s, row, static)
                record.add_round(doc, _key(p), static, m["round"], doc["ceilings"])
                print(_fmt_row(row, extra), flush=True)
                # Incremental, so a crash keeps the finished points; at most every
                # REWRITE_S, as a rewrite costs the whole record (thousands of points in a
                # tune round) and an fsync.
                if out_path is not None and time.time() - written > REWRITE_S:
                    doc["wall_s"] = time.time() - t_start
                    record.write_json(out_path, doc, check=False)
                    written = time.time()
        doc["rounds"][-1]["wall_s"] = time.time() - t_round
        mem.free()
        # The next round's arena is checked against the free memory (memory.check_fits):
        # the timer's flush view and the last call's x, w, out must not keep this one's.
        del batches, mem
        timer = m = None
    wall = time.time() - t_start
    doc["wall_s"] = wall
    print(
        f"points={len(doc['points'])} rounds={allocs} failed={len(doc['failures'])} wall_s={wall:.1f}"
    )
    if doc["failures"]:
        print("failures:")
        for f in doc["failures"]:
            print(f"  {f['point']}: {f['error']}")
    if out_path is not None:
        record.write_json(out_path, doc)
    if args.csv_out:
        write_csv(args.csv_out, _csv_rows(doc))
    return 1 if doc["failures"] else 0


def _row(p: BenchPoint, s: Any, static: dict[str, Any], host: list[float]) -> dict[str, Any]:
    import numpy as np

    return {
        "label": p.label, "qtype": p.qtype.value, "policy": p.policy.value, "N": p.n, "K": p.k,
        "T": p.t, "median_us": s.median_us, "min_us": s.min_us, "p95_us": s.p95_us,
        **static["metrics"], "host_us": float(np.median(host)) if host else float("nan"),
    }  # fmt: skip


def _peer(peer: str, p: BenchPoint, timer: ColdTimer, s: Any, row: dict[str, Any],
          static: dict[str, Any]) -> None:  # fmt: skip
    if not applies(peer, p.qtype.value):
        row[f"{peer}_us"] = row[f"speedup_vs_{peer}"] = None
        return
    try:
        made = maker(peer, p.qtype.value)(p.n, p.k, p.t, timer.stream.ptr)
        # Several calls: one library's kernel variants, each timed; the fastest is its time.
        calls = made if isinstance(made, dict) else {"": made}
        timed = {name: timer.time(call) for name, call in calls.items()}
    except PeerUnavailable as e:  # e.g. tinygemm on a K it cannot tile
        row[f"{peer}_us"] = row[f"speedup_vs_{peer}"] = None
        static["peers"][peer] = {"unavailable": str(e)}
        return
    kernel, ps = min(timed.items(), key=lambda kv: kv[1].median_us)
    row[f"{peer}_us"] = ps.median_us
    row[f"speedup_vs_{peer}"] = ps.median_us / s.median_us
    static["peers"][peer] = {
        "samples_us": ps.samples_us, "median_us": ps.median_us, "min_us": ps.min_us,
        "p95_us": ps.p95_us, "execution": ps.execution, "speedup": ps.median_us / s.median_us,
        **({"note": ps.note} if ps.note else {}),
        **({"kernel": kernel} if kernel else {}),
        **({"kernels_median_us": {n: v.median_us for n, v in timed.items()}} if len(timed) > 1 else {}),
    }  # fmt: skip


def _csv_rows(doc: dict[str, Any]) -> list[dict[str, Any]]:
    rows = []
    env = doc["environment"]
    for p in doc["points"]:
        rows.append({
            "label": "+".join(p["labels"]), "qtype": p["qtype"], "policy": p["policy"],
            "N": p["n"], "K": p["k"], "T": p["t"], "median_us": p["median_us"],
            "min_us": p["min_us"], "p95_us": p["p95_us"], "rounds": len(p["rounds"]),
            **p["metrics"], **p["bytes"], "route": p.get("route"),
            **{f"{k}_us": v.get("median_us") for k, v in p.get("peers", {}).items()},
            "warmup": doc["timing"]["warmup"], "repeat": doc["timing"]["repeat"],
            "execution": p["execution"], "gpu": env["gpu_name"], "cupy": env["cupy"],
            "commit": env["commit"], "kernel_fingerprint": env["kernel_fingerprint"],
        })  # fmt: skip
    return rows


def _route_name(p: BenchPoint, disp: Dispatcher | None = None) -> str:
    """The route the selector took for this point (recorded: later tables may differ)."""
    import cupy as cp

    from ..routes import Problem, select

    cc = int(cp.cuda.Device().compute_capability)
    prob = Problem(p.qtype, p.policy, p.n, p.k, p.t, cc)
    return (select(prob) if disp is None else disp.select(prob)).name


def profile_one(timer: ColdTimer, call: Any) -> int:
    """``timer.warmup`` untimed calls, the L2 flush, then one call between
    cudaProfilerStart/Stop (for ``ncu --profile-from-start off``); ``--profile`` and
    the ncu subcommand's."""
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


def _point_id(p: BenchPoint) -> str:
    return f"{p.label} {p.qtype.value} {p.policy.value} N={p.n} K={p.k} T={p.t}"


def write_csv(path: Path, rows: list[dict[str, Any]]) -> None:
    import io

    from ..record import write_text_atomic

    keys: list[str] = []
    for r in rows:
        keys += [k for k in r if k not in keys]
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=keys)
    w.writeheader()
    w.writerows(rows)
    write_text_atomic(path, buf.getvalue())
