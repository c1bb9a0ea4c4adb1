"""The run record (schema ``ninfer.results`` v2): one module that writes and reads it.

``ninfer-bench`` writes it, ``ninfer-regress`` reads it; nothing else touches the JSON.
A record holds the environment, the timing contract, the ceilings and, per point, every
*round* it was measured in: the samples of that round, where in the round's shuffled
order it ran, and the GPU's telemetry (NVML) around it. A round is one allocation of
the run's memory in one process; the gate's rounds are fresh processes (docs/regress.md,
"Where the noise lives": the spread between processes is many times the spread of
samples inside one, so the round, not the sample, is the unit of replication).

Version 1 files (one process, ``samples_us`` per point) are still read: each becomes a
record of one round, which the statistics can only judge by complete separation.
Every write is atomic (a temporary file, fsync, rename) and checked against the JSON
Schema first, so no reader ever sees half a record or one it would reject.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import json
import math
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from .atomic import staged, write_text_atomic

SCHEMA = "ninfer.results"
SCHEMA_VERSION = 2
READABLE_VERSIONS = (1, 2)
SCHEMA_FILE = Path(__file__).with_name("results.schema.json")
# A results file larger than this is not a run of ours (77k-sample files, deep nesting):
# refuse it before json.loads spends the memory.
MAX_FILE_BYTES = 64 << 20
# Samples a record may hold, counted before the schema walks them (JSON Schema takes
# about 17 µs a sample: a 3-million-sample file inside the size bound took 53 s). The
# largest real records are far below: a 10-round baseline of `all` holds 13,600, a
# 1:1024 sweep of 10 rounds 204,800.
MAX_SAMPLES = 1_000_000


class ResultsError(ValueError):
    """A results or baseline file that cannot be used (unreadable, malformed, wrong version)."""


class GpuMismatchError(ResultsError):
    """Two records from different GPU models: their timings are not comparable."""


class PointKey(NamedTuple):
    """The identity of a timed point: equal keys are one point (seed 000 §2.4)."""

    qtype: str
    policy: str
    n: int
    k: int
    t: int

    def __str__(self) -> str:
        return f"{self.qtype} {self.policy} [{self.n},{self.k}] T={self.t}"

    @property
    def shape(self) -> tuple[str, str, int, int]:
        """The weight the point uses (a sweep's curve is one shape over T)."""
        return (self.qtype, self.policy, self.n, self.k)


def point_key(p: dict[str, Any]) -> PointKey:
    return PointKey(str(p["qtype"]), str(p["policy"]), int(p["n"]), int(p["k"]), int(p["t"]))


def key_str(k: PointKey | tuple[str, str, int, int, int]) -> str:
    return str(PointKey(*k))


@functools.cache
def json_schema() -> dict[str, Any]:
    return dict(json.loads(SCHEMA_FILE.read_text()))


# --- the record --------------------------------------------------------------------


def kept_rounds(p: dict[str, Any]) -> list[dict[str, Any]]:
    """The rounds the statistics use: every round not marked throttled."""
    return [r for r in p["rounds"] if not r.get("throttled")]


def round_samples(p: dict[str, Any]) -> list[list[float]]:
    """Samples (µs) of each kept round of a point."""
    return [[float(x) for x in r["samples_us"]] for r in kept_rounds(p)]


def summarize(p: dict[str, Any], ceilings: dict[str, Any] | None = None) -> None:
    """Set a point's median / min / p95 (and, given the ceilings, its metrics) from its
    kept rounds (all rounds if none is kept).

    The median is the median of the round medians: a round is the unit of replication,
    so one long round must not outvote several short ones.
    """
    rounds = kept_rounds(p) or p["rounds"]
    meds = [float(np.median(r["samples_us"])) for r in rounds]
    every = np.concatenate([np.asarray(r["samples_us"], float) for r in rounds])
    p["median_us"] = float(np.median(meds))
    p["min_us"] = float(every.min())
    p["p95_us"] = float(np.percentile(every, 95))
    if ceilings is not None:
        from .metrics import Ceilings, point_metrics

        c = Ceilings("", ceilings["dram_spec_gbps"], ceilings["sustained_read_gbps"],
                     ceilings["read_source"], ceilings.get("bf16_dense_tflops"))  # fmt: skip
        p["metrics"] = point_metrics(p["qtype"], p["n"], p["k"], p["t"], p["median_us"], c)


@dataclass(frozen=True)
class Results:
    """A loaded, validated record (always in the v2 shape; ``version`` says what was read)."""

    path: Path
    doc: dict[str, Any]
    version: int = SCHEMA_VERSION

    @property
    def env(self) -> dict[str, Any]:
        return dict(self.doc["environment"])

    @property
    def gpu_key(self) -> str:
        return str(self.doc["environment"]["gpu_key"])

    @property
    def timing(self) -> dict[str, Any]:
        return dict(self.doc["timing"])

    @property
    def fingerprint(self) -> str:
        return str(self.doc["environment"]["kernel_fingerprint"])

    @property
    def commit(self) -> str | None:
        c = self.doc["environment"].get("commit")
        return str(c) if c else None

    @property
    def points(self) -> list[dict[str, Any]]:
        return list(self.doc["points"])

    @property
    def rounds(self) -> list[dict[str, Any]]:
        return list(self.doc["rounds"])

    @property
    def is_baseline(self) -> bool:
        return "baseline" in self.doc

    def by_key(self) -> dict[PointKey, dict[str, Any]]:
        return {point_key(p): p for p in self.doc["points"]}


def _check_sample_count(doc: dict[str, Any], where: str) -> None:
    # Shapes are not trusted yet (the schema comes after): anything odd counts as 0.
    n = 0
    points = doc.get("points")
    for p in points if isinstance(points, list) else []:
        rounds = p.get("rounds") if isinstance(p, dict) else None
        for r in rounds if isinstance(rounds, list) else []:
            samples = r.get("samples_us") if isinstance(r, dict) else None
            n += len(samples) if isinstance(samples, list) else 0
    if n > MAX_SAMPLES:
        raise ResultsError(f"{where}: {n:,} samples, expected at most {MAX_SAMPLES:,} in a record")


def validate(doc: Any, where: str) -> None:
    """Raise ResultsError unless ``doc`` is a schema-v2 record."""
    if not isinstance(doc, dict):
        raise ResultsError(f"{where}: expected a JSON object, got {type(doc).__name__}")
    if doc.get("schema") != SCHEMA:
        raise ResultsError(f"{where}: expected schema {SCHEMA!r}, got {doc.get('schema')!r}")
    if doc.get("schema_version") != SCHEMA_VERSION:
        raise ResultsError(
            f"{where}: schema_version {doc.get('schema_version')!r} is not one this ninfer "
            f"reads ({', '.join(map(str, READABLE_VERSIONS))}); re-measure with this version "
            "or use the matching ninfer"
        )
    _check_sample_count(doc, where)
    import jsonschema

    validator = jsonschema.Draft202012Validator(json_schema())
    errors = sorted(validator.iter_errors(doc), key=lambda e: list(e.absolute_path))
    if errors:
        e = errors[0]
        loc = "/".join(str(x) for x in e.absolute_path) or "(top level)"
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        raise ResultsError(f"{where}: malformed at {loc}: {e.message}{more}")
    seen: set[PointKey] = set()
    n_rounds = len(doc["rounds"])
    for p in doc["points"]:  # JSON Schema's numeric bounds let NaN and Infinity through
        k = point_key(p)
        if k in seen:
            raise ResultsError(f"{where}: point {k} appears more than once")
        seen.add(k)
        vals = [p["median_us"], p["min_us"], p["p95_us"]]
        for r in p["rounds"]:
            vals += r["samples_us"]
            if not 0 <= r["round"] < max(n_rounds, 1):
                raise ResultsError(
                    f"{where}: point {k}: round {r['round']} is not one of the record's "
                    f"{n_rounds} rounds"
                )
        bad = [v for v in vals if not math.isfinite(v)]
        if bad:
            raise ResultsError(f"{where}: point {k}: expected finite times > 0, got {bad[0]!r}")


def _upgrade_v1(doc: dict[str, Any]) -> dict[str, Any]:
    """A v1 record as v2: one process, one round, no telemetry."""
    d = copy.deepcopy(doc)
    d["schema_version"] = SCHEMA_VERSION
    d["timing"] = {**d["timing"], "rounds": 1, "order_seed": None, "memory": "pool"}
    d["rounds"] = [{"index": 0, "process": 0, "alloc": 0, "machine": d["environment"].get("host")}]
    for p in d["points"]:
        samples = p.pop("samples_us", None)
        if not isinstance(samples, list):
            raise ResultsError("v1 point without samples_us")
        p["rounds"] = [{"round": 0, "samples_us": samples}]
        p.pop("host_dispatch_us", None)
    if "baseline" in d and isinstance(d["baseline"], dict):
        d["baseline"].setdefault("rounds", 1)
    return d


def load_results(path: str | Path, expect_gpu: str | None = None) -> Results:
    p = Path(path)
    try:
        size = p.stat().st_size
    except FileNotFoundError as e:
        raise ResultsError(f"{p}: no such file") from e
    except OSError as e:
        raise ResultsError(f"{p}: not readable ({e})") from e
    if size > MAX_FILE_BYTES:
        raise ResultsError(
            f"{p}: {size} bytes, expected a results file under {MAX_FILE_BYTES >> 20} MiB"
        )
    try:
        doc = json.loads(p.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, RecursionError) as e:
        raise ResultsError(f"{p}: not a readable JSON file ({type(e).__name__}: {e})") from e
    version = doc.get("schema_version") if isinstance(doc, dict) else None
    if version == 1 and doc.get("schema") == SCHEMA:
        try:
            doc = _upgrade_v1(doc)
        except (KeyError, TypeError, AttributeError, ResultsError) as e:
            raise ResultsError(f"{p}: a malformed schema-v1 record ({e})") from e
    validate(doc, str(p))
    r = Results(p, doc, 1 if version == 1 else SCHEMA_VERSION)
    if expect_gpu is not None and r.gpu_key != expect_gpu:
        raise GpuMismatchError(
            f"{p}: measured on {r.env['gpu_name']} ({r.gpu_key}), expected a {expect_gpu} record"
        )
    return r


def load_baseline(path: str | Path, expect_gpu: str | None = None) -> Results:
    r = load_results(path, expect_gpu)
    if not r.is_baseline:
        raise ResultsError(f"{path}: a baseline needs a 'baseline' block with its reason")
    return r


def check_comparable(base: Results, new: Results) -> None:
    """Refuse pairs whose numbers do not measure the same thing."""
    if base.gpu_key != new.gpu_key:
        raise GpuMismatchError(
            f"GPU model differs: baseline {base.env['gpu_name']} ({base.gpu_key}) vs new "
            f"{new.env['gpu_name']} ({new.gpu_key}); timings of two GPU models are not compared"
        )
    # The key folds names (a MIG slice of an H200 is still "h200"); the device's shape
    # must match too, or a slice would be compared with the whole GPU.
    for field in ("cc", "sms", "l2_bytes"):
        if base.env[field] != new.env[field]:
            raise GpuMismatchError(
                f"GPU differs in {field}: baseline {base.env[field]!r} vs new "
                f"{new.env[field]!r} ({base.env['gpu_name']} vs {new.env['gpu_name']})"
            )
    for field in ("cache", "flush_mib", "execution", "timer"):
        if base.timing[field] != new.timing[field]:
            raise ResultsError(
                f"timing contract differs in {field!r}: baseline {base.timing[field]!r} vs new "
                f"{new.timing[field]!r}; measure both under the same contract"
            )


# --- building and merging records ----------------------------------------------------


def new_doc(
    command: list[str],
    environment: dict[str, Any],
    timing: dict[str, Any],
    ceilings: dict[str, Any],
    suite: str | None,
) -> dict[str, Any]:
    return {
        "schema": SCHEMA,
        "schema_version": SCHEMA_VERSION,
        "command": command,
        "environment": environment,
        "timing": timing,
        "ceilings": ceilings,
        "suite": suite,
        "wall_s": 0.0,
        "rounds": [],
        "points": [],
        "failures": [],
    }


def add_round(
    doc: dict[str, Any],
    key: PointKey,
    static: dict[str, Any],
    rnd: dict[str, Any],
    ceilings: dict[str, Any] | None = None,
) -> None:
    """Add one round of one point: the point's static fields come from its first round."""
    for p in doc["points"]:
        if point_key(p) == key:
            p["rounds"].append(rnd)
            summarize(p, ceilings)
            return
    p = {**static, "rounds": [rnd]}
    summarize(p, ceilings)
    doc["points"].append(p)


def merge(docs: Iterable[dict[str, Any]], command: list[str] | None = None) -> dict[str, Any]:
    """One record from the per-round records of one run (renumbering their rounds).

    The environment, contract and ceilings of the first record stand for the run; the
    rounds keep their own process, machine and seed.
    """
    docs = list(docs)
    if not docs:
        raise ResultsError("merge: no round records")
    out = new_doc(command or docs[0]["command"], docs[0]["environment"], dict(docs[0]["timing"]),
                  docs[0]["ceilings"], docs[0]["suite"])  # fmt: skip
    for d in docs:
        offset = len(out["rounds"])
        for r in d["rounds"]:
            out["rounds"].append({**r, "index": offset + int(r["index"])})
        for p in d["points"]:
            static = {k: v for k, v in p.items() if k != "rounds"}
            for r in p["rounds"]:
                add_round(out, point_key(p), static, {**r, "round": offset + int(r["round"])},
                          out["ceilings"])  # fmt: skip
        out["failures"] += d["failures"]
        out["wall_s"] += float(d.get("wall_s", 0.0))
    out["timing"]["rounds"] = len(out["rounds"])
    return out


def subset(doc: dict[str, Any], keys: set[PointKey]) -> dict[str, Any]:
    d = dict(doc)
    d["points"] = [p for p in doc["points"] if point_key(p) in keys]
    return d


# --- atomic writers ------------------------------------------------------------------


def _dump(doc: dict[str, Any]) -> str:
    return json.dumps(doc, indent=1, allow_nan=False) + "\n"


def write_json(path: Path, doc: dict[str, Any], check: bool = True) -> None:
    """Write a record atomically; ``check`` validates it first (skipped only for the
    per-point rewrites of a round in progress, which the final write validates)."""
    if check:
        validate(doc, str(path))
    write_text_atomic(path, _dump(doc))


def write_pair(json_path: Path, doc: dict[str, Any], md_path: Path, md: str) -> None:
    """A baseline's .json and .md as one pair: both staged (validated, fsynced) before
    either is renamed into place; if the second rename fails the first is rolled back.
    The .md names the .json's digest (``pair_digest``), so a pair torn by a crash between
    the two renames is detectable."""
    validate(doc, str(json_path))
    text = _dump(doc)
    old = json_path.read_bytes() if json_path.exists() else None
    with staged(json_path, text) as tj, staged(md_path, md) as tm:
        os.replace(tj, json_path)
        try:
            os.replace(tm, md_path)
        except BaseException:
            if old is None:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(json_path)
            else:
                write_text_atomic(json_path, old.decode())
            raise


def pair_digest(doc: dict[str, Any]) -> str:
    """The short digest of a record as written: the .md of a baseline pair carries it."""
    import hashlib

    return hashlib.sha256(_dump(doc).encode()).hexdigest()[:16]
