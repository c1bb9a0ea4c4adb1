"""ninfer-regress tune: measure the candidate routes on this GPU, write its table.

Each candidate route is timed on its own, forced for every point it can run
(ninfer-bench --dispatch), over the suite's [N, K] in every format and a T grid: R
rounds, each route a fresh process per round, the routes' order rotated between rounds,
the GPU-idle check before each. A point's time is the gate's statistic, the lower quartile
of its round medians. Writes, in --tables (default ninfer/routes/tables/):
sm_<cc>.tune.json, the record of every time, then sm_<cc>.json, the table built
from it (ninfer/regress/tune.py says how), and re-generates docs/routes.md where it is.
--replay RECORD rebuilds the table from a record without a GPU. --keep RECORD re-tunes
part of the grid: the T outside --t-grid's range come from that earlier record of this
GPU model (the new record holds both and says which T it kept, from where, and which
routes had no time there).
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path
from typing import Any

import numpy as np

from .. import record
from ..atomic import write_text_atomic
from ..bench.points import load_suite
from ..formats.qtype import QType
from ..routes.table import dumps_table
from .runner import RoundPlan, interleaved, new_run_dir, with_dispatch
from .stats import LOCATION_Q, round_values
from .tune import (
    T_GRID,
    Shape,
    candidates,
    kept_times,
    kept_ts,
    read_record,
    record_doc,
    suite_shapes,
    table_from,
)

STATISTIC = "the lower quartile of round medians"
TUNE_ROUNDS = 3
TUNE_REPEAT = 10
# The choice is by GPU time; host-time samples would cost another repeat's worth of calls.
HOST_OFF = ("--host-calls", "0")


def add_parser(sub: Any, formatter: Any, bench_args: Any) -> None:
    t = sub.add_parser(
        "tune",
        formatter_class=formatter,
        help="time every candidate route on this GPU and write its route table",
        description=__doc__,
    )
    bench_args(t, TUNE_ROUNDS)
    # Ten samples a round: the choice is between routes, most of them far apart, and the
    # whole grid has to fit one sitting (every route, every format, 15 T, R rounds).
    t.set_defaults(repeat=TUNE_REPEAT)
    t.add_argument("--t-grid", type=_grid, default=T_GRID, metavar="T,T,...",
                   help="the T values timed (default: %(default)s)")  # fmt: skip
    t.add_argument("--tables", type=Path, default=Path("ninfer/routes/tables"),
                   help="where sm_<cc>.json and its record are written")  # fmt: skip
    t.add_argument("--replay", type=Path, metavar="RECORD",
                   help="rebuild the table from this tune record (no GPU)")  # fmt: skip
    t.add_argument("--keep", type=Path, metavar="RECORD",
                   help="take the T outside --t-grid's range from this earlier tune record of "
                        "the same GPU model (e.g. --t-grid 1,4,8,...,64 after a decode change)")  # fmt: skip
    t.add_argument("--list", action="store_true", help="print the plan: points per route (no GPU)")


def _grid(text: str) -> tuple[int, ...]:
    try:
        ts = tuple(sorted({int(x) for x in text.split(",")}))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected T,T,... integers, got {text!r}") from None
    if not ts or ts[0] < 1:
        raise argparse.ArgumentTypeError(f"expected T >= 1, got {text!r}")
    return ts


def plan_points(
    shapes: list[Shape], grid: tuple[int, ...], cc: int
) -> dict[str, list[record.PointKey]]:
    """Route -> the points it can run."""
    out: dict[str, list[record.PointKey]] = {}
    for s in shapes:
        for t in grid:
            for r in candidates(s, t, cc):
                out.setdefault(r, []).append(record.PointKey(s.qtype.value, "a16", s.n, s.k, t))
    return out


def _suite_file(run_dir: Path, shapes: list[Shape], grid: tuple[int, ...]) -> Path:
    path = run_dir / "tune.yaml"
    entries = [
        {"label": f"{s.qtype.value}.{s.n}x{s.k}", "qtype": s.qtype.value, "n": s.n, "k": s.k,
         "t_class": "grid"}
        for s in shapes
    ]  # fmt: skip
    doc = {"suite": "tune", "policy": "a16", "t_classes": {"grid": list(grid)}, "entries": entries}
    write_text_atomic(path, json.dumps(doc, indent=1) + "\n")  # JSON is YAML
    return path


def _times(res: record.Results) -> dict[tuple[Shape, int], float]:
    out = {}
    for p in res.points:
        v = round_values(record.round_samples(p))
        if v.size:
            s = Shape(QType(p["qtype"]), p["n"], p["k"])
            out[(s, p["t"])] = math.exp(float(np.quantile(v, LOCATION_Q)))
    return out


def measure(a: argparse.Namespace, shapes: list[Shape], cc: int, check: Any) -> tuple[Any, Path]:
    """Every route's rounds; (route -> merged results, the run folder)."""
    run_dir = new_run_dir(a.runs, f"tune_sm{cc}")
    print(f"run folder: {run_dir}")
    suite = _suite_file(run_dir, shapes, a.t_grid)
    keys = plan_points(shapes, a.t_grid, cc)
    plans = {
        r: with_dispatch(run_dir, r, RoundPlan(str(suite), a.repeat, a.warmup, a.device, a.seed,
                                               keys[r], HOST_OFF), {"force": r})
        for r in sorted(keys)
    }  # fmt: skip
    merged = interleaved(run_dir, plans, a.rounds, check, ["ninfer-regress", "tune"])
    return merged, run_dir


