"""Conformance of the dq_mma route (kernels/dq_mma.cu, the portable fused route): the T
it owns in the tables (the portable sm_80 / sm_120 rows: on an H200 under
NINFER_CONFORMANCE_TABLE, docs/testing.md), and through a dispatcher whose every table
sends all T to it (whatever the shipped tables say): every format, the conformance
shapes, both token tiles and ring depths, K split between blocks, the RTX 5090's shared
memory per SM emulated, x that cp.async cannot read in place, and out stores that must not
touch the memory around out."""

from __future__ import annotations

import numpy as np
import pytest

from ninfer import QType
from ninfer.ops.dispatch import DEFAULT, Dispatcher
from ninfer.routes import ROUTE_TABLES
from ninfer.routes.dq_mma import SHARED_PER_SM_5090, DqMmaTuning
from ninfer.routes.table import Route

from .cases import (
    QTYPES,
    SHAPES,
    nan_like_out,
    oracle_weight,
    owned_t,
    run_case,
    workspace_for,
    x_at,
)
from .oracle import check_against_oracle, packed_case, random_x, seed_for, to_bf16_device

ONLY_MMA = {cc: (Route("dq_mma", 1, None),) for cc in ROUTE_TABLES}


def _dispatcher(
    tokens: int | None = None, splits: int | None = None, **forced: int | None
) -> Dispatcher:
    """Every T to dq_mma, its token tile, split count and ``forced``'s other DqMmaTuning
    fields set (None: its rules decide); the compiled modules are shared with the default
    dispatcher."""
    tuning = DqMmaTuning(tokens=tokens, splits=splits, **forced)  # type: ignore[arg-type]
    return DEFAULT.with_tables(ONLY_MMA).with_tuning(dq_mma=tuning)


MMA = _dispatcher()


@pytest.mark.parametrize("t", owned_t("dq_mma"))
@pytest.mark.parametrize(("n", "k"), SHAPES, ids=lambda v: str(v))
@pytest.mark.parametrize("qtype", QTYPES, ids=lambda q: q.name)
def test_dq_mma_owned(qtype: QType, n: int, k: int, t: int) -> None:
    run_case("dq_mma", qtype, n, k, t)


@pytest.mark.parametrize("t", [1, 17, 33, 64, 65, 200])  # each token tile, its edges
@pytest.mark.parametrize(("n", "k"), SHAPES, ids=lambda v: str(v))
@pytest.mark.parametrize("qtype", QTYPES, ids=lambda q: q.name)
def test_dq_mma_forced(qtype: QType, n: int, k: int, t: int) -> None:
    run_case("dq_mma", qtype, n, k, t, dispatcher=MMA)


@pytest.mark.parametrize("t", [1, 64, 130])
@pytest.mark.parametrize("ring", [3, 4])
@pytest.mark.parametrize("tokens", [32, 64])
@pytest.mark.parametrize(("n", "k"), [(264, 640), (4616, 10248), (14352, 640)], ids=str)
@pytest.mark.parametrize("qtype", QTYPES, ids=lambda q: q.name)
def test_dq_mma_ring_depths(qtype: QType, n: int, k: int, tokens: int, ring: int, t: int) -> None:
    """Both ring depths of both tiles (the GPU's shared memory an SM picks one; a depth
    that does not fit SHARED_MAX, BF16's 4 at 64 tokens, falls back to a 32-token tile)."""
    run_case("dq_mma", qtype, n, k, t, dispatcher=_dispatcher(tokens, stages=ring))


@pytest.mark.parametrize("qtype", [QType.Q4, QType.W8], ids=lambda q: q.name)
def test_dq_mma_rtx5090_shared_per_sm(qtype: QType) -> None:
    """The carveout that emulates the RTX 5090's 100 KB an SM changes occupancy, not
    results; the next plan sets the GPU's default back (-1), which the driver takes."""
    run_case(
        "dq_mma", qtype, 4616, 4616, 64, dispatcher=_dispatcher(shared_per_sm=SHARED_PER_SM_5090)
    )
    run_case("dq_mma", qtype, 4616, 4616, 64, dispatcher=MMA)


