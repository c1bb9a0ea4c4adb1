"""Spec constants of known GPUs (DESIGN §8), with the source of every number.

Datasheet rates are fixed references (``DRAM_%``, memory floor). A measured read rate
is what a pure uint4 read kernel sustained on that model; where none is recorded the
probe measures it on the spot. Unknown GPUs are not guessed: ``lookup`` returns None.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class GpuSpec:
    """One GPU model. ``match``/``exclude`` are case-insensitive, token-bounded substrings
    of the CUDA device name; ``l2_mb`` is in MiB."""

    key: str
    name: str
    match: tuple[str, ...]
    dram_spec_gbps: float
    measured_read_gbps: float | None
    read_note: str
    bf16_dense_tflops: float  # dense (no sparsity), FP32 accumulate
    l2_mb: float | None
    # Names that contain a match string but are another memory system (laptop parts,
    # NVL boards), so their ceilings would be wrong.
    exclude: tuple[str, ...] = ()


# Order is lookup order: the first entry whose match hits (and no exclude does) wins.
GPUS: tuple[GpuSpec, ...] = (
    GpuSpec(
        key="rtx5090",
        name="NVIDIA GeForce RTX 5090",
        match=("RTX 5090",),
        exclude=("Laptop",),
        dram_spec_gbps=1792.0,  # datasheet: 512-bit GDDR7 at 28 Gbps
        measured_read_gbps=1674.5,  # measured: seed 000 §4, tools/hbm_bandwidth_probe.cu
        read_note="a 4 GiB uint4 read on an RTX 5090 (tools/hbm_bandwidth_probe.cu)",
        bf16_dense_tflops=209.5,  # datasheet (Blackwell whitepaper), dense, FP32 accumulate
        l2_mb=96.0,  # datasheet
    ),
    GpuSpec(
        key="h200",
        name="NVIDIA H200",
        match=("H200",),
        exclude=("NVL",),  # H200 NVL: same HBM, lower clocks and TDP
        dram_spec_gbps=4800.0,  # datasheet: 4.8 TB/s HBM3e
        measured_read_gbps=4550.0,  # measured: anchors read_GBps, best grid (4550.4)
        read_note="a 4 GiB uint4 read on an H200, 2026-11-30",
        bf16_dense_tflops=989.4,  # datasheet: 1979 with sparsity, half of it dense
        l2_mb=60.0,  # measured: device property l2 = 62914560 B in the anchor run
    ),
    GpuSpec(
        key="h100",
        name="NVIDIA H100 SXM5 80GB",
        # SXM5 reports "H100 80GB HBM3"; PCIe (2.0 TB/s) and NVL (3.9 TB/s) do not match.
        match=("H100 80GB HBM3", "H100 SXM5", "H100 SXM"),
        dram_spec_gbps=3350.0,  # datasheet: 3.35 TB/s HBM3
        measured_read_gbps=None,
        read_note="",
        bf16_dense_tflops=989.4,  # datasheet (Hopper whitepaper), dense
        l2_mb=50.0,  # datasheet
    ),
    GpuSpec(
        key="a100",
        name="NVIDIA A100-SXM4-80GB",
        # The 40 GB SXM4 (1555 GB/s) and the PCIe boards (1935 GB/s) do not match.
        match=("A100-SXM4-80GB", "A100 SXM4 80GB"),
        dram_spec_gbps=2039.0,  # datasheet: 2,039 GB/s HBM2e
        measured_read_gbps=None,
        read_note="",
        bf16_dense_tflops=312.0,  # datasheet, dense
        l2_mb=40.0,  # datasheet
    ),
    GpuSpec(
        key="l40s",
        name="NVIDIA L40S",
        match=("L40S",),  # token-bounded, so plain "L40" (another board) does not match
        dram_spec_gbps=864.0,  # datasheet: 864 GB/s GDDR6
        measured_read_gbps=None,
        read_note="",
        bf16_dense_tflops=362.05,  # datasheet: 733 with sparsity
        l2_mb=96.0,  # datasheet (Ada whitepaper)
    ),
    GpuSpec(
        key="rtx4090",
        name="NVIDIA GeForce RTX 4090",
        match=("RTX 4090",),
        exclude=("Laptop",),
        dram_spec_gbps=1008.0,  # datasheet: 384-bit GDDR6X at 21 Gbps
        measured_read_gbps=None,
        read_note="",
        bf16_dense_tflops=165.2,  # datasheet (Ada whitepaper), dense, FP32 accumulate
        l2_mb=72.0,  # datasheet
    ),
)

_NON_ALNUM = re.compile(r"[^a-z0-9]+")


def _tokens(text: str) -> str:
    # Lowercase, any run of punctuation/space -> one space, padded: matching " h100 "
    # against " nvidia h100 80gb hbm3 " is then a token-bounded substring test, so
    # "A100-SXM4-80GB" and "A100 SXM4 80GB" spell the same and "L40" misses "L40S".
    return f" {_NON_ALNUM.sub(' ', text.lower()).strip()} "


def _hits(name: str, patterns: tuple[str, ...]) -> bool:
    return any(_tokens(p) in name for p in patterns)


def lookup(device_name: str) -> GpuSpec | None:
    """The spec whose match strings occur in ``device_name``; None for unknown GPUs."""
    name = _tokens(device_name)
    for spec in GPUS:
        if _hits(name, spec.match) and not _hits(name, spec.exclude):
            return spec
    return None


def gpu_key(device_name: str) -> str:
    """Folder/file key of a GPU: the spec key, else a slug of the device name."""
    spec = lookup(device_name)
    if spec is not None:
        return spec.key
    slug = _tokens(device_name).strip().replace(" ", "-")
    return slug or "unknown-gpu"
