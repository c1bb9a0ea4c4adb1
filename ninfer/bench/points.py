"""Benchmark points: model suites (suites/*.yaml), T sweeps and weight groups (seed 000 §1-§3).

Every request — one exact point, a sweep or a suite — expands to ``BenchPoint``s; the
runner then groups them by ``(qtype, policy, N, K)`` so each weight is built once and
every T of the group reuses it.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TypeVar

import yaml

from ninfer.formats.packed import INT32_MAX  # the kernels' int32 parameters
from ninfer.formats.qtype import QType
from ninfer.policy import Policy
from ninfer.record import PointKey

SUITE_NAMES = ("qwen3_6_27b", "qwen3_6_35b_a3b", "all")
# 'all' has no file: it is the union of the model suites, in this order.
MODEL_SUITES = SUITE_NAMES[:-1]

GroupKey = tuple[QType, Policy, int, int]
_E = TypeVar("_E")

# Labels end up in console columns, CSV cells and a '+'-joined merged label, so keep
# them to one plain token.
_LABEL = re.compile(r"[A-Za-z0-9_.\-]+")
_SWEEP = re.compile(r"([0-9]+):([0-9]+)(?::([0-9]+))?")
_SUITE_KEYS = frozenset({"suite", "policy", "t_classes", "entries"})
_ENTRY_KEYS = frozenset({"label", "qtype", "n", "k", "t_class"})
_ENTRY_OPTIONAL = frozenset({"policy"})  # per-entry override of the suite policy
# Every T of a sweep is a timed point (capture, warmup and repeat calls, a flush per
# sample), so more than this is a typo; expanding 1:2**31 would exhaust host memory first.
MAX_SWEEP_POINTS = 1 << 16


class SuiteError(ValueError):
    """A suite file that breaks the schema; the message names the place, expected and got."""


@dataclass(frozen=True)
class BenchPoint:
    """One timed public ``linear()`` call: weight ``[N,K]`` of ``qtype``, ``T`` tokens."""

    qtype: QType
    policy: Policy
    n: int
    k: int
    t: int
    labels: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for name, value in (("N", self.n), ("K", self.k), ("T", self.t)):
            why = dim_error(value)
            if why:
                raise ValueError(f"bench point {name}: {why}")
        for name, cols in (("x", self.k), ("out", self.n)):
            if self.t * cols > INT32_MAX:  # what linear() refuses: int32 element indices
                raise ValueError(
                    f"bench point {name}: expected T × {'K' if name == 'x' else 'N'} <= "
                    f"{INT32_MAX} elements (int32), got {self.t} × {cols}"
                )
        check_policy(self.qtype, self.policy)

    @property
    def key(self) -> PointKey:
        """Identity of the timing row: equal keys are timed once (seed 000 §2.4)."""
        return PointKey(self.qtype.value, self.policy.value, self.n, self.k, self.t)

    @property
    def group(self) -> GroupKey:
        """Points sharing one packed weight and one max-T activation allocation."""
        return (self.qtype, self.policy, self.n, self.k)

    @property
    def label(self) -> str:
        return "+".join(self.labels) or "-"


def _is_positive_int(value: object) -> bool:
    # bool is an int subclass; YAML 'yes' must not become N=1.
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def dim_error(value: object) -> str | None:
    """Why ``value`` is not a valid N, K or T (an int in [1, INT32_MAX]); None if it is."""
    if not isinstance(value, int) or not _is_positive_int(value):
        return f"expected an int >= 1, got {value!r}"
    if value > INT32_MAX:
        return f"expected an int <= {INT32_MAX} (int32), got {value!r}"
    return None


def check_policy(qtype: QType, policy: Policy) -> None:
    """AllowA4 is legal for NVFP4 weights only: the rule ``linear()`` applies at call time,
    applied here so a bad point is refused before any GPU work."""
    if policy is Policy.A4 and qtype is not QType.NVFP4:
        raise ValueError(f"policy a4: expected qtype nvfp4, got {qtype.value}")


def suites_dir() -> Path:
    """``ninfer/_suites`` in an installed wheel, else ``<repo>/suites`` in a checkout.

    Same lookup order as ``ninfer.runtime.sources.kernel_dir``.
    """
    pkg = Path(__file__).resolve().parent.parent
    for cand in (pkg / "_suites", pkg.parent / "suites"):
        if cand.is_dir() and any(cand.glob("*.yaml")):
            return cand
    raise FileNotFoundError(f"suite files not found next to {pkg} (_suites/ or ../suites/)")


def load_suite(name: str, root: Path | None = None) -> list[BenchPoint]:
    """Expand a named suite to points; ``all`` is the union with shared points merged.

    ``root`` defaults to ``suites_dir()``; tests pass a folder of their own.
    """
    if name not in SUITE_NAMES:
        raise ValueError(f"unknown suite: expected one of {list(SUITE_NAMES)}, got {name!r}")
    base = suites_dir() if root is None else root
    files = MODEL_SUITES if name == "all" else (name,)
    points: list[BenchPoint] = []
    for suite in files:
        points += load_suite_file(base / f"{suite}.yaml", expect_name=suite)
    return merge_points(points)


class _DuplicateKey(yaml.constructor.ConstructorError):
    pass


class _UniqueKeyLoader(yaml.SafeLoader):
    """safe_load, except that a key given twice in one mapping is an error.

    yaml.safe_load keeps the last of duplicate keys, so ``n: 64`` then ``n: 128`` (or a
    second ``policy``) would silently change what is measured.
    """

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, int] = {}
        # Before flatten_mapping: keys merged in with '<<' may be overridden, per YAML.
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=True)
            try:
                first = seen.get(key)
            except TypeError:  # unhashable: the base constructor reports it
                continue
            if first is not None:
                raise _DuplicateKey(
                    None,
                    None,
                    f"expected unique mapping keys, got {key!r} again (first at line {first})",
                    key_node.start_mark,
                )
            seen[key] = key_node.start_mark.line + 1
        return super().construct_mapping(node, deep=deep)


def _yaml_error(path: Path, e: yaml.YAMLError) -> SuiteError:
    # PyYAML's str() spans several lines with a source excerpt; the CLI prints one line.
    mark = getattr(e, "problem_mark", None)
    where = f"{path}: line {mark.line + 1}" if mark is not None else str(path)
    problem = getattr(e, "problem", None) or str(e).splitlines()[0]
    if isinstance(e, _DuplicateKey):
        return SuiteError(f"{where}: {problem}")
    context = getattr(e, "context", None)
    return SuiteError(
        f"{where}: expected valid YAML, got {problem}" + (f" ({context})" if context else "")
    )


def load_suite_file(path: Path, expect_name: str | None = None) -> list[BenchPoint]:
    """Parse and validate one suite YAML file (schema: see suites/qwen3_6_27b.yaml)."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise SuiteError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise SuiteError(f"{path}: expected a file, got a directory") from None
    except OSError as e:
        raise SuiteError(f"{path}: not readable ({e.strerror})") from None
    try:
        doc = yaml.load(text, Loader=_UniqueKeyLoader)  # a SafeLoader: plain data only
    except yaml.YAMLError as e:
        raise _yaml_error(path, e) from None
    return parse_suite(doc, where=str(path), expect_name=expect_name)


