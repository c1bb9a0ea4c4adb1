"""The dispatcher: route tables and tuning in, launches out; it owns every cache.

``linear()`` uses the default one (the shipped tables, every launcher's measured
tuning). Tests and experiments build their own with overrides, e.g.
``Dispatcher(tuning={"dq_rs": DqRsTuning(nb=2, blocks=50)})`` or a table of their own,
instead of rebinding module globals: two dispatchers never share a plan or a selection,
so an override can neither leak into the default nor be served stale.

Caches, all owned here:
- selections: (format, policy, N, K, T, cc) -> (problem, route);
- per weight: (T, A4) -> the route, its workspace need and its launch plan; and
  (policy, x, out, workspace) -> the plan bound to those buffers (``Launch``), keyed by
  everything the checks read of them (``interop.call_key``: address, device, shape,
  strides, dtype), so a repeated call skips the checks it has passed and the binding.
  Both are dropped when the weight is freed (a weak reference; a plan holds the planes'
  addresses, never the weight, so the cache cannot keep a weight alive);
- compiled modules: a ``Kernels`` (content-addressed, so ``with_tuning`` shares it).
"""

from __future__ import annotations

import functools
import weakref
from collections.abc import Mapping
from typing import Any

from ..formats.packed import PackedWeight
from ..policy import Policy
from ..routes.launcher import Launch, Launcher, Plan
from ..routes.problem import Problem
from ..routes.table import LAUNCHERS, ROUTE_TABLES, Route, Tables, seams, select, table_for
from ..runtime.compile import Kernels
from ..runtime.interop import call_key, describe, resolve_stream
from .checks import (
    check_activation,
    check_off_weight,
    check_policy,
    check_t,
    check_weight,
    overlap,
)

_SELECTIONS_MAX = 4096  # distinct geometries remembered; T is bounded in practice
_PER_WEIGHT_MAX = 256  # (T, policy) entries per weight
_CALLS_MAX = 64  # bound launches per weight (buffer sets of a serving loop, times T)


@functools.cache
def _device_cc(device_id: int) -> int:
    from ..runtime.cupy_env import require_cupy

    return int(require_cupy().cuda.Device(device_id).compute_capability)


class _Entry:
    """What a (weight, T, policy) resolves to: problem, route, workspace need, plan."""

    __slots__ = ("launcher", "need", "plan", "problem", "route", "tuning")

    def __init__(self, problem: Problem, route: Route, launcher: Launcher, tuning: Any) -> None:
        self.problem, self.route, self.launcher, self.tuning = problem, route, launcher, tuning
        self.need = int(launcher.workspace_bytes(problem, tuning))
        self.plan: Plan | None = None  # built at the first launch (compiles on first use)


# A weight's caches: its weak reference, (T, A4) -> entry, call key -> (launch, whether
# the stream is torch's, device).
_Slot = tuple[
    "weakref.ref[PackedWeight]",
    dict[Any, _Entry],
    dict[tuple[Any, ...], tuple[Launch, bool, int | None]],
]


def _call_key(policy: Any, x: Any, out: Any, workspace: Any) -> tuple[Any, ...] | None:
    """The call cache's key; None where an array has no key (it then always goes through
    the checks: a workspace without a key must not pass for no workspace)."""
    kx, ko = call_key(x), call_key(out)
    kw = () if workspace is None else call_key(workspace)
    if kx is None or ko is None or kw is None:
        return None
    return (policy, kx, ko, kw)


