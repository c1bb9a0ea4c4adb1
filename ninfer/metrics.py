"""Route-neutral metrics of one timed point (seed 000 §4-§5, DESIGN §8).

Bytes are the model floor of the public representation — one logical read of the
weight and x, one write of out — not profiler-observed DRAM traffic. FLOPs are the
mathematical GEMM work 2·N·K·T for every format; decode, padding and split-K work are
never added, so different routes compare on the same work.
"""

from __future__ import annotations

from dataclasses import dataclass

from ninfer.formats.qtype import QType, weight_bytes

_BF16_BYTES = 2  # x and out are BF16


def byte_breakdown(qtype: QType | str, n: int, k: int, t: int) -> dict[str, int]:
    """``model_bytes = weight_bytes + 2·K·T + 2·N·T`` and its three parts."""
    if isinstance(t, bool) or not isinstance(t, int) or t < 1:
        raise ValueError(f"T: expected an int >= 1, got {t!r}")
    w = weight_bytes(qtype, n, k)  # also rejects N or K < 1
    x = _BF16_BYTES * k * t
    out = _BF16_BYTES * n * t
    return {"weight_bytes": w, "x_bytes": x, "out_bytes": out, "model_bytes": w + x + out}


@dataclass(frozen=True)
class Ceilings:
    """The reference rates a run divides by, with where the read ceiling came from.

    ``dram_spec_gbps`` is the fixed datasheet number (``DRAM_%``, memory floor);
    ``sustained_read_gbps`` is a measured pure-read rate (``READ_%``) — the reachable
    ceiling for read-dominated GEMV, which a copy (read + write) probe is not.
    """

    gpu: str
    dram_spec_gbps: float
    sustained_read_gbps: float
    read_source: str
    bf16_dense_tflops: float | None


def point_metrics(
    qtype: QType | str, n: int, k: int, t: int, median_us: float, ceil: Ceilings
) -> dict[str, float]:
    """DESIGN §8 metrics of one point timed at ``median_us`` against ``ceil``."""
    if not median_us > 0:  # also catches NaN
        raise ValueError(f"median_us: expected a time > 0, got {median_us!r}")
    for name, rate in (
        ("dram_spec_gbps", ceil.dram_spec_gbps),
        ("sustained_read_gbps", ceil.sustained_read_gbps),
    ):
        if not rate > 0:
            raise ValueError(f"ceilings.{name}: expected a rate > 0, got {rate!r}")
    model_bytes = byte_breakdown(qtype, n, k, t)["model_bytes"]
    seconds = median_us * 1e-6
    gbps = model_bytes / seconds / 1e9
    floor_us = model_bytes / (ceil.dram_spec_gbps * 1e9) * 1e6
    return {
        "model_GB": model_bytes / 1e9,
        "effective_GBps": gbps,
        "DRAM_pct": gbps / ceil.dram_spec_gbps * 100.0,
        "READ_pct": gbps / ceil.sustained_read_gbps * 100.0,
        "useful_TFLOPs": 2.0 * n * k * t / seconds / 1e12,
        "memory_floor_us": floor_us,
        "memory_floor_pct": floor_us / median_us * 100.0,
    }
