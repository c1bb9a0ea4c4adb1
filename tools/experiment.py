"""Declared experiments: dispatch variants timed side by side on one GPU.

    python tools/experiment.py EXPERIMENT.yaml [--rounds R] [--runs runs/]
    python tools/experiment.py --host Q:N:K:T [--host ...] [--profile 25]

An experiment file names the points and the variants, each a dispatch override
(ninfer/bench/override.py: a forced route, a route-table file, launcher tuning; {} is the
shipped dispatch):

    suite: all                  # a suite name, or suite_file: path/to/suite.yaml
    only: ["q4 a16 [14336,5120] T=128"]  # optional: these points of it only
    rounds: 4                   # rounds a variant (default 4)
    variants:
      shipped: {}
      nb2: {tuning: {dq_rs: {nb: 2}}}

The variants run in interleaved rounds (their order rotated each round), every round a
fresh process with the GPU-idle check first: the regression gate's protocol. Each variant
is written as a standard results record, runs/exp_<name>_<time>/<variant>.json, so
`ninfer-regress compare A.json B.json --same-runner` and `report` work on it; the script
prints every variant against the first. A record made under an override says so
(environment.dispatch), and a baseline refresh refuses it.

--host times the host side of one linear() call per point (the enqueue only; the stream
is synchronised every 100 calls, outside the timed region), with a cProfile of 2000
calls: where the dispatch budget goes.
"""

from __future__ import annotations

import argparse
import cProfile
import functools
import pstats
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from ninfer import record
from ninfer.bench.override import dispatcher_for
from ninfer.bench.points import SUITE_NAMES
from ninfer.regress.compare import compare, text_table
from ninfer.regress.runner import RoundPlan, interleaved, new_run_dir, with_dispatch

KEYS = {"suite", "suite_file", "only", "rounds", "variants"}


def load(path: Path) -> dict[str, Any]:
    """The experiment file, checked before any GPU work (ValueError naming the key)."""
    doc = yaml.safe_load(path.read_text())
    if not isinstance(doc, dict) or set(doc) - KEYS or "variants" not in doc:
        raise ValueError(f"{path}: expected keys among {sorted(KEYS)} with variants, got {doc!r}")
    if ("suite" in doc) == ("suite_file" in doc):
        raise ValueError(f"{path}: expected one of suite and suite_file")
    if "suite" in doc and doc["suite"] not in SUITE_NAMES:
        raise ValueError(f"{path}: suite: expected one of {SUITE_NAMES}, got {doc['suite']!r}")
    variants = doc["variants"]
    if not isinstance(variants, dict) or len(variants) < 2:
        raise ValueError(f"{path}: variants: expected two or more, got {variants!r}")
    if doc.get("only"):
        from ninfer.bench.points import load_suite, load_suite_file

        pts = (
            load_suite(doc["suite"]) if "suite" in doc else load_suite_file(Path(doc["suite_file"]))
        )
        missing = sorted(set(doc["only"]) - {str(p.key) for p in pts})
        if missing:
            raise ValueError(f"{path}: only: not points of the suite: {missing[:3]}")
    for name, ov in variants.items():
        if not str(name).isidentifier():
            raise ValueError(f"{path}: variants: expected identifier names, got {name!r}")
        if ov:
            dispatcher_for(ov, f"{path}: variants.{name}")  # refuses a bad override now
    return doc


