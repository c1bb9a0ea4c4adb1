"""Conformance cases read from the route table: which T each route owns, the seams, shapes."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

from ninfer import PackedWeight, Policy, QType
from ninfer.ops.dispatch import DEFAULT, Dispatcher
from ninfer.routes import ROUTE_TABLES, Problem, seams
from ninfer.routes.table import read_table

from .oracle import (
    bf16_bits,
    bf16_rounded,
    check_against_oracle,
    packed_case,
    random_x,
    seed_for,
    to_bf16_device,
)

# Odd N (1152, 4304), padded K (4304 -> 4352), a small shape whose N is no tile multiple,
# [4616,4616] just inside the sm_90 table's mid-size dq_rs entries (N, K >= 4608: split
# tiles, padded K), [4616,10248] inside its big-K ones (K >= 10240: 81 stage pairs, an
# odd count), N = 8200 above its T <= 64 N bound (8192) with a partial 16-row band, and
# N = 14352 above its large dq_rs bound (14336), a partial 128-row tile.
SHAPES = [
    (264, 640), (4304, 1152), (1152, 4304), (4616, 4616), (4616, 10248), (8200, 640), (14352, 640)
]  # fmt: skip


def _tables() -> dict[int, Any]:
    # NINFER_CONFORMANCE_TABLE=path: the suite under that route-table file on every GPU
    # (its rows for each compute capability), e.g. the portable sm_80 table on an H200
    # (issue 26: the portable routes' conformance where only an H200 is lent).
    path = os.environ.get("NINFER_CONFORMANCE_TABLE")
    if not path:
        return ROUTE_TABLES
    rows = read_table(Path(path)).rows
    return {cc: rows for cc in ROUTE_TABLES}


TABLES = _tables()
CONFORMANCE = DEFAULT if TABLES is ROUTE_TABLES else Dispatcher(TABLES)


def variant_tuning(route: str) -> Any:
    """NINFER_CONFORMANCE_VARIANT=FILE:NAME: the route's tuning in variant NAME of the
    experiment FILE (tools/experiment.py), so that the rows an experiment times are tested
    against the oracle in the same device call, before any of them is shipped; else the
    route's shipped tuning."""
    import yaml

    from ninfer.bench.override import dispatcher_for

    spec = os.environ.get("NINFER_CONFORMANCE_VARIANT")
    if not spec:
        return DEFAULT.tuning[route]
    path, sep, name = spec.rpartition(":")
    variants = yaml.safe_load(Path(path).read_text())["variants"] if sep else {}
    if name not in variants:
        raise ValueError(
            f"NINFER_CONFORMANCE_VARIANT: expected FILE:NAME with NAME a variant of FILE, "
            f"got {spec!r}"
        )
    return dispatcher_for(variants[name] or {"tuning": {}}, spec).tuning[route]


SUITE_T = {1, 4, 16, 128, 1024}  # the seed's Continuous and VisionStep4 classes
LARGE_T = {64, 1025, 2048}
ALL_T = sorted(
    set(range(1, 33)) | SUITE_T | LARGE_T | {t for cc in TABLES for t in seams(cc, TABLES)}
)
QTYPES = list(QType)


def owned_t(route: str) -> list[int]:
    """T values of ALL_T that ``route`` serves in some architecture's table."""
    out = set()
    for table in TABLES.values():
        for r in table:
            if r.name == route:  # its T range: run_case skips what another entry serves
                out |= {t for t in ALL_T if r.t_min <= t and (r.t_max is None or t <= r.t_max)}
    return sorted(out)


def device_cc() -> int:
    import cupy as cp

    return int(cp.cuda.Device().compute_capability)


def run_case(
    route: str,
    qtype: QType,
    n: int,
    k: int,
    t: int,
    kind: str = "cupy",
    policy: Policy = Policy.A16,
    dispatcher: Dispatcher = CONFORMANCE,
) -> None:
    """One conformance check: pack, launch through the public op (or ``dispatcher``, for
    cases with another table or tuning), compare with FP64."""
    import pytest

    p = Problem(qtype, policy, n, k, t, device_cc())
    if dispatcher.select(p).name != route:
        pytest.skip(f"{route} does not serve T={t} on sm_{p.cc}")
    seed = seed_for(route, qtype.name, n, k, t)
    w, w64 = packed_case(qtype, n, k, seed_for("w", qtype.name, n, k))
    rng = np.random.default_rng(seed)
    xh = random_x(rng, t, k)
    x = to_bf16_device(xh, kind)
    out = nan_like_out(t, n, kind)
    dispatcher.linear(x, w, out, policy, workspace_for(w, t, policy, dispatcher))
    check_against_oracle(
        out,
        _bf16(xh),
        oracle_weight(w, t, w64, policy, dispatcher),
        f"{route} {qtype.name} [{n},{k}] T={t} {kind}",
        qtype.name,
        seed,
    )


def workspace_for(
    w: PackedWeight, t: int, policy: Policy = Policy.A16, dispatcher: Dispatcher = DEFAULT
) -> Any:
    """A device buffer of exactly the query's size, or None when it is 0."""
    need = dispatcher.workspace_bytes(w, t, policy)
    if need == 0:
        return None
    import cupy as cp

    return cp.empty(need, dtype=cp.uint8)


def oracle_weight(
    w: PackedWeight,
    t: int,
    w64: Any,
    policy: Policy = Policy.A16,
    dispatcher: Dispatcher = DEFAULT,
) -> Any:
    """The weight the selected route multiplies (DESIGN §5: the oracle follows the route)."""
    p = Problem(w.qtype, policy, w.n, w.k, t, device_cc())
    launcher = dispatcher.select(p).launcher
    if w.qtype in launcher.rounds_weight:
        return bf16_rounded(w64)
    return w64


def _bf16(a: np.ndarray) -> np.ndarray:
    import ml_dtypes

    return a.astype(ml_dtypes.bfloat16)


NAN_BF16 = np.uint16(0x7FC0)


def x_at(t: int, k: int, offset: int) -> Any:
    """A (T, K) BF16 array starting ``offset`` elements into an allocation (256-byte
    aligned): x that cp.async and TMA cannot read in place when ``offset`` is odd."""
    import cupy as cp
    import ml_dtypes

    buf = cp.zeros(t * k + offset, dtype=cp.uint16)
    return buf[offset:].reshape(t, k).view(ml_dtypes.bfloat16)


def nan_like_out(t: int, n: int, kind: str = "cupy") -> Any:
    """A (T, N) BF16 output pre-filled with NaN, so any unwritten element fails the check."""
    return to_bf16_device(np.full((t, n), np.nan), kind)


def host_bits(a: Any) -> np.ndarray:
    return bf16_bits(a)
