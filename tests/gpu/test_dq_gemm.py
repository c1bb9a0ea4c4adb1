"""Conformance of the dq_gemm route (kernels/dq_gemm.cu + cuBLAS) through the public op, every
format, the T it owns (the oracle rounds the weights the route rounds: cases.oracle_weight)."""

from __future__ import annotations

import pytest

from ninfer import Policy, QType
from ninfer.ops.dispatch import DEFAULT
from ninfer.routes import Problem, dq_gemm

from .cases import QTYPES, SHAPES, owned_t, run_case


@pytest.mark.parametrize("t", owned_t("dq_gemm"))
@pytest.mark.parametrize(("n", "k"), SHAPES, ids=lambda v: str(v))
@pytest.mark.parametrize("qtype", QTYPES, ids=lambda q: q.name)
def test_dq_gemm(qtype: QType, n: int, k: int, t: int) -> None:
    run_case("dq_gemm", qtype, n, k, t)


@pytest.mark.parametrize("t", [65, 300])
@pytest.mark.parametrize("qtype", QTYPES, ids=lambda q: q.name)
def test_dq_gemm_many_bands(qtype: QType, t: int) -> None:
    """1 MiB bands: [4304,1152] is decoded in 9 bands of 512 rows (the last one partial),
    so both workspace slots are reused and the event ordering between the side stream
    and the caller's stream decides the result. (The suite's shapes fit one band.)"""
    n, k = 4304, 1152
    tuning = dq_gemm.DqGemmTuning(band_bytes=1 << 20)
    assert dq_gemm.band_rows(Problem(qtype, Policy.A16, n, k, t, 90), tuning) == 512
    run_case("dq_gemm", qtype, n, k, t, dispatcher=DEFAULT.with_tuning(dq_gemm=tuning))