def run(path: Path, rounds: int | None, runs: Path, device: int) -> int:
    from ninfer.regress.session import busy_check

    doc = load(path)
    suite = str(doc.get("suite") or Path(doc["suite_file"]).resolve())
    only = [record.PointKey(*_key(k)) for k in doc["only"]] if doc.get("only") else None
    n_rounds = int(rounds or doc.get("rounds", 4))
    run_dir = new_run_dir(runs, f"exp_{path.stem}")
    print(f"run folder: {run_dir}")
    names = list(doc["variants"])
    check = busy_check(argparse.Namespace(device=device, idle_wait=120.0))
    plan = RoundPlan(suite, 20, 3, device, int(time.time()) % 1_000_000, only)
    plans = {n: with_dispatch(run_dir, n, plan, ov) for n, ov in doc["variants"].items()}
    merged = interleaved(run_dir, plans, n_rounds, check, ["tools/experiment.py", str(path)])
    base = merged[names[0]]
    if base is None:
        print(f"{names[0]} measured nothing; see {run_dir}/run.log", file=sys.stderr)
        return 2
    for name in names[1:]:
        res = merged[name]
        if res is None:
            print(f"{name} measured nothing; see {run_dir}/run.log", file=sys.stderr)
            continue
        c = compare(base, res, same_runner=True)
        print(f"\n== {name} against {names[0]}\n{text_table(c)}\n{c.summary()}")
    return 0


def _key(text: str) -> tuple[str, str, int, int, int]:
    # "q4 a16 [6144,5120] T=128", as the reports print a point
    q, pol, nk, t = text.split()
    n, k = nk.strip("[]").split(",")
    return q, pol, int(n), int(k), int(t.removeprefix("T="))


def host(points: list[str], profile: int) -> int:
    import cupy as cp

    from ninfer import Policy, QType
    from ninfer.bench.fixture import random_activations, random_device_weight
    from ninfer.ops import linear, linear_workspace_bytes
    from ninfer.ops.dispatch import DEFAULT

    def median_us(fn: Any, n: int = 2000) -> float:
        out = []
        for i in range(n):
            if i % 100 == 0:
                cp.cuda.get_current_stream().synchronize()
            t0 = time.perf_counter()
            fn()
            out.append(time.perf_counter() - t0)
        cp.cuda.get_current_stream().synchronize()
        return float(np.median(out)) * 1e6

    nop = cp.RawKernel('extern "C" __global__ void nop(int a) {}', "nop")
    bare = median_us(lambda: nop((1,), (32,), (np.int32(0),)))
    print(f"{'bare CuPy RawKernel launch (1 argument)':<44} {bare:8.2f} us")
    for spec in points:
        q, n, k, t = spec.split(":")
        w = random_device_weight(QType(q), int(n), int(k))
        x = random_activations(int(t), int(k))
        out = cp.empty((int(t), int(n)), dtype=x.dtype)
        need = linear_workspace_bytes(w, int(t))
        call = functools.partial(
            linear, x, w, out, workspace=cp.empty(need, cp.uint8) if need else None
        )
        call()
        cp.cuda.Device().synchronize()
        route = DEFAULT.route(w, int(t), Policy.A16)[1].name
        print(
            f"linear {spec} ({route}){'':<{max(0, 28 - len(spec) - len(route))}} {median_us(call):8.2f} us"
        )
        if profile:
            prof = cProfile.Profile()
            prof.enable()
            for i in range(2000):
                call()
                if i % 100 == 0:
                    cp.cuda.get_current_stream().synchronize()
            prof.disable()
            pstats.Stats(prof).sort_stats("tottime").print_stats(profile)
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="tools/experiment.py",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("experiment", type=Path, nargs="?", help="the experiment file (YAML)")
    ap.add_argument(
        "--rounds", type=int, default=None, help="rounds a variant (default: the file's, else 4)"
    )
    ap.add_argument("--runs", type=Path, default=Path("runs"), help="where the run folder is made")
    ap.add_argument("--device", type=int, default=0, help="CUDA device index")
    ap.add_argument("--host", action="append", metavar="Q:N:K:T",
                    help="instead: host time of one linear() call at this point (repeatable)")  # fmt: skip
    ap.add_argument("--profile", type=int, default=25, help="with --host: cProfile rows (0: none)")
    a = ap.parse_args(argv)
    try:
        if a.host:
            return host(a.host, a.profile)
        if a.experiment is None:
            ap.error("give an experiment file, or --host")
        return run(a.experiment, a.rounds, a.runs, a.device)
    except (ValueError, OSError) as e:
        print(f"experiment: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
