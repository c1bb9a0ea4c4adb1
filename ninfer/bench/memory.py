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

``run_bytes`` is what either mode allocates, computed without a GPU: the CLI refuses a
run above ``HARD_CAP_BYTES`` at parse time, and ``check_fits`` compares it with the
device's free memory before anything is allocated.
"""

from __future__ import annotations

import contextlib
import math
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import ml_dtypes
import numpy as np

from ..formats.layout import PLANES
from ..formats.packed import PackedWeight
from ..formats.qtype import QType, k_padded
from ..ops import linear_workspace_bytes
from ..policy import Policy
from .fixture import random_activations, random_device_weight
from .points import BenchPoint, GroupKey, group_points

ALIGN = 2 << 20
GIB = 1 << 30
# No single GPU has this much memory (the largest shipping have 288 GB, the largest
# announced 1 TB), and one cudaMalloc cannot exceed one device, so a run needing more is
# a typo in N, K or T: refused at parse time, where the device cannot be asked.
HARD_CAP_BYTES = 4 << 40
_CUDA_ERROR_MEMORY_ALLOCATION = 2  # cudaErrorMemoryAllocation, what a raw cudaMalloc gives


class DeviceMemoryError(RuntimeError):
    """The run's buffers do not fit the device's free memory."""


Query = Callable[[PackedWeight, int, Policy], int]  # (weight, T, policy) -> workspace bytes


def _up(n: int) -> int:
    return (n + ALIGN - 1) // ALIGN * ALIGN


def gib(n: int) -> str:
    return f"{n / GIB:,.1f} GiB"


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
    # The workspace query of what is timed: the public one, or a dispatch override's.
    query: Query = linear_workspace_bytes

    def workspace_for(self, w: PackedWeight, t: int, policy: Policy) -> Any:
        import cupy as cp

        need = self.query(w, t, policy)
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


Slot = tuple[GroupKey | None, str, tuple[int, ...], Any]


def _slots(points: Sequence[BenchPoint], flush_mib: int) -> list[Slot]:
    """The arena's buffers in placement order: the flush, then each group's planes, x, out."""
    slots: list[Slot] = [(None, "flush", (max(flush_mib, 1) << 20,), np.uint8)]
    for g, pts in group_points(points).items():
        q, _, n, k = g
        tmax = max(p.t for p in pts)
        slots += [(g, name, shape, dtype) for name, shape, dtype in _plane_bytes(q, n, k)]
        slots += [
            (g, "x", (tmax, k), ml_dtypes.bfloat16),
            (g, "out", (tmax, n), ml_dtypes.bfloat16),
        ]
    return slots


def _size(slot: Slot) -> int:
    return _up(np.dtype(slot[3]).itemsize * math.prod(slot[2]))


def run_bytes(points: Sequence[BenchPoint], flush_mib: int, mode: str = "arena") -> int:
    """Device bytes a round allocates for its buffers: the whole arena, or for ``pool``
    the flush plus the largest group. The workspace (which needs the device's route
    table) and the fixture's temporaries are not counted; an OOM there is still caught."""
    sizes = [(s[0], _size(s)) for s in _slots(points, flush_mib)]
    if mode == "arena":
        return sum(b for _, b in sizes)
    per_group: dict[Any, int] = {}
    for g, b in sizes:
        per_group[g] = per_group.get(g, 0) + b
    flush = per_group.pop(None)
    return flush + max(per_group.values(), default=0)


def check_cap(points: Sequence[BenchPoint], flush_mib: int, mode: str = "arena") -> None:
    """Refuse, without a GPU, a run that no device could hold."""
    need = run_bytes(points, flush_mib, mode)
    if need > HARD_CAP_BYTES:
        raise ValueError(
            f"the run needs {gib(need)} of device memory ({mode}: weights, x, out, flush): "
            f"expected at most {gib(HARD_CAP_BYTES)}, more than any GPU has"
        )


