"""``ninfer-bench sweep-plan``: the T of a bounded sweep that finds the cliffs a full one would.

Issue 26's "no cliffs" reads a sweep of T = 1 ... 1024 on the suites' shapes; a full one is
some 19 x 1024 points. Between two T where nothing about the launch changes, one more
token only adds work, so a cliff sits where the route or its kernel instance changes (a
route table seam, a tile row's edge), where a token tile fills (multiples of 64), or
where the per-T cost is irregular, as it is at small T. Per suite shape the plan takes:
every T up to ``--dense`` (64), two on each side of every T where the device's table
changes the route or the route's kernel instance (dispatch only, no GPU), 64 i and 64 i + 1,
and every ``--step`` (32) T, up to ``--t-max``. It writes a suite file (``--suite-file``;
the suite is named after the file):

    ninfer-bench sweep-plan --suite all --cc 90 --out sweep.yaml
    ninfer-bench --suite-file sweep.yaml --json-out sweep.json
    ninfer-bench cliffs sweep.json
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ..atomic import write_text_atomic
from ..errors import UnsupportedProblem
from ..formats.qtype import QType
from ..policy import Policy
from ..routes.problem import Problem
from ..routes.table import select
from .points import SUITE_NAMES, load_suite


def changes(q: QType, n: int, k: int, cc: int, t_max: int) -> list[int]:
    """The T at which the dispatched route, or its kernel instance, differs from T - 1."""
    out, prev = [], None
    for t in range(1, t_max + 1):
        p = Problem(q, Policy.A16, n, k, t, cc)
        route = select(p)
        key = (route.name, route.launcher.instance(p))
        if prev is not None and key != prev:
            out.append(t)
        prev = key
    return out


def plan_ts(
    q: QType, n: int, k: int, cc: int, t_max: int = 1024, dense: int = 64, step: int = 32
) -> list[int]:
    ts = set(range(1, min(dense, t_max) + 1)) | set(range(step, t_max + 1, step)) | {t_max}
    ts |= {t for i in range(1, t_max // 64 + 1) for t in (64 * i, 64 * i + 1)}
    for c in changes(q, n, k, cc, t_max):
        ts |= set(range(c - 2, c + 2))
    return sorted(t for t in ts if 1 <= t <= t_max)


def suite_doc(
    name: str, shapes: Iterable[tuple[QType, int, int]], cc: int, t_max: int, dense: int, step: int
) -> dict[str, Any]:
    classes: dict[str, list[int]] = {}
    entries = []
    for q, n, k in shapes:
        label = f"{q.value}.{n}x{k}"
        classes[label] = plan_ts(q, n, k, cc, t_max, dense, step)
        entries.append({"label": label, "qtype": q.value, "n": n, "k": k, "t_class": label})
    return {"suite": name, "policy": "a16", "t_classes": classes, "entries": entries}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="ninfer-bench sweep-plan", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    ap.add_argument("--out", type=Path, required=True,
                    help="the suite file to write (its stem names the suite)")  # fmt: skip
    ap.add_argument("--suite", choices=SUITE_NAMES, default="all",
                    help="whose [N, K] and formats (default: %(default)s)")  # fmt: skip
    ap.add_argument("--cc", type=int, default=90,
                    help="the compute capability whose table dispatches (default: %(default)s)")  # fmt: skip
    ap.add_argument("--t-max", type=int, default=1024, help="the largest T (default: %(default)s)")
    ap.add_argument(
        "--dense", type=int, default=64, help="every T up to this (default: %(default)s)"
    )
    ap.add_argument(
        "--step", type=int, default=32, help="and every this many T (default: %(default)s)"
    )
    a = ap.parse_args(argv)
    if min(a.t_max, a.dense, a.step) < 1:
        ap.error(f"expected --t-max, --dense and --step >= 1, got {a.t_max}, {a.dense}, {a.step}")
    shapes = sorted({(p.qtype, p.n, p.k) for p in load_suite(a.suite)},
                    key=lambda s: (list(QType).index(s[0]), s[1], s[2]))  # fmt: skip
    try:
        doc = suite_doc(a.out.stem, shapes, a.cc, a.t_max, a.dense, a.step)
    except UnsupportedProblem as e:
        print(f"ninfer-bench sweep-plan: error: {e}", file=sys.stderr)
        return 2
    points = sum(len(v) for v in doc["t_classes"].values())
    head = (f"# ninfer-bench sweep-plan --suite {a.suite} --cc {a.cc} --t-max {a.t_max} "
            f"--dense {a.dense} --step {a.step}: {points} points\n")  # fmt: skip
    write_text_atomic(a.out, head + json.dumps(doc, indent=1) + "\n")  # JSON is YAML
    print(f"wrote {a.out}: {len(doc['entries'])} shapes, {points} points")
    return 0
