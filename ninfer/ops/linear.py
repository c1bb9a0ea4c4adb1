"""The public Linear op: ``out[T, N] = x[T, K] · W[N, K]^T`` (DESIGN §3).

Every check runs before anything is launched, so a rejected call leaves ``out``
untouched. A call allocates nothing and never synchronizes: it can be captured in a
CUDA graph (after a first call has compiled its kernels) and replayed.
"""

from __future__ import annotations

import functools
from typing import Any

from ..formats.packed import INT32_MAX, PackedWeight
from ..formats.qtype import QType
from ..policy import Policy
from ..routes import table
from ..routes.launch import Plan
from ..routes.problem import Problem
from ..routes.table import Route, select
from ..runtime.interop import DevArray, describe, resolve_stream


@functools.cache
def _device_cc(device_id: int) -> int:
    from ..runtime.cupy_env import require_cupy

    return int(require_cupy().cuda.Device(device_id).compute_capability)


def _check_weight(w: Any) -> PackedWeight:
    if not isinstance(w, PackedWeight):
        raise TypeError(f"w: expected a ninfer.PackedWeight, got {type(w).__name__}")
    if not w.is_device:
        raise TypeError("w: expected a device PackedWeight, got a host one (call w.to_device())")
    return w


def _check_policy(policy: Any, w: PackedWeight) -> Policy:
    pol = policy if policy is Policy.A16 else Policy.parse(policy)
    if pol is Policy.A4 and w.qtype is not QType.NVFP4:
        raise ValueError(f"policy A4: expected an NVFP4 weight, got {w.qtype.name}")
    return pol


def _check_t(t: Any) -> int:
    if isinstance(t, bool) or not isinstance(t, int):
        raise TypeError(f"T: expected an int, got {type(t).__name__}")
    if t < 1:
        raise ValueError(f"T: expected T >= 1, got {t}")
    if t > INT32_MAX:
        raise ValueError(f"T: expected T <= {INT32_MAX} (the kernels take int32), got {t}")
    return t


def _check_activation(a: DevArray, what: str, rows: int | None, cols: int, w: PackedWeight) -> int:
    if a.dtype != "bfloat16":
        raise TypeError(f"{what}: expected dtype bfloat16, got {a.dtype}")
    if len(a.shape) != 2:
        raise ValueError(
            f"{what}: expected a 2-D (T, {'K' if what == 'x' else 'N'}) array, got shape {a.shape}"
        )
    t = a.shape[0]
    if rows is None and t < 1:
        raise ValueError(f"{what}: expected T >= 1 rows, got shape {a.shape}")
    if rows is None and t > INT32_MAX:
        # Before the layout checks: a stride-0 view is how a T this large gets here at all.
        raise ValueError(
            f"{what}: expected T <= {INT32_MAX} rows (the kernels take int32), got shape {a.shape}"
        )
    want = (t if rows is None else rows, cols)
    if a.shape != want:
        raise ValueError(f"{what}: expected shape {want}, got {a.shape}")
    if t * cols > INT32_MAX:
        # dec_q indexes an activation row as (t * K + k) in int32.
        raise ValueError(
            f"{what}: expected at most {INT32_MAX} elements (the kernels index it in int32), "
            f"got shape {a.shape}"
        )
    if not a.c_contiguous:
        raise ValueError(f"{what}: expected a row-major contiguous array, got strides {a.strides}")
    if a.device != w.device_id:
        raise ValueError(
            f"{what}: expected device {w.device_id} (the weight's), got device {a.device}"
        )
    return t


def _overlap(a: tuple[int, int], b: tuple[int, int]) -> bool:
    return a[0] < b[1] and b[0] < a[1]


def _check_off_weight(span: tuple[int, int], what: str, w: PackedWeight) -> None:
    # Kernels read the planes while they write out / the workspace: any shared byte races.
    for name, plo, phi in w.plane_spans:
        if _overlap(span, (plo, phi)):
            raise ValueError(
                f"{what}: expected memory disjoint from the weight, got overlap with plane {name!r}"
            )


# Every route-table object the caches have been keyed by, kept alive: the key is the
# object's id(), and a table freed after a test could otherwise hand its id to the next
# replacement, which would then be served the freed table's routes.
_TABLES_SEEN: dict[int, object] = {}


def tables_key() -> int:
    """A cache key for the current ``ROUTE_TABLES`` object: unique for the process."""
    tables = table.ROUTE_TABLES
    key = id(tables)
    if key not in _TABLES_SEEN:
        _TABLES_SEEN[key] = tables
    return key


def _route(w: PackedWeight, t: int, policy: Policy) -> tuple[Problem, Route]:
    assert w.device_id is not None
    return _select(w.qtype, policy, w.n, w.k, t, _device_cc(w.device_id), tables_key())