class Dispatcher:
    """Selects a route per problem from ``tables`` and launches it with ``tuning``.

    tables: compute capability -> rows (default: the shipped ``ROUTE_TABLES``).
    tuning: route name -> that launcher's tuning dataclass (default: its measured one).
    kernels: the compiled-module cache (default: a new one).
    """

    def __init__(
        self,
        tables: Tables | None = None,
        tuning: Mapping[str, Any] | None = None,
        kernels: Kernels | None = None,
    ) -> None:
        given = dict(tuning or {})
        unknown = sorted(set(given) - set(LAUNCHERS))
        if unknown:
            raise ValueError(f"tuning: expected route names of {sorted(LAUNCHERS)}, got {unknown}")
        for name, tn in given.items():
            want = type(LAUNCHERS[name].tuning)
            if not isinstance(tn, want):
                raise TypeError(
                    f"tuning[{name!r}]: expected {want.__name__}, got {type(tn).__name__}"
                )
        self.tables: Tables = ROUTE_TABLES if tables is None else dict(tables)
        self.tuning: dict[str, Any] = {n: given.get(n, lc.tuning) for n, lc in LAUNCHERS.items()}
        self.kernels = Kernels() if kernels is None else kernels
        self._selected: dict[tuple[Any, ...], tuple[Problem, Route]] = {}
        self._weights: dict[int, _Slot] = {}

    def with_tuning(self, **tuning: Any) -> Dispatcher:
        """A dispatcher with these launchers' tuning replaced (same tables; the compiled
        modules are shared, being keyed by what was compiled)."""
        return Dispatcher(self.tables, {**self.tuning, **tuning}, self.kernels)

    def with_tables(self, tables: Tables) -> Dispatcher:
        return Dispatcher(tables, self.tuning, self.kernels)

    # --- selection -------------------------------------------------------------------

    def table_for(self, cc: int) -> tuple[Route, ...]:
        return table_for(cc, self.tables)

    def seams(self, cc: int) -> list[int]:
        return seams(cc, self.tables)

    def select(self, p: Problem) -> Route:
        return select(p, self.tables)

    def route(self, w: PackedWeight, t: int, policy: Policy) -> tuple[Problem, Route]:
        dev = w.device_id
        if dev is None:
            raise TypeError(
                "w: expected a device PackedWeight, got a host one (call w.to_device())"
            )
        key = (w.qtype, policy, w.n, w.k, t, _device_cc(dev))
        hit = self._selected.get(key)
        if hit is None:
            if len(self._selected) >= _SELECTIONS_MAX:
                self._selected.clear()
            p = Problem(*key)
            hit = self._selected[key] = (p, self.select(p))
        return hit

    # --- per-weight cache --------------------------------------------------------------

    def _slot(self, w: PackedWeight) -> _Slot:
        key = id(w)
        slot = self._weights.get(key)
        if slot is None:
            # The callback runs while the weight is being freed, before its id can be
            # reused: a new weight never finds a dead one's plans or launches.
            ref = weakref.ref(w, functools.partial(_forget, self._weights, key))
            slot = self._weights[key] = (ref, {}, {})
        return slot

    def _entries(self, w: PackedWeight) -> dict[Any, _Entry]:
        return self._slot(w)[1]

    def _entry(self, w: PackedWeight, t: int, policy: Policy) -> _Entry:
        entries = self._entries(w)
        ekey = (t, policy is Policy.A4)
        e = entries.get(ekey)
        if e is None:
            if len(entries) >= _PER_WEIGHT_MAX:
                entries.clear()
            p, route = self.route(w, t, policy)
            e = entries[ekey] = _Entry(p, route, route.launcher, self.tuning[route.name])
        return e

    def plan(self, w: PackedWeight, t: int, policy: Policy | str = Policy.A16) -> Plan:
        """The launch plan a call with this weight, T and policy runs (built if needed)."""
        wd = check_weight(w)
        e = self._entry(wd, check_t(t), check_policy(policy, wd))
        return self._built(e, wd)

    def _built(self, e: _Entry, w: PackedWeight) -> Plan:
        plan = e.plan
        if plan is None:
            plan = e.plan = e.launcher.plan(e.problem, w, self.kernels, e.tuning)
        return plan

    # --- the op ----------------------------------------------------------------------

    def workspace_bytes(self, w: PackedWeight, t: int, policy: Policy | str = Policy.A16) -> int:
        wd = check_weight(w)
        return self._entry(wd, check_t(t), check_policy(policy, wd)).need

    def linear(
        self,
        x: Any,
        w: PackedWeight,
        out: Any,
        policy: Policy | str = Policy.A16,
        workspace: Any = None,
        stream: Any = None,
    ) -> None:
        """``ninfer.linear`` through this dispatcher (same contract, same checks)."""
        # A repeat of a call that passed: same weight (a live object's id is its own),
        # policy and buffer keys. Only the stream is resolved again.
        key = _call_key(policy, x, out, workspace)
        slot = self._weights.get(id(w))
        if slot is not None and key is not None:
            try:
                hit = slot[2].get(key)
            except TypeError:  # an unhashable policy: the checks will say what is wrong
                hit = None
            if hit is not None:
                hit[0].launch(resolve_stream(stream, hit[1], hit[2]))
                return
        self._checked_linear(x, w, out, policy, workspace, stream, key)

    def _checked_linear(
        self,
        x: Any,
        w: PackedWeight,
        out: Any,
        policy: Any,
        workspace: Any,
        stream: Any,
        key: tuple[Any, ...] | None,
    ) -> None:
        wd = check_weight(w)
        pol = check_policy(policy, wd)
        xd = describe(x, "x")
        od = describe(out, "out")
        t = check_activation(xd, "x", None, wd.k, wd)
        check_activation(od, "out", t, wd.n, wd)
        xspan = xd.span()
        ospan = od.span()
        if overlap(xspan, ospan):
            raise ValueError(
                "out: expected memory disjoint from x, got overlapping buffers (aliasing)"
            )
        check_off_weight(ospan, "out", wd)
        e = self._entry(wd, t, pol)
        need = e.need
        ws_ptr = 0
        if workspace is not None:
            wsd = describe(workspace, "workspace")
            if wsd.device != wd.device_id:
                raise ValueError(
                    f"workspace: expected device {wd.device_id}, got device {wsd.device}"
                )
            if not wsd.c_contiguous:
                raise ValueError(
                    f"workspace: expected a contiguous buffer, got strides {wsd.strides}"
                )
            if wsd.nbytes < need:
                raise ValueError(f"workspace: expected at least {need} bytes, got {wsd.nbytes}")
            wspan = wsd.span()
            if overlap(wspan, xspan) or overlap(wspan, ospan):
                which = "x" if overlap(wspan, xspan) else "out"
                raise ValueError(
                    f"workspace: expected memory disjoint from x and out, got overlap with {which}"
                )
            check_off_weight(wspan, "workspace", wd)
            if need > 0 and wsd.ptr % 16:
                raise ValueError(f"workspace: expected a 16-byte aligned address, got {wsd.ptr:#x}")
            ws_ptr = wsd.ptr
        elif need > 0:
            raise ValueError(
                f"workspace: expected a device buffer of at least {need} bytes, got None"
            )
        torch = "torch" in (xd.kind, od.kind)
        handle = resolve_stream(stream, torch, wd.device_id)
        launch = self._built(e, wd).bind(xd.ptr, od.ptr, ws_ptr)
        launch.launch(handle)
        if key is not None:  # the arrays as they were checked: nothing ran in between
            calls = self._slot(wd)[2]
            if len(calls) >= _CALLS_MAX:
                calls.clear()
            calls[key] = (launch, torch, wd.device_id)


def _forget(weights: dict[int, Any], key: int, _ref: Any) -> None:
    weights.pop(key, None)


DEFAULT = Dispatcher()
