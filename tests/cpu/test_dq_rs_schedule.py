"""dq_rs's persistent grid on the host side (routes/dq_rs.py; RsSched in kernels/dq_rs.cu)."""

from __future__ import annotations

import bisect
import itertools
import re

import pytest

from ninfer import Policy, QType
from ninfer.routes import Problem, dq_rs
from ninfer.runtime.sources import assembled_source

SHAPES = [(14336, 5120), (16384, 5120), (34816, 5120), (6144, 5120), (5120, 17408),
          (248320, 2048), (1152, 1152), (4616, 10248), (14352, 640)]  # fmt: skip


def _owner(i: int, units: int, n_blocks: int, unit: int) -> int:
    """RsSched::owner, as the kernel computes it."""
    return ((i // unit + 1) * n_blocks + units - 1) // units - 1


@pytest.mark.parametrize("sms", [132, 114, 144])
@pytest.mark.parametrize("t", [65, 128, 200, 256, 512, 768, 1024])
@pytest.mark.parametrize(("n", "k"), SHAPES, ids=str)
def test_runs_cover_every_pair_once_and_owners_agree(n: int, k: int, t: int, sms: int) -> None:
    p = Problem(QType.Q4, Policy.A16, n, k, t, 90)
    nb = dq_rs.choose_nb(p)
    kpad = -(-k // 128) * 128
    pairs, n_tiles = kpad // 128, dq_rs.tiles(p, nb)
    g = dq_rs.blocks(p, nb, sms, kpad)
    unit = dq_rs.sched_unit(kpad)
    units = n_tiles * pairs // unit
    assert 1 <= g <= min(sms, dq_rs.BLOCKS_MAX, units)
    starts = dq_rs.run_starts(n_tiles, kpad, g)
    assert starts[0] == 0 and all(a < b for a, b in itertools.pairwise(starts))
    assert all(s % unit == 0 for s in starts)  # runs of whole ring laps
    # The block that sums a split tile finds its contributors through owner(): the block
    # whose run holds the tile's first and last pair.
    for tile in range(n_tiles):
        for i in (tile * pairs, tile * pairs + pairs - 1):
            assert _owner(i, units, g, unit) == bisect.bisect_right(starts, i) - 1


@pytest.mark.parametrize(("n", "k", "t"), [(14336, 5120, 128), (16384, 5120, 1024)])
def test_whole_tile_grid_cuts_no_tile(n: int, k: int, t: int) -> None:
    # Shapes whose tiles fill the SMs well take whole tiles per block: no partials, no
    # counters (and the block count divides the tiles).
    p = Problem(QType.Q4, Policy.A16, n, k, t, 90)
    nb = dq_rs.choose_nb(p)
    kpad = -(-k // 128) * 128
    n_tiles = dq_rs.tiles(p, nb)
    g = dq_rs.blocks(p, nb, 132, kpad)
    assert n_tiles % g == 0
    assert all(s % (kpad // 128) == 0 for s in dq_rs.run_starts(n_tiles, kpad, g))


def test_workspace_holds_two_partials_per_block() -> None:
    p = Problem(QType.Q4, Policy.A16, 6144, 5120, 256, 90)
    part = 2 * dq_rs.BLOCKS_MAX * 16 * dq_rs.choose_nb(p) * 256 * 16
    assert dq_rs.workspace_bytes(p) >= part + 4 * dq_rs.tiles(p, dq_rs.choose_nb(p))


def test_band_bytes_match_the_kernel() -> None:
    """routes/dq_rs.py's BAND (ring depth, TMA boxes, byte counts) is RsBand<QT> of the
    kernel: the launcher's boxes and the kernel's expected bytes must agree, and both are
    edited by hand."""
    src = assembled_source("dq_rs")
    found = {
        m.group(1): tuple(int(m.group(i)) for i in (2, 3, 4))
        for m in re.finditer(
            r"struct RsBand<QT_(\w+)> \{ static constexpr int CODES = (\d+), QH = (\d+), SC = (\d+); \};",
            src,
        )
    }
    assert found == {q.name: b for q, b in dq_rs.BAND.items()}


SPLIT_GAINS = [(5120, 6144, 256), (4608, 4608, 128), (5120, 6144, 1024)]


@pytest.mark.parametrize(("n", "k", "t"), SPLIT_GAINS)
def test_split_grid_takes_fewer_tiles_per_run_where_it_pays(n: int, k: int, t: int) -> None:
    # [5120,6144] T=256: 40 tiles of 48 pairs on 132 blocks cut runs across two tiles;
    # 120 blocks run a third of one tile each (measured 46.7 -> 41.1 us on the H200).
    p = Problem(QType.Q4, Policy.A16, n, k, t, 90)
    nb = dq_rs.choose_nb(p)
    kpad = -(-k // 128) * 128
    n_tiles, pairs = dq_rs.tiles(p, nb), kpad // 128
    most = min(132, n_tiles * pairs // dq_rs.MIN_PAIRS)
    g = dq_rs.blocks(p, nb, 132, kpad)
    assert g < most
    gain = 1 - dq_rs.SEG_GAIN
    assert dq_rs.run_cost(n_tiles, kpad, g) <= dq_rs.run_cost(n_tiles, kpad, most) * gain
    if t <= 256:  # whole fractions of a tile: every run inside one tile
        starts = [*dq_rs.run_starts(n_tiles, kpad, g), n_tiles * pairs]
        assert all((e - 1) // pairs == s // pairs for s, e in itertools.pairwise(starts))


# The counts measured with forced block counts
# (docs/perf/prefill_h200/dq_rs_blocks_segments.txt@8fe804d).
PINNED = [
    (5120, 6144, 128, 120), (5120, 6144, 256, 120), (5120, 6144, 512, 132),
    (5120, 6144, 1024, 128), (6144, 5120, 256, 132), (6144, 5120, 1024, 128),
    (4608, 4608, 128, 108), (4608, 4608, 256, 108), (5120, 17408, 256, 120),
    (10240, 5120, 512, 128), (14336, 5120, 1024, 132), (34816, 5120, 512, 132),
]  # fmt: skip


@pytest.mark.parametrize(("n", "k", "t", "blocks"), PINNED)
def test_split_grid_block_counts(n: int, k: int, t: int, blocks: int) -> None:
    p = Problem(QType.Q4, Policy.A16, n, k, t, 90)
    assert dq_rs.blocks(p, dq_rs.choose_nb(p), 132, -(-k // 128) * 128) == blocks


@pytest.mark.parametrize("t", [128, 256, 512, 768, 1024])
@pytest.mark.parametrize(("n", "k"), SHAPES, ids=str)
def test_split_blocks_never_costs_more_than_the_most_blocks(n: int, k: int, t: int) -> None:
    p = Problem(QType.Q4, Policy.A16, n, k, t, 90)
    kpad = -(-k // 128) * 128
    n_tiles = dq_rs.tiles(p, dq_rs.choose_nb(p))
    most = max(1, min(132, n_tiles * (kpad // 128) // dq_rs.MIN_PAIRS))
    g = dq_rs.split_blocks(n_tiles, kpad, most)
    assert g == most or most // 2 < g < most
    assert dq_rs.run_cost(n_tiles, kpad, g) <= dq_rs.run_cost(n_tiles, kpad, most)
