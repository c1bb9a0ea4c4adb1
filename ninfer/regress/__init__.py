"""The regression pipeline (DESIGN §9): rounds, verdicts, A/B confirmation, reports.

``ninfer-regress`` (cli.py) is its command line; the nox sessions bench / compare /
baseline / report call it. The record it reads is ``ninfer.record``'s.
"""

from ..record import GpuMismatchError, Results, ResultsError, load_baseline, load_results
from .stats import Verdict, decide_all

__all__ = [
    "GpuMismatchError",
    "Results",
    "ResultsError",
    "Verdict",
    "decide_all",
    "load_baseline",
    "load_results",
]