def parse_suite(doc: Any, where: str = "suite", expect_name: str | None = None) -> list[BenchPoint]:
    """Validate a loaded suite document and expand every entry over its T class."""
    top = _mapping(doc, where)
    _check_keys(top, _SUITE_KEYS, frozenset(), where)
    name = top["suite"]
    if not isinstance(name, str) or not name:
        raise SuiteError(f"{where}: suite: expected a non-empty name, got {name!r}")
    if expect_name is not None and name != expect_name:
        raise SuiteError(f"{where}: suite: expected {expect_name!r} (the file name), got {name!r}")
    policy = _parse_enum(Policy.parse, top["policy"], f"{where}: policy")
    classes = _parse_t_classes(top["t_classes"], f"{where}: t_classes")

    entries = top["entries"]
    if not isinstance(entries, list) or not entries:
        raise SuiteError(f"{where}: entries: expected a non-empty list, got {entries!r}")
    points: list[BenchPoint] = []
    seen: dict[str, int] = {}
    for i, raw in enumerate(entries):
        loc = f"{where}: entries[{i}]"
        entry = _mapping(raw, loc)
        _check_keys(entry, _ENTRY_KEYS, _ENTRY_OPTIONAL, loc)
        label = entry["label"]
        if not isinstance(label, str) or not _LABEL.fullmatch(label):
            raise SuiteError(f"{loc}.label: expected one token of [A-Za-z0-9_.-], got {label!r}")
        if label in seen:
            raise SuiteError(
                f"{loc}.label: expected unique labels, got {label!r} again "
                f"(first at entries[{seen[label]}])"
            )
        seen[label] = i
        qtype = _parse_enum(QType.parse, entry["qtype"], f"{loc}.qtype")
        entry_policy = (
            _parse_enum(Policy.parse, entry["policy"], f"{loc}.policy")
            if "policy" in entry
            else policy
        )
        for dim in ("n", "k"):
            why = dim_error(entry[dim])
            if why:
                raise SuiteError(f"{loc}.{dim}: {why}")
        try:
            check_policy(qtype, entry_policy)
        except ValueError as e:
            raise SuiteError(f"{loc}: {e}") from None
        t_class = entry["t_class"]
        if not isinstance(t_class, str) or t_class not in classes:
            raise SuiteError(f"{loc}.t_class: expected one of {sorted(classes)}, got {t_class!r}")
        points += [
            BenchPoint(qtype, entry_policy, entry["n"], entry["k"], t, (label,))
            for t in classes[t_class]
        ]
    return merge_points(points)


