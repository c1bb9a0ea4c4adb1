"""Bench metrics (DESIGN §8) by hand, and the GPU spec table lookup."""

from __future__ import annotations

import pytest

from ninfer import QType
from ninfer.gpus import GPUS, gpu_key, lookup
from ninfer.metrics import Ceilings, byte_breakdown, point_metrics

RTX5090 = Ceilings(
    gpu="NVIDIA GeForce RTX 5090",
    dram_spec_gbps=1792.0,
    sustained_read_gbps=1674.5,
    read_source="4 GiB uint4 read, seed 000",
    bf16_dense_tflops=209.5,
)


def test_seed_weight_bytes() -> None:
    # Seed 000 §9.6: Q4 [4096,5120], T=1 -> 4096*5120*(4/8 + 2/64).
    b = byte_breakdown(QType.Q4, 4096, 5120, 1)
    assert b["weight_bytes"] == 11_141_120 == 4096 * 5120 * (4 / 8 + 2 / 64)
    assert b["x_bytes"] == 2 * 5120
    assert b["out_bytes"] == 2 * 4096
    assert b["model_bytes"] == 11_141_120 + 10_240 + 8_192


def test_byte_breakdown_pads_k_for_weight_only() -> None:
    # K=4304 pads to 4352 for the weight; x is the logical [K,T] BF16 activation.
    b = byte_breakdown("q5", 1152, 4304, 4)
    assert b["weight_bytes"] == 1152 * 4352 // 64 * 42
    assert b["x_bytes"] == 2 * 4304 * 4
    assert b["out_bytes"] == 2 * 1152 * 4


def test_point_metrics_by_hand() -> None:
    # Q4 [4096,5120], T=1 at 10 us on the RTX 5090 ceilings.
    m = point_metrics(QType.Q4, 4096, 5120, 1, 10.0, RTX5090)
    model_bytes = 11_159_552
    assert m["model_GB"] == pytest.approx(0.011159552)
    assert m["effective_GBps"] == pytest.approx(1115.9552)  # bytes / 10e-6 s / 1e9
    assert m["DRAM_pct"] == pytest.approx(1115.9552 / 1792 * 100)  # 62.274...
    assert m["READ_pct"] == pytest.approx(1115.9552 / 1674.5 * 100)  # 66.644...
    assert m["useful_TFLOPs"] == pytest.approx(2 * 4096 * 5120 / 10e-6 / 1e12)  # 4.194304
    floor_us = model_bytes / 1792e9 * 1e6  # 6.2274...
    assert m["memory_floor_us"] == pytest.approx(floor_us)
    assert m["memory_floor_pct"] == pytest.approx(floor_us / 10.0 * 100)
    # The floor ratio and DRAM_% are the same quantity read two ways.
    assert m["memory_floor_pct"] == pytest.approx(m["DRAM_pct"])
    assert set(m) == {
        "model_GB",
        "effective_GBps",
        "DRAM_pct",
        "READ_pct",
        "useful_TFLOPs",
        "memory_floor_us",
        "memory_floor_pct",
    }


@pytest.mark.parametrize("bad", [0.0, -1.0, float("nan")])
def test_point_metrics_rejects_bad_time(bad: float) -> None:
    with pytest.raises(ValueError, match="median_us: expected a time > 0"):
        point_metrics(QType.Q4, 64, 128, 1, bad, RTX5090)


def test_byte_breakdown_rejects_bad_t() -> None:
    with pytest.raises(ValueError, match="T: expected an int >= 1, got 0"):
        byte_breakdown(QType.Q4, 64, 128, 0)


def test_h200_lookup() -> None:
    spec = lookup("NVIDIA H200")
    assert spec is not None and spec.key == "h200"
    assert spec.dram_spec_gbps == 4800.0
    assert spec.measured_read_gbps == 4550.0
    assert spec.bf16_dense_tflops == 989.4


@pytest.mark.parametrize(
    ("device", "key"),
    [
        ("NVIDIA H100 80GB HBM3", "h100"),
        ("NVIDIA GeForce RTX 5090", "rtx5090"),
        ("NVIDIA GeForce RTX 4090", "rtx4090"),
        ("NVIDIA A100-SXM4-80GB", "a100"),
        ("NVIDIA L40S", "l40s"),
        ("nvidia h200", "h200"),  # case-insensitive
    ],
)
def test_known_names(device: str, key: str) -> None:
    spec = lookup(device)
    assert spec is not None and spec.key == key
    assert gpu_key(device) == key


@pytest.mark.parametrize(
    ("device", "slug"),
    [
        ("NVIDIA GeForce RTX 3090", "nvidia-geforce-rtx-3090"),
        ("NVIDIA H100 PCIe", "nvidia-h100-pcie"),  # other memory system than SXM
        ("NVIDIA L40", "nvidia-l40"),  # not an L40S
        ("NVIDIA GeForce RTX 5090 Laptop GPU", "nvidia-geforce-rtx-5090-laptop-gpu"),
        ("NVIDIA H200 NVL", "nvidia-h200-nvl"),
        ("", "unknown-gpu"),
    ],
)
def test_unknown_names(device: str, slug: str) -> None:
    assert lookup(device) is None
    assert gpu_key(device) == slug


def test_table_is_consistent() -> None:
    keys = [g.key for g in GPUS]
    assert len(keys) == len(set(keys))
    for g in GPUS:
        assert g.dram_spec_gbps > 0 and g.bf16_dense_tflops > 0
        # A measured read never beats the datasheet and always says where it came from.
        if g.measured_read_gbps is not None:
            assert 0 < g.measured_read_gbps < g.dram_spec_gbps and g.read_note
        # Each spec finds itself by its own display name.
        assert lookup(g.name) is g
