"""Conformance of kernels/dec_q.cu through the public op, every format, the T it owns."""

from __future__ import annotations

from typing import Any

import pytest

from ninfer import QType

from .cases import QTYPES, SHAPES, owned_t, run_case


@pytest.mark.parametrize("t", owned_t("dec_q"))
@pytest.mark.parametrize(("n", "k"), SHAPES, ids=lambda v: str(v))
@pytest.mark.parametrize("qtype", QTYPES, ids=lambda q: q.name)
def test_dec_q(qtype: QType, n: int, k: int, t: int) -> None:
    run_case("dec_q", qtype, n, k, t)


def _tile_rows() -> list[tuple[QType, int, int, Any]]:
    # Each tile row at the top and bottom of its T range, at an N it serves: the rows with
    # n_min (the 27B heads' tiles) lie above every conformance SHAPE, those with n_max run
    # just under their bound.
    from ninfer.routes import dec_q

    out = []
    for q in QTYPES:
        lo = 1
        for tl in dec_q.TILES[q]:
            # a partial band of 16 rows and of the block
            n = tl.n_max - 8 if tl.n_max else max(tl.n_min, 4616) + 40
            out += [(q, n, t, tl) for t in sorted({lo, tl.t_max})]
            if not (tl.n_min or tl.n_max):
                lo = tl.t_max + 1
    return out


@pytest.mark.parametrize(("qtype", "n", "t", "row"), _tile_rows(), ids=str)
def test_dec_q_each_tile_row(qtype: QType, n: int, t: int, row: Any) -> None:
    from ninfer.bench.override import dispatcher_for
    from ninfer.routes import dec_q

    assert dec_q.tile(qtype, t, n) == row  # the case runs the row it is named for
    run_case("dec_q", qtype, n, 640, t, dispatcher=dispatcher_for({"force": "dec_q"}))