def cmd_tune(a: argparse.Namespace) -> int:
    from ..routes import fingerprint
    from . import session

    shapes = suite_shapes(load_suite(a.suite))  # every format: a table serves them all
    if a.replay is not None:
        replayed, rec = read_record(json.loads(a.replay.read_text()), str(a.replay))
        return _write(a, replayed, rec)
    old = None  # the --keep record, read once (refused here, before any GPU work)
    if a.keep is not None:
        try:
            doc = json.loads(a.keep.read_text())
        except (OSError, ValueError) as e:
            raise ValueError(f"--keep {a.keep}: not a readable JSON file ({e})") from None
        old = read_record(doc, f"--keep {a.keep}")
    if a.list:
        if old is not None:
            print(f"T kept from {a.keep}: {kept_ts(old[0], shapes, a.t_grid)}")
        for r, ks in sorted(plan_points(shapes, a.t_grid, 90).items()):
            print(
                f"{r:8s} {len(ks):5d} points a round on sm_90 (shapes {len(shapes)}, T {a.t_grid})"
            )
        return 0
    if not a.tables.is_dir():
        raise ValueError(f"--tables {a.tables}: no such folder (run from the repository root)")
    gpu = session.gpu_or_exit(a)
    from ..runtime.cupy_env import require_device

    cc = int(require_device(a.device).cuda.Device(a.device).compute_capability)
    kept: tuple[Any, dict[str, Any]] | None = None
    if old is not None:  # refused before the rounds: another GPU model, a shape it lacks
        kept = kept_times(*old, a.keep.as_posix(), cc, gpu.name, shapes, a.t_grid)
        if kept[1]["unmeasured"]:
            print(f"note: {a.keep} has no times for {', '.join(kept[1]['unmeasured'])} at some "
                  f"kept T: the table cannot choose them there")  # fmt: skip
    if a.seed is None:
        a.seed = int(time.time()) % 1_000_000
    merged, run_dir = measure(a, shapes, cc, session.busy_check(a))
    measured: dict[tuple[Shape, int], dict[str, float]] = {}
    env: dict[str, Any] = {}
    for r, res in merged.items():
        if res is None:
            raise ValueError(f"route {r} measured nothing; see {run_dir}/run.log")
        env = res.env
        for key, us in _times(res).items():
            measured.setdefault(key, {})[r] = us
    meta = {
        "cc": cc, "gpu": gpu.name, "sms": env.get("sms"), "commit": env.get("commit"),
        "kernel_fingerprint": fingerprint(), "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "suite": a.suite, "rounds": a.rounds, "statistic": STATISTIC, "seed": a.seed,
        "run": str(run_dir),
    }  # fmt: skip
    if kept is not None:  # T outside the grid's range: no point is both measured and kept
        measured.update(kept[0])
        meta["kept"] = kept[1]
    return _write(a, measured, record_doc(measured, meta))


def _write(a: argparse.Namespace, measured: Any, rec: dict[str, Any]) -> int:
    from ..routes import doc

    cc = int(rec["cc"])
    # The table cites its record where it is kept: beside it, or the replayed file.
    rec_path = a.replay if a.replay is not None else a.tables / f"sm_{cc}.tune.json"
    table = table_from(measured, rec, rec_path.as_posix())
    if a.replay is None:
        write_text_atomic(rec_path, json.dumps(rec, indent=1) + "\n")
    out = a.tables / f"sm_{cc}.json"
    write_text_atomic(out, dumps_table(table))
    print(f"wrote {out}: {len(table.rows)} rows" + ("" if a.replay else f", and {rec_path}"))
    page = Path("docs/routes.md")
    if page.exists() and doc.main([str(page), "--tables", str(a.tables)]) == 0:
        print(f"re-generated {page}")
    print(
        "Next: compare the new table with the old on this GPU (nox -s bench -- --ab HEAD: the "
        "working tree against HEAD), commit both files, then refresh the baselines "
        "(nox -s baseline -- --reason '...'): the kernel fingerprint covers the table."
    )
    return 0
