"""Conformance of kernels/dec_q.cu through the public op, every format, the T it owns."""

from __future__ import annotations

import pytest

from ninfer import QType

from .cases import QTYPES, SHAPES, owned_t, run_case


@pytest.mark.parametrize("t", owned_t("dec_q"))
@pytest.mark.parametrize(("n", "k"), SHAPES, ids=lambda v: str(v))
@pytest.mark.parametrize("qtype", QTYPES, ids=lambda q: q.name)
def test_dec_q(qtype: QType, n: int, k: int, t: int) -> None:
    run_case("dec_q", qtype, n, k, t)
