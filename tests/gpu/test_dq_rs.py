"""Conformance of the dq_rs route (kernels/dq_rs.cu, sm_90a) through the public op: every
format, the conformance shapes, the T it owns (the oracle rounds the weights the route
rounds: cases.oracle_weight), both token tiles, and x that TMA cannot read in place."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from ninfer import Policy, QType, pack
from ninfer.ops import linear
from ninfer.ops.dispatch import DEFAULT, Dispatcher
from ninfer.routes import Problem
from ninfer.routes.dq_rs import DqRsTuning
from ninfer.routes.table import Route

from .cases import (
    QTYPES,
    SHAPES,
    device_cc,
    nan_like_out,
    oracle_weight,
    owned_t,
    run_case,
    workspace_for,
    x_at,
)
from .oracle import check_against_oracle, packed_case, random_x, seed_for, to_bf16_device


@pytest.mark.parametrize("t", owned_t("dq_rs"))
@pytest.mark.parametrize(("n", "k"), SHAPES, ids=lambda v: str(v))
@pytest.mark.parametrize("qtype", QTYPES, ids=lambda q: q.name)
def test_dq_rs(qtype: QType, n: int, k: int, t: int) -> None:
    run_case("dq_rs", qtype, n, k, t)


@pytest.mark.parametrize("nb", [1, 2])
@pytest.mark.parametrize("t", [65, 200])
@pytest.mark.parametrize("qtype", QTYPES, ids=lambda q: q.name)
def test_dq_rs_each_token_tile(qtype: QType, t: int, nb: int) -> None:
    """Both tiles on one shape whatever the wave rule picks: 128 tokens (T = 200: two
    tiles, the last partial) and 256 (T = 65: one tile, mostly past T)."""
    n, k = 14352, 640
    run_case("dq_rs", qtype, n, k, t, dispatcher=_forced(nb=nb))


def _forced(nb: int | None = None, blocks: int | None = None) -> Dispatcher:
    """The default tables with dq_rs's token tile and block count forced (None: its rules
    decide); the compiled modules are shared with the default dispatcher."""
    return DEFAULT.with_tuning(dq_rs=DqRsTuning(nb=nb, blocks=blocks))


def _dq_rs_weight(qtype: QType, n: int, k: int, t: int, d: Dispatcher = DEFAULT) -> tuple[Any, Any]:
    """The case's packed weight and the oracle's weight; a skip where dq_rs does not serve."""
    if d.select(Problem(qtype, Policy.A16, n, k, t, device_cc())).name != "dq_rs":
        pytest.skip(f"dq_rs does not serve T={t} on sm_{device_cc()}")
    w, w64 = packed_case(qtype, n, k, seed_for("w", qtype.name, n, k))
    return w, oracle_weight(w, t, w64, dispatcher=d)


@pytest.mark.parametrize(("k", "offset"), [(1152, 1), (1001, 0)], ids=["x_base_+2B", "K_1001"])
@pytest.mark.parametrize("qtype", [QType.Q4, QType.NVFP4, QType.BF16], ids=lambda q: q.name)
def test_dq_rs_x_not_tma_aligned(qtype: QType, k: int, offset: int) -> None:
    """x whose base is not 16-byte aligned, or whose rows are not whole 16 bytes (K = 1001),
    goes through the workspace copy; the result must not depend on it."""
    import ml_dtypes

    n, t = 14352, 130
    w, w_ref = _dq_rs_weight(qtype, n, k, t)
    seed = seed_for("dq_rs_x", qtype.name, k, offset)
    xh = random_x(np.random.default_rng(seed), t, k)
    x = x_at(t, k, offset)
    x[...] = to_bf16_device(xh)
    assert (x.data.ptr % 16 != 0) == (offset != 0)
    out = nan_like_out(t, n)
    linear(x, w, out, workspace=workspace_for(w, t))
    label = f"dq_rs {qtype.name} [{n},{k}] T={t} x offset {2 * offset} B"
    check_against_oracle(out, xh.astype(ml_dtypes.bfloat16), w_ref, label, qtype.name, seed)


_GUARD = 4096  # elements of sentinel on each side of an out placed in a larger buffer


@pytest.mark.parametrize(
    ("n", "offset"),
    [(14352, 8), (14352, 1), (14350, 0)],
    ids=["out_base_+16B", "out_base_+2B", "N_14350"],
)
@pytest.mark.parametrize("blocks", [None, 50], ids=["host_blocks", "split_50"])
@pytest.mark.parametrize("nb", [1, 2])
@pytest.mark.parametrize("qtype", [QType.Q4, QType.W8, QType.BF16], ids=lambda q: q.name)
def test_dq_rs_out_stores(
    qtype: QType,
    nb: int,
    blocks: int | None,
    n: int,
    offset: int,
) -> None:
    """out is stored by TMA where its base and rows are whole 16 bytes (+16 B), else by the
    consumers' own stores (+2 B, N = 14350): every element written, none around it (a
    partial last row tile and token tile, both token tiles; whole tiles on the host's
    113 blocks, and on 50 blocks split tiles, stored by the last block of each)."""
    import cupy as cp
    import ml_dtypes

    k, t = 640, 200
    d = _forced(nb, blocks)
    w, w_ref = _dq_rs_weight(qtype, n, k, t, d)
    seed = seed_for("dq_rs_out", qtype.name, n, offset, nb)
    xh = random_x(np.random.default_rng(seed), t, k)
    sentinel = 0x7FC1  # a NaN the kernel never writes
    buf = cp.full(_GUARD + offset + t * n + _GUARD, sentinel, dtype=cp.uint16)
    out = buf[_GUARD + offset : _GUARD + offset + t * n].reshape(t, n).view(ml_dtypes.bfloat16)
    assert (out.data.ptr % 16 == 0) == (offset % 8 == 0)
    x, ws = to_bf16_device(xh), workspace_for(w, t, dispatcher=d)
    d.linear(x, w, out, workspace=ws)
    tma = offset % 8 == 0 and n % 8 == 0
    bound = d.plan(w, t).bind(x.data.ptr, out.data.ptr, ws.data.ptr)
    assert bound.params.otma == tma, "the store path is not the one this case is for"
    label = f"dq_rs {qtype.name} [{n},{k}] T={t} NB={nb} blocks={blocks} out offset {2 * offset} B"
    check_against_oracle(out, xh.astype(ml_dtypes.bfloat16), w_ref, label, qtype.name, seed)
    host = cp.asnumpy(buf)
    around = np.concatenate([host[: _GUARD + offset], host[_GUARD + offset + t * n :]])
    assert np.all(around == sentinel), f"{label}: elements around out were written"


@pytest.mark.parametrize("offset", [0, 1], ids=["aligned_x", "x_base_+2B"])
@pytest.mark.parametrize("qtype", QTYPES, ids=lambda q: q.name)
def test_dq_rs_graph_capture_then_replay_with_new_inputs(qtype: QType, offset: int) -> None:
    """A captured dq_rs call (its x tensor map travels in the kernel node; an unaligned x
    adds the workspace copy to the graph) replays on new x values in the same buffers."""
    import cupy as cp
    import ml_dtypes

    n, k, t = 14352, 640, 200
    w, w_ref = _dq_rs_weight(qtype, n, k, t)
    seed = seed_for("dq_rs_graph", qtype.name, offset)
    x = x_at(t, k, offset)
    x[...] = to_bf16_device(random_x(np.random.default_rng(seed), t, k))
    stream = cp.cuda.Stream(non_blocking=True)
    out = nan_like_out(t, n)
    ws = workspace_for(w, t)
    cp.cuda.Device().synchronize()
    linear(x, w, out, workspace=ws, stream=stream)  # compiles and plans outside the capture
    stream.synchronize()
    stream.begin_capture()
    linear(x, w, out, workspace=ws, stream=stream)
    graph = stream.end_capture()
    xh2 = random_x(np.random.default_rng(seed + 1), t, k)
    x[...] = to_bf16_device(xh2)
    out[...] = nan_like_out(t, n)
    cp.cuda.Device().synchronize()  # the writes above ran on the legacy stream
    graph.launch(stream)
    stream.synchronize()
    label = f"dq_rs graph {qtype.name} [{n},{k}] T={t} x offset {2 * offset} B"
    check_against_oracle(out, xh2.astype(ml_dtypes.bfloat16), w_ref, label, qtype.name, seed)


def _all_dq_rs(nb: int | None = None, blocks: int | None = None) -> Dispatcher:
    """A dispatcher that sends every T >= 65 to dq_rs on this device (``nb``, ``blocks``
    forced as in ``_forced``); a skip where its table has no dq_rs (dq_rs is sm_90a code:
    another architecture must not be handed it)."""
    cc = device_cc()
    if not any(r.name == "dq_rs" for r in DEFAULT.table_for(cc)):
        pytest.skip(f"dq_rs is not in sm_{cc}'s route table")
    key = max(c for c in DEFAULT.tables if c <= cc)
    tables = {**DEFAULT.tables, key: (Route("dec_q", 1, 64), Route("dq_rs", 65, None))}
    return _forced(nb, blocks).with_tables(tables)


# (N, K, blocks, NB): the persistent grid's runs cut tiles in every way it can.
SPLITS = [
    # the host's choice: 9 tiles x 34 pairs over 76 blocks, runs of ~4 pairs, up to 9
    # blocks per tile
    (1152, 4304, None, None),
    # 7 blocks: runs over several tiles, a partial first and last tile, whole ones between
    (1152, 4304, 7, None),
    # 9 pairs per tile (odd: runs start on any pair, the unused ring slots are passed),
    # 256-token tiles
    (1152, 1152, 5, 2),
    # one block through all 9 tiles: the ring runs on across tiles, nothing split
    (1152, 1152, 1, None),
    # 113 row tiles (226 at T = 200) x 5 pairs over 50 blocks: runs of 11-12 pairs over
    # 3-4 tiles (22-23 over 5-6)
    (14352, 640, 50, 1),
]


@pytest.mark.parametrize(("n", "k", "blocks", "nb"), SPLITS, ids=lambda v: str(v))
@pytest.mark.parametrize("t", [65, 200])
@pytest.mark.parametrize("qtype", QTYPES, ids=lambda q: q.name)
def test_dq_rs_persistent_runs(
    qtype: QType,
    t: int,
    n: int,
    k: int,
    blocks: int | None,
    nb: int | None,
) -> None:
    """Tiles shared by several blocks (the partials summed by the last to finish) and
    blocks that take several tiles, with even and odd pairs per tile and both tiles."""
    run_case("dq_rs", qtype, n, k, t, dispatcher=_all_dq_rs(nb, blocks))


def test_dq_rs_split_tiles_are_bitwise_repeatable() -> None:
    """Whichever block finishes a tile last, its partials are added in the same order."""
    import cupy as cp

    n, k, t = 1152, 4304, 200
    d = _all_dq_rs(blocks=31)
    w, _ = packed_case(QType.Q4, n, k, seed_for("w", "Q4", n, k))
    x = to_bf16_device(random_x(np.random.default_rng(5), t, k))
    ws = workspace_for(w, t, dispatcher=d)
    outs = []
    for _ in range(5):
        out = nan_like_out(t, n)
        d.linear(x, w, out, workspace=ws)
        outs.append(out.view(cp.uint16).get())
    # A run that wrote nothing would leave the same NaN bits each time.
    first = (outs[0].astype(np.uint32) << 16).view(np.float32)
    assert np.isfinite(first).all(), "dq_rs left output elements unwritten (NaN)"
    assert all(np.array_equal(outs[0], o) for o in outs[1:])


@pytest.mark.parametrize(
    ("n", "k", "t", "blocks"),
    [(14352, 640, 640, None), (1152, 4304, 256, 13)],
    ids=["every_weight", "split_tiles"],
)
@pytest.mark.parametrize("qtype", QTYPES, ids=lambda q: q.name)
def test_dq_rs_decodes_each_weight_exactly(
    qtype: QType, n: int, k: int, t: int, blocks: int | None
) -> None:
    """The decode bit for bit. x is one-hot on purpose (token i is 1.0 at column k_i, 0
    elsewhere): out[i, n] is then W[n, k_i] times 1, a sum of one exact product, so it
    must equal the oracle's weight rounded as the route rounds it (FP32, then BF16: the
    FP32 step is exact for every format but NVFP4, whose tensor scale the kernel applies
    in FP32), while a tolerance test would let a one-step decode error through. On
    [14352,640] x is the identity (every weight of the matrix); on [1152,4304] 256 random
    columns, each tile's sum split over blocks (13 blocks, runs of ~24 pairs). Zeros
    compare equal whatever their sign."""

    d = _all_dq_rs(blocks=blocks)
    w, w64 = packed_case(qtype, n, k, seed_for("w", qtype.name, n, k))
    _check_one_hot(w, w64, t, f"dq_rs {qtype.name} [{n},{k}]", d)


def _check_one_hot(w: Any, w64: Any, t: int, label: str, d: Dispatcher) -> None:
    """Run one-hot x through dq_rs (t == K: the identity; else t random columns) and
    require every output to be its decoded weight, rounded as the route rounds it."""
    import cupy as cp
    import ml_dtypes

    k = w.k
    rng = np.random.default_rng(seed_for("dq_rs_one_hot", label))
    cols = np.arange(k) if t == k else rng.choice(k, t, replace=False)
    xh = np.zeros((t, k))
    xh[np.arange(t), cols] = 1.0
    out = nan_like_out(t, w.n)
    d.linear(to_bf16_device(xh), w, out, workspace=workspace_for(w, t, dispatcher=d))
    got = (out.view(cp.uint16).get().astype(np.uint32) << 16).view(np.float32)
    want = w64.get()[:, cols].T.astype(np.float32).astype(ml_dtypes.bfloat16).astype(np.float32)
    bad = got != want
    if bad.any():
        i, r = np.argwhere(bad)[0]
        pytest.fail(
            f"{label}: {int(bad.sum())} of {bad.size} weights differ; "
            f"first W[{r},{cols[i]}]: got {got[i, r]!r}, expected {want[i, r]!r}"
        )


@pytest.mark.parametrize("qtype", [q for q in QTYPES if q is not QType.BF16], ids=lambda q: q.name)
def test_dq_rs_decodes_subnormal_scales_exactly(qtype: QType) -> None:
    """Groups 10^0 ... 10^-7 apart, so that the packed scales include subnormals (FP16
    below 2^-14; E4M3 with a zero exponent field), which the decode must not flush:
    kernels compile with -ftz=true (CuPy), so an FP32 subnormal on the way would become 0.
    Every weight of [1152,640] through one-hot x, compared bit for bit."""
    import cupy as cp

    n, k = 1152, 640
    d = _all_dq_rs()
    rng = np.random.default_rng(seed_for("dq_rs_subnormal", qtype.name))
    spread = 10.0 ** -rng.integers(0, 8, size=(n, k // 16)).repeat(16, axis=1)
    host = pack(rng.standard_normal((n, k)) * spread, qtype)
    sc = np.asarray(host.planes["scales"])
    if qtype is QType.NVFP4:
        b = sc.view(np.uint8)
        subnormal = ((b & 0x78) == 0) & ((b & 0x07) != 0)
    else:
        f = sc.view(np.float16).astype(np.float64)
        subnormal = (f != 0) & (np.abs(f) < 2.0**-14)
    assert subnormal.any(), "the case must hold subnormal scales"
    w = host.to_device()
    _check_one_hot(w, cp.asarray(host.decode()), k, f"dq_rs {qtype.name} [{n},{k}] small scales", d)
