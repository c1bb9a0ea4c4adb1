"""Measure a GPU's ceilings: sustained read (uint4, >= 4 GiB), device copy, BF16 MMA rate.

Results are cached per GPU in ``$NINFER_CACHE`` (default ~/.cache/ninfer) and used
where the spec table has no measured read.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
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


def read_buffer(nbytes: int, seed: int) -> Any:
    """``nbytes`` of random int32 on the current device (never zeros: METHOD.md)."""
    cp = require_cupy()
    return cp.random.default_rng(seed).integers(0, 2**31, size=nbytes // 4, dtype=cp.int32)


def read_call(buf: Any, blocks_per_sm: int) -> Callable[[], None]:
    """One launch of the probe's uint4 read over ``buf``: SMs x blocks_per_sm x 512 threads.

    The sustained-read probe and the timer tests time this call.
    """
    cp = require_cupy()
    sms = int(cp.cuda.runtime.getDeviceProperties(cp.cuda.Device().id)["multiProcessorCount"])
    sink = cp.zeros(1, cp.uint32)
    kern = cp.RawKernel(_READ_SRC, "ninfer_read")
    n16 = np.uint64(buf.nbytes // 16)
    return lambda: kern((sms * blocks_per_sm,), (512,), (buf, n16, sink))


def run_probe(read_gib: float = 4.0, repeat: int = 10) -> dict[str, Any]:
    cp = require_cupy()
    dev = cp.cuda.Device()
    props = cp.cuda.runtime.getDeviceProperties(dev.id)
    sms = int(props["multiProcessorCount"])
    nbytes = int(read_gib * (1 << 30))
    buf = read_buffer(nbytes, seed=0)
    read: dict[str, float] = {}
    for per_sm in (4, 8, 16, 32):
        fn = read_call(buf, per_sm)
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
    from ..record import write_text_atomic  # a killed probe leaves no half-written cache

    write_text_atomic(p, json.dumps(res, indent=1))
    return res
