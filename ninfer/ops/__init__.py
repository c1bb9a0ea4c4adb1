"""Public ops."""

from .linear import linear, linear_workspace_bytes

__all__ = ["linear", "linear_workspace_bytes"]
