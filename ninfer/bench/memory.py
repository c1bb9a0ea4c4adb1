"""Where a run's device memory comes from: one arena, laid out the same way every time.

``arena`` (the default): every weight, activation, output, the L2-flush buffer and one
shared workspace are placed at fixed offsets of two ``cudaMalloc`` blocks made at the
start of a round, in suite order, whatever order the points are then measured in. Each
buffer starts on a 2 MiB boundary, the GPU's large-page size, so no two buffers share a
page and a buffer's offset inside its pages is the same in every round and process. The
point measured first and the point measured last see the same layout, and no point's
weight lands in memory a previous point's larger weight freed (the old per-group pool
did that: its placement depended on what ran before). Measured beside the pool, the
layout turned out not to be what moved the suite's points (docs/regress.md: the card's
power state after heavy points was); the arena takes it out as a variable all the same.

``pool``: the old way, kept to measure the difference: the CuPy pool, one weight group
at a time in suite order, freed before the next, a workspace per point.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..formats.layout import PLANES
from ..formats.packed import PackedWeight
from ..formats.qtype import QType, k_padded
from ..ops import linear_workspace_bytes
from ..policy import Policy
from .fixture import random_activations, random_device_weight
from .points import BenchPoint, GroupKey, group_points

ALIGN = 2 << 20


def _up(n: int) -> int:
    return (n + ALIGN - 1) // ALIGN * ALIGN


def weight_seed(n: int, k: int) -> int:
    # The same random weight for a shape in every round, process and tool (asv too).
    return hash((n, k)) & 0xFFFF


@dataclass
class Group:
    weight: PackedWeight
    x: Any  # (T_max, K) bfloat16
    out: Any  # (T_max, N) bfloat16


@dataclass
class RunMemory:
    """The buffers of one round. ``workspace_for`` gives a point's workspace."""

    mode: str
    flush: Any
    groups: dict[GroupKey, Group] = field(default_factory=dict)
    workspace: Any = None
    _blocks: list[Any] = field(default_factory=list)

    def workspace_for(self, w: PackedWeight, t: int, policy: Policy) -> Any:
        import cupy as cp

        need = linear_workspace_bytes(w, t, policy)
        if not need:
            return None
        if self.mode == "pool":
            return cp.empty(need, cp.uint8)
        return self.workspace[:need]

    def placement(self, g: GroupKey) -> dict[str, int]:
        """Where a group's buffers are (device addresses; offsets into the arena)."""
        grp = self.groups[g]
        base = int(self._blocks[0].ptr) if self._blocks else 0
        out = {name: int(a.data.ptr) - base for name, a in grp.weight.planes.items()}
        out["x"] = int(grp.x.data.ptr) - base
        return out

    def free(self) -> None:
        import cupy as cp

        self.groups.clear()
        self.workspace = self.flush = None
        self._blocks.clear()
        cp.get_default_memory_pool().free_all_blocks()


def _plane_bytes(q: QType, n: int, k: int) -> list[tuple[str, tuple[int, int], Any]]:
    return [(p.name, p.shape(n, k_padded(k)), p.dtype) for p in PLANES[q]]


def _build_group(g: GroupKey, tmax: int) -> Group:
    import cupy as cp

    q, _, n, k = g
    w = random_device_weight(q, n, k, seed=weight_seed(n, k))
    x = random_activations(tmax, k)
    return Group(w, x, cp.empty((tmax, n), dtype=x.dtype))


def arena(points: Sequence[BenchPoint], flush_mib: int) -> RunMemory:
    """Every buffer of ``points`` at fixed 2 MiB-aligned offsets of one allocation."""
    import cupy as cp
    import ml_dtypes

    groups = group_points(points)
    slots: list[tuple[Any, str, tuple[int, ...], Any]] = [
        (None, "flush", (max(flush_mib, 1) << 20,), cp.uint8)
    ]
    for g, pts in groups.items():
        q, _, n, k = g
        tmax = max(p.t for p in pts)
        slots += [(g, name, shape, dtype) for name, shape, dtype in _plane_bytes(q, n, k)]
        slots += [
            (g, "x", (tmax, k), ml_dtypes.bfloat16),
            (g, "out", (tmax, n), ml_dtypes.bfloat16),
        ]
    sizes = [_up(int(cp.dtype(d).itemsize) * math.prod(s)) for _, _, s, d in slots]
    block = cp.cuda.Memory(sum(sizes))  # a plain cudaMalloc, outside the pool
    mem = RunMemory("arena", None, _blocks=[block])
    offset = 0
    views: dict[tuple[Any, str], Any] = {}
    for (g, name, shape, dtype), size in zip(slots, sizes, strict=True):
        views[(g, name)] = cp.ndarray(shape, dtype, cp.cuda.MemoryPointer(block, offset))
        offset += size
    mem.flush = views[(None, "flush")].view(cp.int32)
    for g, pts in groups.items():
        src = _build_group(g, max(p.t for p in pts))
        planes = {}
        for name, a in src.weight.planes.items():
            dst = views[(g, name)]
            dst[...] = a
            planes[name] = dst
        w = PackedWeight(g[0], g[2], g[3], planes, src.weight.tensor_scale, src.weight.device_id)
        views[(g, "x")][...] = src.x
        mem.groups[g] = Group(w, views[(g, "x")], views[(g, "out")])
        del src
        cp.get_default_memory_pool().free_all_blocks()  # the fixture's temporaries
    need = max(
        (linear_workspace_bytes(mem.groups[p.group].weight, p.t, p.policy) for p in points),
        default=0,
    )
    if need:
        ws_block = cp.cuda.Memory(_up(need))
        mem._blocks.append(ws_block)
        mem.workspace = cp.ndarray((need,), cp.uint8, cp.cuda.MemoryPointer(ws_block, 0))
    cp.cuda.Device().synchronize()
    return mem


def pool_groups(
    points: Sequence[BenchPoint], flush_mib: int
) -> Iterator[tuple[RunMemory, list[BenchPoint]]]:
    """The old allocation: one group at a time from the CuPy pool, in suite order."""
    import cupy as cp

    mem = RunMemory("pool", cp.empty(max(flush_mib, 1) << 18, cp.int32))
    for g, pts in group_points(points).items():
        mem.groups = {g: _build_group(g, max(p.t for p in pts))}
        yield mem, pts
        mem.groups.clear()
    mem.free()
