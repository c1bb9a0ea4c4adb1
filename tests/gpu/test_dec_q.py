"""Conformance of kernels/dec_q.cu through the public op, every format, the T it owns."""

from __future__ import annotations

from typing import Any

import pytest

from ninfer import QType

from .cases import QTYPES, SHAPES, owned_t, run_case, variant_tuning


@pytest.mark.parametrize("t", owned_t("dec_q"))
@pytest.mark.parametrize(("n", "k"), SHAPES, ids=lambda v: str(v))
@pytest.mark.parametrize("qtype", QTYPES, ids=lambda q: q.name)
def test_dec_q(qtype: QType, n: int, k: int, t: int) -> None:
    run_case("dec_q", qtype, n, k, t)


TUNING = variant_tuning("dec_q")  # the shipped rows, or an experiment variant's


def _tile_rows() -> list[tuple[QType, int, int, Any]]:
    # Each tile row at the lowest and highest T that select it, at an N that does (the
    # 27B heads' rows above every conformance SHAPE, the n_max rows just under their bound);
    # a row nothing selects gets N = 0 and fails below.
    return [
        (q, n, t, tl)
        for q in QTYPES
        for tl, points in TUNING.row_points(q).items()
        for t, n in points or [(tl.t_max, 0)]
    ]


@pytest.mark.parametrize(("qtype", "n", "t", "row"), _tile_rows(), ids=str)
def test_dec_q_each_tile_row(qtype: QType, n: int, t: int, row: Any) -> None:
    """Every row of dec_q's tiles (NINFER_CONFORMANCE_VARIANT: an experiment variant's,
    tests/gpu/cases.py::variant_tuning) against the oracle."""
    from ninfer.bench.override import dispatcher_for
    from ninfer.routes import dec_q

    assert TUNING.tile(qtype, t, n) == row  # the case runs the row it is named for
    d = dispatcher_for({"force": "dec_q"}).with_tuning(**{dec_q.NAME: TUNING})
    run_case("dec_q", qtype, n, 640, t, dispatcher=d)
