"""dq_mma's host side (routes/dq_mma.py): the tile per T, the ring within the users' shared
memory, the K split and the workspace it needs."""

from __future__ import annotations

import pytest

from ninfer import Policy, QType
from ninfer.routes import Problem, dq_mma

SHAPES = [(264, 640), (5120, 17408), (14336, 5120), (131072, 5120), (4304, 1152)]


@pytest.mark.parametrize("qtype", list(QType), ids=lambda q: q.name)
def test_every_instance_fits_the_rtx_5090s_shared_memory(qtype: QType) -> None:
    # sm_86/89/120 allow 99 KiB of dynamic shared memory per block: what the H200 measures
    # must launch unchanged on the users' GPU.
    for t in (1, 32, 33, 64, 65, 1024):
        p = Problem(qtype, Policy.A16, 4096, 4096, t, 120)
        tok = dq_mma.choose_tokens(p)
        assert dq_mma.shared_bytes(p, tok) <= 99 * 1024, (qtype, t, tok)
        s = dq_mma.stages(p, tok)
        assert s is not None and s >= 3, (qtype, tok, s)


@pytest.mark.parametrize("t", [1, 17, 32, 33, 64, 65, 200, 1024])
def test_token_tile_by_t(t: int) -> None:
    p = Problem(QType.Q4, Policy.A16, 14336, 5120, t, 120)
    assert dq_mma.choose_tokens(p) == (32 if t <= dq_mma.TOK32_MAX else 64)
    assert dq_mma.tiles(p, dq_mma.choose_tokens(p)) == 112 * -(-t // dq_mma.choose_tokens(p))


@pytest.mark.parametrize(("n", "k"), SHAPES, ids=lambda v: str(v))
@pytest.mark.parametrize("sms", [1, 46, 132, 170, 192, 300])
def test_splits_fill_the_sms_and_fit_the_workspace(n: int, k: int, sms: int) -> None:
    """Whole tiles where they fill the SMs; else about SPLIT_WAVES blocks per SM, each
    split MIN_SPLIT_STAGES stages of 64 k at least; the workspace query (which does not
    know the device) holds every GPU's partials."""
    for t in (1, 33, 64, 128):
        p = Problem(QType.W8, Policy.A16, n, k, t, 120)
        tok = dq_mma.choose_tokens(p)
        kpad = -(-k // 128) * 128
        tiles = dq_mma.tiles(p, tok)
        z = dq_mma.splits(p, tok, sms, kpad)
        assert 1 <= z <= max(1, kpad // 64 // dq_mma.MIN_SPLIT_STAGES)
        if tiles >= min(sms, dq_mma.SMS_MAX):
            assert z == 1
        else:
            assert tiles * z <= min(sms, dq_mma.SMS_MAX) * dq_mma.SPLIT_WAVES + tiles
        partials = 0 if z == 1 else tiles * z * dq_mma.ROWS * tok * 4
        x_copy, counters = t * -(-k // 8) * 8 * 2, 4 * tiles
        assert dq_mma.workspace_bytes(p) >= x_copy + counters + partials, (n, k, t, sms, z)


def test_forced_choices_are_checked() -> None:
    p = Problem(QType.Q4, Policy.A16, 4096, 4096, 64, 120)
    assert dq_mma.choose_tokens(p, dq_mma.DqMmaTuning(tokens=32)) == 32
    with pytest.raises(ValueError, match="tokens: expected one of"):
        dq_mma.choose_tokens(p, dq_mma.DqMmaTuning(tokens=48))
    assert dq_mma.splits(p, 64, 132, 4096, dq_mma.DqMmaTuning(splits=1000)) == 4096 // 64


@pytest.mark.parametrize("qtype", list(QType), ids=lambda q: q.name)
@pytest.mark.parametrize("cc", [80, 86, 90, 120, 999])
def test_ring_depth_keeps_two_blocks_an_sm(qtype: QType, cc: int) -> None:
    """The deepest ring of which two blocks fit the GPU's SM (an unknown GPU: the least
    shared memory of the table), else the deepest that fits a block; the emulated 5090
    picks what an sm_120 picks."""
    sm = dq_mma.SHARED_PER_SM.get(cc, min(dq_mma.SHARED_PER_SM.values()))
    for tok in dq_mma.TILES:
        p = Problem(qtype, Policy.A16, 4096, 4096, tok, cc)
        s = dq_mma.stages(p, tok)
        assert s is not None
        fits = [
            d for d in dq_mma.STAGE_DEPTHS if d * dq_mma.slot_bytes(qtype, tok) <= dq_mma.SHARED_MAX
        ]
        two = [d for d in fits if 2 * (dq_mma.ring_bytes(qtype, tok, d) + 1024) <= sm]
        assert s == max(two or fits), (qtype, cc, tok, s)
        emulated = dq_mma.DqMmaTuning(shared_per_sm=dq_mma.SHARED_PER_SM_5090)
        p90 = Problem(qtype, Policy.A16, 4096, 4096, tok, 90)
        assert dq_mma.stages(p90, tok, emulated) == dq_mma.stages(
            Problem(qtype, Policy.A16, 4096, 4096, tok, 120), tok
        )
    # the measured cases (routes/dq_mma.py): Q4's 64-token tile is 4 deep on the H200, 3
    # deep on the RTX 5090
    q4 = Problem(QType.Q4, Policy.A16, 4096, 4096, 64, 90)
    assert dq_mma.stages(q4, 64) == 4
    assert dq_mma.stages(Problem(QType.Q4, Policy.A16, 4096, 4096, 64, 120), 64) == 3


def test_forced_stages_are_checked() -> None:
    p = Problem(QType.Q4, Policy.A16, 4096, 4096, 64, 90)
    assert dq_mma.stages(p, 64, dq_mma.DqMmaTuning(stages=3)) == 3
    with pytest.raises(ValueError, match="stages: expected one of"):
        dq_mma.stages(p, 64, dq_mma.DqMmaTuning(stages=5))


@pytest.mark.parametrize("qtype", list(QType), ids=lambda q: q.name)
@pytest.mark.parametrize("cc", [80, 90, 120])
def test_every_chosen_instance_is_compiled(qtype: QType, cc: int) -> None:
    """Whatever the GPU or the tuning picks, the plan's instance is one the module
    compiles (a forced ring that does not fit falls back to the 32-token tile)."""
    compiled = set(dq_mma.instances())
    for tokens in (None, *dq_mma.TILES):
        for ring in (None, *dq_mma.STAGE_DEPTHS):
            for per_sm in (None, dq_mma.SHARED_PER_SM_5090):
                tn = dq_mma.DqMmaTuning(tokens=tokens, stages=ring, shared_per_sm=per_sm)
                for t in (1, 33, 65, 1024):
                    p = Problem(qtype, Policy.A16, 4096, 4096, t, cc)
                    assert dq_mma.LAUNCHER.instance(p, tn) in compiled, (tokens, ring, t)
