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
        tok = dq_mma.choose_tokens(Problem(qtype, Policy.A16, 4096, 4096, t, 120))
        assert dq_mma.shared_bytes(qtype, tok) <= 99 * 1024, (qtype, t, tok)
        s = dq_mma.stages(qtype, tok)
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
