"""Launcher of kernels/gemv_q.cu: one warp per output row, TT tokens per block column."""

from __future__ import annotations

from .problem import QTYPE_ID, Problem

NAME = "gemv_q"
BLOCK = 128
ROWS_PER_BLOCK = BLOCK // 32
TILES = (1, 2, 4)  # TT instances: a token tile reuses each decoded weight chunk TT times


def token_tile(t: int) -> int:
    return next((tt for tt in TILES if tt >= t), TILES[-1])


def instance(p: Problem) -> str:
    return f"gemv_q<{QTYPE_ID[p.qtype]}, {token_tile(p.t)}>"


INSTANCES: tuple[str, ...] = tuple(
    f"gemv_q<{q}, {tt}>" for q in sorted(QTYPE_ID.values()) for tt in TILES
)


def grid(p: Problem) -> tuple[int, int, int]:
    tt = token_tile(p.t)
    return ((p.n + ROWS_PER_BLOCK - 1) // ROWS_PER_BLOCK, (p.t + tt - 1) // tt, 1)


def workspace_bytes(p: Problem) -> int:
    return 0
