"""Launcher of kernels/mma_q.cu: 64x64x64 tiles, mma.sync BF16 -> FP32."""

from __future__ import annotations

from .problem import QTYPE_ID, Problem

NAME = "mma_q"
BLOCK = 128
BM = BN = 64


def instance(p: Problem) -> str:
    return f"mma_q<{QTYPE_ID[p.qtype]}>"


INSTANCES: tuple[str, ...] = tuple(f"mma_q<{q}>" for q in sorted(QTYPE_ID.values()))


def block(p: Problem) -> tuple[int, int, int]:
    return (BLOCK, 1, 1)


def grid(p: Problem) -> tuple[int, int, int]:
    return ((p.n + BM - 1) // BM, (p.t + BN - 1) // BN, 1)


def shared_bytes(p: Problem) -> int:
    return 0


def workspace_bytes(p: Problem) -> int:
    return 0
