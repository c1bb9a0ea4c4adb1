"""Private route selector and launchers. Not public API: no route forcing outside tests."""

from .problem import QTYPE_ID, Problem
from .table import LAUNCHERS, ROUTE_TABLES, Route, fingerprint, seams, select, table_for

__all__ = [
    "LAUNCHERS",
    "QTYPE_ID",
    "ROUTE_TABLES",
    "Problem",
    "Route",
    "fingerprint",
    "seams",
    "select",
    "table_for",
]