@functools.lru_cache(maxsize=4096)
def _select(
    qtype: QType, policy: Policy, n: int, k: int, t: int, cc: int, tables: int
) -> tuple[Problem, Route]:
    # One selection per geometry, not one per call; ``tables`` (tables_key()) keys the
    # cache so a replaced table (tests) is never served stale.
    p = Problem(qtype, policy, n, k, t, cc)
    return p, select(p)


def linear_workspace_bytes(w: PackedWeight, T: int, policy: Policy | str = Policy.A16) -> int:
    """Workspace bytes ``linear`` needs for this weight, T and policy (public capacity query)."""
    wd = _check_weight(w)
    pol = _check_policy(policy, wd)
    p, route = _route(wd, _check_t(T), pol)
    return int(route.launcher.workspace_bytes(p))


def linear(
    x: Any,
    w: PackedWeight,
    out: Any,
    policy: Policy | str = Policy.A16,
    workspace: Any = None,
    stream: Any = None,
) -> None:
    """Compute ``out = x · W^T`` in BF16 with FP32 accumulation, on ``stream``.

    x: (T, K) bfloat16 and out: (T, N) bfloat16, row-major CuPy arrays or torch CUDA
    tensors (without ``requires_grad``: there is no autograd) on the weight's device.
    ``workspace``: a device buffer of at least ``linear_workspace_bytes(w, T, policy)``
    bytes (None when that is 0), disjoint from x, out and the weight. ``stream``: None
    (the current stream of the weight's device), a CuPy or torch stream of that device,
    or a raw handle, whose device cannot be known and is the caller's to get right.
    Raises TypeError / ValueError for bad input and ninfer.UnsupportedProblem for a
    legal geometry no route implements, always before any launch.
    """
    wd = _check_weight(w)
    pol = _check_policy(policy, wd)
    xd = describe(x, "x")
    od = describe(out, "out")
    t = _check_activation(xd, "x", None, wd.k, wd)
    _check_activation(od, "out", t, wd.n, wd)
    xspan = xd.span()
    ospan = od.span()
    if _overlap(xspan, ospan):
        raise ValueError("out: expected memory disjoint from x, got overlapping buffers (aliasing)")
    _check_off_weight(ospan, "out", wd)
    d = _dispatch(wd, t, pol)
    need = int(d.route.launcher.workspace_bytes(d.problem))
    ws_ptr = 0
    if workspace is not None:
        wsd = describe(workspace, "workspace")
        if wsd.device != wd.device_id:
            raise ValueError(f"workspace: expected device {wd.device_id}, got device {wsd.device}")
        if not wsd.c_contiguous:
            raise ValueError(f"workspace: expected a contiguous buffer, got strides {wsd.strides}")
        if wsd.nbytes < need:
            raise ValueError(f"workspace: expected at least {need} bytes, got {wsd.nbytes}")
        wspan = wsd.span()
        if _overlap(wspan, xspan) or _overlap(wspan, ospan):
            which = "x" if _overlap(wspan, xspan) else "out"
            raise ValueError(
                f"workspace: expected memory disjoint from x and out, got overlap with {which}"
            )
        _check_off_weight(wspan, "workspace", wd)
        if need > 0 and wsd.ptr % 16:
            raise ValueError(f"workspace: expected a 16-byte aligned address, got {wsd.ptr:#x}")
        ws_ptr = wsd.ptr
    elif need > 0:
        raise ValueError(f"workspace: expected a device buffer of at least {need} bytes, got None")
    handle = resolve_stream(stream, "torch" in (xd.kind, od.kind), wd.device_id)
    d.plan().run(xd.ptr, od.ptr, handle, ws_ptr)


class _Dispatch:
    """What a (weight, T, policy) resolves to: problem, route and launch plan.

    Cached on the weight (its planes never change), so a repeated call skips selection
    and marshalling: host dispatch is a budgeted cost (docs/perf/decode_h200.md). The
    workspace need is asked of the route on every call, as the public query does.
    """

    __slots__ = ("_plan", "_w", "problem", "route")

    def __init__(self, w: PackedWeight, t: int, policy: Policy) -> None:
        self.problem, self.route = _route(w, t, policy)
        self._plan: Any = None
        self._w = w

    def plan(self) -> Any:
        if self._plan is None:  # built at the first launch (compiles on first use)
            make = getattr(self.route.launcher, "make_plan", None)
            self._plan = (
                make(self.problem, self._w) if make else Plan(self.route, self.problem, self._w)
            )
        return self._plan


def _dispatch(w: PackedWeight, t: int, policy: Policy) -> _Dispatch:
    cache = w.dispatch_cache
    # tables_key(): a replaced table (tests) never serves a stale route.
    key = (t, policy is Policy.A4, tables_key())
    d = cache.get(key)
    if d is None:
        if len(cache) >= 256:  # T is bounded in practice; stay bounded anyway
            cache.clear()
        d = cache[key] = _Dispatch(w, t, policy)
    return d