@pytest.mark.parametrize("splits", [2, 7])
@pytest.mark.parametrize("tokens", [32, 64])
@pytest.mark.parametrize("qtype", QTYPES, ids=lambda q: q.name)
def test_dq_mma_split_k(qtype: QType, tokens: int, splits: int) -> None:
    """K split between blocks, summed by each tile's last block (K = 10248, padded to
    10368: 162 stages of 64, in 81 and 81 or seven splits of 23 and 24; the last stage
    part K, part padding; a partial last row tile and token tile)."""
    run_case("dq_mma", qtype, 4616, 10248, 130, dispatcher=_dispatcher(tokens, splits))


_GUARD = 4096  # elements of sentinel on each side of an out placed in a larger buffer


@pytest.mark.parametrize(
    ("k", "x_offset", "n", "out_offset"),
    [(1152, 1, 14352, 8), (1001, 0, 14350, 0), (1152, 0, 14352, 1)],
    ids=["x_base_+2B", "K_1001_N_14350", "out_base_+2B"],
)
@pytest.mark.parametrize("splits", [None, 3], ids=["host_splits", "split_3"])
@pytest.mark.parametrize("qtype", [QType.Q4, QType.W8, QType.BF16], ids=lambda q: q.name)
def test_dq_mma_unaligned(
    qtype: QType, splits: int | None, k: int, x_offset: int, n: int, out_offset: int
) -> None:
    """x whose base or rows are not whole 16 bytes goes through the workspace copy; out
    stores of 16 bytes where out allows them, else element by element: every element of
    out written, none around it."""
    import cupy as cp
    import ml_dtypes

    t = 130
    d = _dispatcher(splits=splits)
    w, w64 = packed_case(qtype, n, k, seed_for("w", qtype.name, n, k))
    w_ref = oracle_weight(w, t, w64, dispatcher=d)
    seed = seed_for("dq_mma_unaligned", qtype.name, k, x_offset, n, out_offset)
    xh = random_x(np.random.default_rng(seed), t, k)
    x = x_at(t, k, x_offset)
    x[...] = to_bf16_device(xh)
    sentinel = 0x7FC1  # a NaN the kernel never writes
    buf = cp.full(_GUARD + out_offset + t * n + _GUARD, sentinel, dtype=cp.uint16)
    lo, hi = _GUARD + out_offset, _GUARD + out_offset + t * n
    out = buf[lo:hi].reshape(t, n).view(ml_dtypes.bfloat16)
    d.linear(x, w, out, workspace=workspace_for(w, t, dispatcher=d))
    label = f"dq_mma {qtype.name} [{n},{k}] T={t} x +{2 * x_offset} B out +{2 * out_offset} B"
    check_against_oracle(out, xh.astype(ml_dtypes.bfloat16), w_ref, label, qtype.name, seed)
    host = cp.asnumpy(buf)
    assert np.all(host[:lo] == sentinel) and np.all(host[hi:] == sentinel), (
        f"{label}: elements around out were written"
    )


@pytest.mark.parametrize("qtype", [QType.Q4, QType.NVFP4], ids=lambda q: q.name)
def test_dq_mma_split_sum_is_repeatable(qtype: QType) -> None:
    """A split tile's sum is in split order whichever block finishes last: two calls give
    the same bits."""
    import cupy as cp

    n, k, t = 1152, 4304, 64
    d = _dispatcher(splits=5)
    w, _ = packed_case(qtype, n, k, seed_for("w", qtype.name, n, k))
    xh = random_x(np.random.default_rng(seed_for("dq_mma_rep", qtype.name)), t, k)
    x, ws = to_bf16_device(xh), workspace_for(w, t, dispatcher=d)
    outs = []
    for _ in range(2):
        out = nan_like_out(t, n)
        d.linear(x, w, out, workspace=ws)
        outs.append(cp.asnumpy(out.view(cp.uint16)))
    assert np.array_equal(outs[0], outs[1])
