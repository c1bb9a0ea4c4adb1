"""Dispatch overrides: what an experiment or the tune command times instead of the shipped
dispatch, through the same ``Dispatcher.linear`` (the same checks and launch path).

An override is a JSON object with any of:

- ``"force"``: a route name: that route for every problem (its launcher must be able to
  run it; a point it cannot run fails, named, and the rest go on);
- ``"table"``: a route-table file (``ninfer/routes/tables/sm_<cc>.json``'s schema) used
  for its compute capability in place of the shipped one;
- ``"tuning"``: ``{route: {field: value}}``, fields of that launcher's tuning dataclass
  (lists become tuples; ``dec_q``'s ``tiles`` map a format to rows of
  ``[t_max, nt, mt, wr, wk, s]``, optionally n_min and n_max after; formats not named keep
  the shipped rows).

A record measured under an override carries it in ``environment.dispatch``; a baseline
refresh refuses such a record.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from ..formats.qtype import QType
from ..ops.dispatch import Dispatcher
from ..routes.dec_q import Tile
from ..routes.table import LAUNCHERS, ROUTE_TABLES, Route, read_table

KEYS = ("force", "table", "tuning")


class OverrideError(ValueError):
    """A dispatch override that cannot be applied (the message names the key)."""


def forced_tables(route: str) -> dict[int, tuple[Route, ...]]:
    """One row, ``route`` for every problem, on every architecture's table."""
    if route not in LAUNCHERS:
        raise OverrideError(f"force: expected one of {sorted(LAUNCHERS)}, got {route!r}")
    return {cc: (Route(route, 1, None, evidence="forced"),) for cc in ROUTE_TABLES}


def _tuning(name: str, fields: Any) -> Any:
    if name not in LAUNCHERS:
        raise OverrideError(f"tuning: expected route names of {sorted(LAUNCHERS)}, got {name!r}")
    base = LAUNCHERS[name].tuning
    if not isinstance(fields, dict):
        raise OverrideError(f"tuning.{name}: expected an object of fields, got {fields!r}")
    known = {f.name for f in dataclasses.fields(base)}
    unknown = sorted(set(fields) - known)
    if unknown:
        raise OverrideError(f"tuning.{name}: expected fields of {sorted(known)}, got {unknown}")
    vals: dict[str, Any] = {}
    for k, v in fields.items():
        if k == "tiles":
            try:
                # the formats named replace their rows; the others keep the shipped ones
                # (an experiment on one format still runs every point of its suite)
                vals[k] = {
                    **base.tiles,
                    **{QType(q): tuple(Tile(*row) for row in rows) for q, rows in v.items()},
                }
            except (AttributeError, TypeError, ValueError) as e:
                raise OverrideError(
                    f"tuning.{name}.tiles: expected {{format: [[t_max, nt, mt, wr, wk, s(, n_min(, n_max))], ...]}},"
                    f" got {v!r} ({e})"
                ) from None
        else:
            vals[k] = tuple(v) if isinstance(v, list) else v
    return dataclasses.replace(base, **vals)


def dispatcher_for(doc: Any, where: str = "override") -> Dispatcher:
    """The dispatcher an override document describes; OverrideError naming ``where``."""
    try:
        if not isinstance(doc, dict) or not doc or set(doc) - set(KEYS):
            raise OverrideError(f"expected an object with keys among {list(KEYS)}, got {doc!r}")
        if "force" in doc and "table" in doc:
            raise OverrideError("expected one of force and table, got both")
        tables: dict[int, tuple[Route, ...]] | None = None
        if "force" in doc:
            tables = forced_tables(doc["force"])
        elif "table" in doc:
            try:
                t = read_table(Path(doc["table"]))
            except (OSError, ValueError) as e:
                raise OverrideError(f"table: {e}") from None
            tables = {**ROUTE_TABLES, t.cc: t.rows}
        tuning = {n: _tuning(n, f) for n, f in (doc.get("tuning") or {}).items()}
        return Dispatcher(tables, tuning)
    except OverrideError as e:
        raise OverrideError(f"{where}: {e}") from None


def load(path: Path) -> tuple[dict[str, Any], Dispatcher]:
    """(the override as recorded, its dispatcher) from a JSON file."""
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise OverrideError(f"{path}: not a readable JSON file ({e})") from None
    return doc, dispatcher_for(doc, str(path))
