"""Known GPU models: spec constants and measured ceilings (DESIGN §8)."""

from .table import GPUS, GpuSpec, gpu_key, lookup

__all__ = ["GPUS", "GpuSpec", "gpu_key", "lookup"]
