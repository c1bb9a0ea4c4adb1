"""``ninfer-regress baseline``: re-measure and write baselines/<gpu>/<suite>.{json,md}."""

from __future__ import annotations

import argparse
import time
from typing import Any

import numpy as np

from ..record import Results, ResultsError, load_baseline, load_results
from .compare import EXIT_PASS, compare, text_table
from .runner import BASELINE_ROUNDS
from .session import measure_or_exit


def is_sentence(text: str) -> bool:
    """A reason a reviewer can read: three words or more, letters in it."""
    words = [w for w in text.split() if any(ch.isalpha() for ch in w)]
    return len(words) >= 3 and len(text.strip()) >= 15


def round_noise(p: dict[str, Any]) -> dict[str, Any]:
    """A point's between-round sd of log round medians (what a baseline stores)."""
    from ..record import kept_rounds

    v = np.log([float(np.median(r["samples_us"])) for r in kept_rounds(p)])
    # Robust like the verdicts (stats.py): one slow round must not set a point's noise.
    sd = float(1.4826 * np.median(np.abs(v - np.median(v)))) if v.size >= 2 else 0.0
    return {"round_sd": sd, "rounds": int(v.size)}


def cmd_baseline(a: argparse.Namespace) -> int:
    from ..bench.env import CODE_PATHS, git
    from ..bench.points import load_suite
    from ..record import pair_digest, write_pair
    from ..routes import fingerprint

    reason = a.reason.strip()
    if not is_sentence(reason):
        raise ResultsError(
            f"--reason: expected a sentence saying why the baseline changes (three words or "
            f"more), got {a.reason!r}"
        )
    head = git("rev-parse", "HEAD")
    status = git("status", "--porcelain", "--untracked-files=no", "--", *CODE_PATHS)
    if head is None:
        raise ResultsError("a baseline is made in a git checkout (its commit is recorded)")
    if status:
        raise ResultsError(
            "the working tree has uncommitted changes to the measured code; commit them "
            f"first (a baseline names the commit it measured):\n{status}"
        )
    if a.from_:
        new = load_results(a.from_)
        if new.env.get("dispatch") is not None:
            raise ResultsError(
                f"{a.from_}: measured under a dispatch override ({new.env['dispatch']}), not the "
                "shipped dispatch: an experiment's record is never a baseline"
            )
        key, name = new.gpu_key, new.env["gpu_name"]
        suite = new.doc.get("suite")
        if suite != a.suite:
            raise ResultsError(
                f"{a.from_}: measured suite {suite!r}, but --suite is {a.suite!r}; a baseline "
                "of a suite is promoted only from a run of that suite"
            )
        if new.fingerprint != fingerprint() or new.commit != head or new.env.get("dirty"):
            raise ResultsError(
                f"{a.from_}: measured at commit {(new.commit or '?')[:12]} (kernels "
                f"{new.fingerprint}, dirty {new.env.get('dirty')}), but HEAD is {head[:12]} "
                f"(kernels {fingerprint()}): a baseline is HEAD's, measured clean"
            )
    else:
        _, new, gpu = measure_or_exit(a, a.rounds)
        key, name, suite = gpu.key, gpu.name, a.suite
    rounds = len(new.rounds)
    if rounds < BASELINE_ROUNDS and not a.from_:
        print(f"note: {rounds} rounds; the default for a baseline is {BASELINE_ROUNDS}")
    if rounds < 2:
        raise ResultsError(f"{new.path}: {rounds} round(s); a baseline needs >= 2 to store noise")
    if new.doc["failures"]:
        raise ResultsError(
            f"{new.path}: {len(new.doc['failures'])} point(s) failed; not a baseline"
        )
    want = {p.key for p in load_suite(suite)}
    got = set(new.by_key())
    if want != got:
        raise ResultsError(
            f"{new.path}: expected the {len(want)} points of suite {suite!r}, got {len(got)} "
            f"({len(want - got)} missing, {len(got - want)} extra)"
        )
    target = a.baselines / key / f"{suite}.json"
    old: Results | None = None
    if target.exists():
        try:
            old = load_baseline(target, key)
        except ResultsError as e:
            print(f"the old baseline is not readable ({e}); replacing it")
    env = new.env
    doc = dict(new.doc)
    doc["points"] = [{**p, "noise": round_noise(p)} for p in new.points]
    doc["baseline"] = {
        "reason": reason,
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "commit": env.get("commit"),
        "dirty": env.get("dirty"),
        "kernel_fingerprint": env["kernel_fingerprint"],
        "timing": new.timing,
        "rounds": rounds,
        "source": str(new.path),
        "previous": None if old is None else {
            k: old.doc["baseline"].get(k) for k in ("commit", "kernel_fingerprint", "reason", "created")
        },
    }  # fmt: skip
    sds = [p["noise"]["round_sd"] for p in doc["points"]]
    lines = [f"# Baseline {key}/{suite}", "", f"Reason: {reason}", "", f"GPU: {name}", "",
             f"Commit {env.get('commit')}, kernels {env['kernel_fingerprint']}, {rounds} rounds "
             f"(fresh processes) of {new.timing['repeat']} samples a point.", "",
             f"Between-round noise (sd of log round medians): median {np.median(sds):.2%}, "
             f"max {max(sds):.2%}.", ""]  # fmt: skip
    if old is not None:
        try:
            c = compare(old, Results(target, doc))
            print("old baseline vs new baseline:")
            print(text_table(c))
            lines += [
                "Old vs new (separate runs):",
                "",
                "```",
                c.summary(),
                text_table(c),
                "```",
                "",
            ]
        except ResultsError as e:  # e.g. a deliberate change of the timing contract
            print(f"the old baseline is not comparable ({e}); replacing it")
            lines += [f"The old baseline is not comparable: {e}", ""]
    else:
        lines += ["No previous baseline.", ""]
    lines += [f"Pair digest: `{pair_digest(doc)}` (the .json this file belongs to).", ""]
    write_pair(target, doc, target.with_suffix(".md"), "\n".join(lines))
    print(
        f"wrote {target} ({len(new.points)} points, {rounds} rounds) and {target.with_suffix('.md')}"
    )
    return EXIT_PASS