def check_fits(need: int) -> int:
    """Compare ``need`` bytes with the current device's free memory (a cheap query that
    allocates nothing), so a run too large fails with one line instead of an OOM.
    Returns the free bytes."""
    import gc

    import cupy as cp

    # What is only cached must not count as used: a packed weight keeps its planes (views
    # of the last round's arena) alive through a reference cycle (its dispatch cache)
    # until the cycle collector runs, and CuPy's pool and torch's allocator keep freed
    # blocks (the probe's buffers, a peer's weight). CuPy's own allocator does the same
    # collect-and-retry before it reports out of memory.
    gc.collect()
    cp.get_default_memory_pool().free_all_blocks()
    if "torch" in sys.modules:
        sys.modules["torch"].cuda.empty_cache()
    free, _total = cp.cuda.runtime.memGetInfo()
    if need > free:
        raise DeviceMemoryError(f"needs {gib(need)}, the GPU has {gib(free)} free")
    return int(free)


def _is_oom(e: BaseException) -> bool:
    import cupy as cp

    if isinstance(e, cp.cuda.memory.OutOfMemoryError):
        return True
    return (
        isinstance(e, cp.cuda.runtime.CUDARuntimeError)
        and getattr(e, "status", None) == _CUDA_ERROR_MEMORY_ALLOCATION
    )


@contextlib.contextmanager
def _oom_as_error(need: int, free: int) -> Iterator[None]:
    """CuPy's out-of-memory error (a traceback) as one DeviceMemoryError line; ``free``
    is from before allocating, as the failed allocation's partial buffers still count."""
    try:
        yield
    except Exception as e:
        if _is_oom(e):
            raise DeviceMemoryError(
                f"needs {gib(need)} and the fixture's temporaries, the GPU had {gib(free)} "
                f"free ({e})"
            ) from None
        raise


def _build_group(g: GroupKey, tmax: int) -> Group:
    import cupy as cp

    q, _, n, k = g
    w = random_device_weight(q, n, k, seed=weight_seed(n, k))
    x = random_activations(tmax, k)
    return Group(w, x, cp.empty((tmax, n), dtype=x.dtype))


def arena(
    points: Sequence[BenchPoint], flush_mib: int, query: Query = linear_workspace_bytes
) -> RunMemory:
    """Every buffer of ``points`` at fixed 2 MiB-aligned offsets of one allocation.

    Raises DeviceMemoryError, before allocating, when the arena exceeds the device's
    free memory, and in place of CuPy's out-of-memory error while placing the buffers.
    """
    slots = _slots(points, flush_mib)
    sizes = [_size(s) for s in slots]
    free = check_fits(sum(sizes))
    with _oom_as_error(sum(sizes), free):
        return _place(points, slots, sizes, query)


def _place(
    points: Sequence[BenchPoint], slots: list[Slot], sizes: list[int], query: Query
) -> RunMemory:
    import cupy as cp

    groups = group_points(points)
    block = cp.cuda.Memory(sum(sizes))  # a plain cudaMalloc, outside the pool
    mem = RunMemory("arena", None, _blocks=[block], query=query)
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
        (query(mem.groups[p.group].weight, p.t, p.policy) for p in points),
        default=0,
    )
    if need:
        ws_block = cp.cuda.Memory(_up(need))
        mem._blocks.append(ws_block)
        mem.workspace = cp.ndarray((need,), cp.uint8, cp.cuda.MemoryPointer(ws_block, 0))
    cp.cuda.Device().synchronize()
    return mem


def pool_groups(
    points: Sequence[BenchPoint], flush_mib: int, query: Query = linear_workspace_bytes
) -> Iterator[tuple[RunMemory, list[BenchPoint]]]:
    """The old allocation: one group at a time from the CuPy pool, in suite order."""
    import cupy as cp

    need = run_bytes(points, flush_mib, "pool")
    free = check_fits(need)
    with _oom_as_error(need, free):
        mem = RunMemory("pool", cp.empty(max(flush_mib, 1) << 18, cp.int32), query=query)
    for g, pts in group_points(points).items():
        with _oom_as_error(need, free):
            mem.groups = {g: _build_group(g, max(p.t for p in pts))}
        yield mem, pts
        mem.groups.clear()
    mem.free()
