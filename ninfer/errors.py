"""Typed errors of the public API."""

from __future__ import annotations


class UnsupportedProblem(Exception):
    """A legal problem (valid shapes, dtypes, devices) that no route implements.

    Tests skip on this type rather than on message text.
    """
