"""Load and validate run records and baselines (schema ``ninfer.results`` v1).

The JSON Schema (results.schema.json, shipped in the wheel) is the contract; the
loader checks the schema name and version first so that an old or foreign file gets
a precise message instead of a list of schema violations.
"""

from __future__ import annotations

import functools
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..bench.results import SCHEMA, SCHEMA_VERSION

SCHEMA_FILE = Path(__file__).with_name("results.schema.json")

PointKey = tuple[str, str, int, int, int]  # qtype, policy, N, K, T


class ResultsError(ValueError):
    """A results or baseline file that cannot be used (unreadable, malformed, wrong version)."""


class GpuMismatchError(ResultsError):
    """Two records from different GPU models: their timings are not comparable."""


@functools.cache
def json_schema() -> dict[str, Any]:
    return dict(json.loads(SCHEMA_FILE.read_text()))


@dataclass(frozen=True)
class Results:
    path: Path
    doc: dict[str, Any]

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
    def points(self) -> list[dict[str, Any]]:
        return list(self.doc["points"])

    def by_key(self) -> dict[PointKey, dict[str, Any]]:
        return {point_key(p): p for p in self.doc["points"]}


def point_key(p: dict[str, Any]) -> PointKey:
    return (str(p["qtype"]), str(p["policy"]), int(p["n"]), int(p["k"]), int(p["t"]))


def key_str(k: PointKey) -> str:
    return f"{k[0]} {k[1]} [{k[2]},{k[3]}] T={k[4]}"


def validate(doc: Any, where: str) -> None:
    """Raise ResultsError unless ``doc`` is a schema-v1 record."""
    if not isinstance(doc, dict):
        raise ResultsError(f"{where}: expected a JSON object, got {type(doc).__name__}")
    if doc.get("schema") != SCHEMA:
        raise ResultsError(f"{where}: expected schema {SCHEMA!r}, got {doc.get('schema')!r}")
    if doc.get("schema_version") != SCHEMA_VERSION:
        raise ResultsError(
            f"{where}: schema_version {doc.get('schema_version')!r} is not the one this ninfer "
            f"reads ({SCHEMA_VERSION}); re-measure with this version or use the matching ninfer"
        )
    import jsonschema

    validator = jsonschema.Draft202012Validator(json_schema())
    errors = sorted(validator.iter_errors(doc), key=lambda e: list(e.absolute_path))
    if errors:
        e = errors[0]
        loc = "/".join(str(x) for x in e.absolute_path) or "(top level)"
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        raise ResultsError(f"{where}: malformed at {loc}: {e.message}{more}")
    for p in doc["points"]:  # JSON Schema's numeric bounds let NaN and Infinity through
        vals = [*p["samples_us"], p["median_us"], p["min_us"], p["p95_us"]]
        bad = [v for v in vals if not math.isfinite(v)]
        if bad:
            raise ResultsError(
                f"{where}: point {key_str(point_key(p))}: expected finite times > 0, got {bad[0]!r}"
            )
    keys = [point_key(p) for p in doc["points"]]
    if len(set(keys)) != len(keys):
        dup = next(k for k in keys if keys.count(k) > 1)
        raise ResultsError(f"{where}: point {key_str(dup)} appears more than once")


def load_results(path: str | Path, expect_gpu: str | None = None) -> Results:
    p = Path(path)
    try:
        doc = json.loads(p.read_text())
    except FileNotFoundError as e:
        raise ResultsError(f"{p}: no such file") from e
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ResultsError(f"{p}: not a readable JSON file ({e})") from e
    validate(doc, str(p))
    r = Results(p, doc)
    if expect_gpu is not None and r.gpu_key != expect_gpu:
        raise GpuMismatchError(
            f"{p}: measured on {r.env['gpu_name']} ({r.gpu_key}), expected a {expect_gpu} record"
        )
    return r


def load_baseline(path: str | Path, expect_gpu: str | None = None) -> Results:
    r = load_results(path, expect_gpu)
    if "baseline" not in r.doc:
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


def write_json(path: Path, doc: dict[str, Any]) -> None:
    validate(doc, str(path))  # never write a record the loader would reject
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(doc, indent=1, allow_nan=False) + "\n")
    tmp.replace(path)  # atomic: an interrupted write never leaves half a baseline
