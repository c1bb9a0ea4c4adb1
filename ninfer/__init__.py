"""ninfer: GPU Linear-op kernels for LLM inference and their performance pipeline."""

from .errors import UnsupportedProblem
from .formats import PackedWeight, QType, pack, weight_bytes
from .policy import Policy

__version__ = "0.1.0"

__all__ = ["PackedWeight", "Policy", "QType", "UnsupportedProblem", "pack", "weight_bytes"]