def _mapping(value: Any, where: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise SuiteError(f"{where}: expected a mapping, got {type(value).__name__}")
    return value


def _check_keys(
    obj: Mapping[str, Any], required: frozenset[str], optional: frozenset[str], where: str
) -> None:
    missing = required - obj.keys()
    if missing:
        raise SuiteError(
            f"{where}: missing keys: expected {sorted(required)}, got {sorted(obj.keys())} "
            f"(missing {sorted(missing)})"
        )
    # Unknown keys are refused so a typo (or smuggled route metadata, seed 000 §8.1)
    # cannot pass silently.
    unknown = obj.keys() - required - optional
    if unknown:
        raise SuiteError(
            f"{where}: unknown keys: expected only {sorted(required | optional)}, "
            f"got {sorted(unknown)}"
        )


def _parse_enum(parse: Callable[[Any], _E], value: Any, where: str) -> _E:
    try:
        return parse(value)
    except ValueError as e:
        raise SuiteError(f"{where}: {e}") from None


def _parse_t_classes(value: Any, where: str) -> dict[str, tuple[int, ...]]:
    classes = _mapping(value, where)
    if not classes:
        raise SuiteError(f"{where}: expected at least one T class, got none")
    out: dict[str, tuple[int, ...]] = {}
    for name, ts in classes.items():
        ok = (
            isinstance(ts, list)
            and len(ts) > 0
            and all(_is_positive_int(t) for t in ts)
            and all(a < b for a, b in itertools.pairwise(ts))
        )
        if not ok:
            raise SuiteError(
                f"{where}.{name}: expected a non-empty, strictly ascending list of ints >= 1, "
                f"got {ts!r}"
            )
        if ts[-1] > INT32_MAX:
            raise SuiteError(f"{where}.{name}: expected T <= {INT32_MAX} (int32), got {ts[-1]}")
        out[str(name)] = tuple(ts)
    return out


def merge_points(points: Iterable[BenchPoint]) -> list[BenchPoint]:
    """One point per key, in first-appearance order, with the labels of all duplicates."""
    merged: dict[PointKey, BenchPoint] = {}
    for p in points:
        prev = merged.get(p.key)
        if prev is None:
            merged[p.key] = p
        else:
            extra = tuple(lb for lb in p.labels if lb not in prev.labels)
            merged[p.key] = replace(prev, labels=prev.labels + extra)
    return list(merged.values())


def parse_sweep(spec: str) -> list[int]:
    """``"LO:HI"`` or ``"LO:HI:STEP"`` -> T values from LO to HI inclusive (``4:512:4``).

    HI is included when it lies on the step grid; ``1:10:4`` gives 1, 5, 9.
    """
    m = _SWEEP.fullmatch(spec.strip())
    if m is None:
        raise ValueError(f"sweep: expected 'LO:HI' or 'LO:HI:STEP' of integers, got {spec!r}")
    lo, hi = int(m[1]), int(m[2])
    step = int(m[3]) if m[3] is not None else 1
    if lo < 1:
        raise ValueError(f"sweep {spec!r}: expected LO >= 1, got LO={lo}")
    if hi < lo:
        raise ValueError(f"sweep {spec!r}: expected LO <= HI, got LO={lo} > HI={hi}")
    if step < 1:
        raise ValueError(f"sweep {spec!r}: expected STEP >= 1, got STEP={step}")
    if hi > INT32_MAX:
        raise ValueError(f"sweep {spec!r}: expected HI <= {INT32_MAX} (int32), got HI={hi}")
    ts = range(lo, hi + 1, step)
    if len(ts) > MAX_SWEEP_POINTS:
        raise ValueError(
            f"sweep {spec!r}: expected at most {MAX_SWEEP_POINTS} T values, got {len(ts)}"
        )
    return list(ts)


def group_points(points: Iterable[BenchPoint]) -> dict[GroupKey, list[BenchPoint]]:
    """Points by weight group, groups in first-appearance order, T ascending within one.

    Duplicate keys are merged first, so a group never times the same T twice.
    """
    groups: dict[GroupKey, list[BenchPoint]] = {}
    for p in merge_points(points):
        groups.setdefault(p.group, []).append(p)
    return {g: sorted(ps, key=lambda p: p.t) for g, ps in groups.items()}
