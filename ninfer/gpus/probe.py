"""Measure a GPU's ceilings: sustained read (uint4, >= 4 GiB), device copy, BF16 MMA rate.

Results are cached per GPU in ``$NINFER_CACHE`` (default ~/.cache/ninfer) and used
where the spec table has no measured read.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import numpy as np

from ..runtime.cupy_env import device_name, require_cupy

_READ_SRC = r"""
extern "C" __global__ void ninfer_read(const uint4* __restrict__ p, unsigned long long n, unsigned int* sink) {
  unsigned int acc = 0;
  for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n;
       i += (unsigned long long)gridDim.x * blockDim.x) {
    uint4 v = __ldg(p + i);
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 0x9e3779b9u) *sink = acc;  // practically never: keeps the loads alive
}
"""


def cache_path(gpu_key: str) -> Path:
    root = Path(os.environ.get("NINFER_CACHE", Path.home() / ".cache" / "ninfer"))
    return root / f"probe-{gpu_key}.json"


def _events_ms(cp: Any, fn: Any, repeat: int) -> list[float]:
    s, e = cp.cuda.Event(), cp.cuda.Event()
    out = []
    for _ in range(repeat):
        s.record()
        fn()
        e.record()
        e.synchronize()
        out.append(cp.cuda.get_elapsed_time(s, e))
    return out


def run_probe(read_gib: float = 4.0, repeat: int = 10) -> dict[str, Any]:
    cp = require_cupy()
    dev = cp.cuda.Device()
    props = cp.cuda.runtime.getDeviceProperties(dev.id)
    sms = int(props["multiProcessorCount"])
    nbytes = int(read_gib * (1 << 30))
    buf = cp.random.default_rng(0).integers(0, 2**31, size=nbytes // 4, dtype=cp.int32)
    sink = cp.zeros(1, cp.uint32)
    kern = cp.RawKernel(_READ_SRC, "ninfer_read")
    n16 = np.uint64(nbytes // 16)
    read: dict[str, float] = {}
    for per_sm in (4, 8, 16, 32):
        fn = lambda g=sms * per_sm: kern((g,), (512,), (buf, n16, sink))  # noqa: E731
        fn()
        ms = float(np.median(_events_ms(cp, fn, repeat)))
        read[str(per_sm)] = nbytes / (ms * 1e-3) / 1e9
    dst = cp.empty_like(buf)
    ms = float(np.median(_events_ms(cp, lambda: dst.__setitem__(Ellipsis, buf), repeat)))
    copy = 2 * nbytes / (ms * 1e-3) / 1e9
    tflops = _bf16_rate(cp)
    return {
        "gpu": dev.id,
        "name": device_name(props),
        "sms": sms,
        "read_GBps_by_blocks_per_sm": read,
        "sustained_read_GBps": max(read.values()),
        "copy_GBps_rw": copy,
        "bf16_mma_TFLOPs": tflops,
        "read_bytes": nbytes,
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }


def _bf16_rate(cp: Any, size: int = 8192, repeat: int = 10) -> float | None:
    try:
        import torch
    except ImportError:
        return None
    a = torch.randn((size, size), device="cuda").to(torch.bfloat16)
    b = torch.randn((size, size), device="cuda").to(torch.bfloat16)
    c = torch.empty_like(a)
    for _ in range(3):
        torch.mm(a, b, out=c)
    torch.cuda.synchronize()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    ms = []
    for _ in range(repeat):
        s.record()
        torch.mm(a, b, out=c)
        e.record()
        e.synchronize()
        ms.append(s.elapsed_time(e))
    return 2 * size**3 / (float(np.median(ms)) * 1e-3) / 1e12


def cached_probe(gpu_key: str, force: bool = False) -> dict[str, Any] | None:
    p = cache_path(gpu_key)
    if p.exists() and not force:
        data: dict[str, Any] = json.loads(p.read_text())
        return data
    return None


def probe_and_cache(gpu_key: str) -> dict[str, Any]:
    res = run_probe()
    p = cache_path(gpu_key)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(json.dumps(res, indent=1))
    return res
