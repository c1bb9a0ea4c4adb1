"""The tensor cores' peak through mma.sync (the only MMA dq_mma may use) beside cuBLAS BF16
(wgmma on sm_90) on the same GPU, in one process: the ceiling of issue 26's Deliver 6.

    python experiments/issue26/mma_peak.py [--json out.json]

The mma.sync kernel: 8 warps a block, 4 blocks an SM, each warp 8 independent
m16n8k16 BF16 MMAs (FP32 accumulate) per step from registers, no memory traffic in the
loop: the issue rate of HMMA alone. Operands are random BF16 bits read once (an MMA on
zeros may run at other power and clocks, device/METHOD.md). cuBLAS: torch.mm on random
8192^3 BF16. Both: CUDA events around 20 launches after 3 warmups, the median of 5; the SM
clock NVML reports beside each.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections.abc import Callable

import cupy as cp
import numpy as np

SRC = r"""
extern "C" __global__ void __launch_bounds__(256) mma_peak(const unsigned* __restrict__ in,
                                                          float* __restrict__ out, int steps) {
  const int lane = threadIdx.x & 31;
  unsigned a[4], b[2];
  for (int i = 0; i < 4; ++i) a[i] = in[(lane * 6 + i) & 1023];
  for (int i = 0; i < 2; ++i) b[i] = in[(lane * 6 + 4 + i) & 1023];
  float c[8][4] = {};
  for (int s = 0; s < steps; ++s) {
#pragma unroll
    for (int j = 0; j < 8; ++j)
      asm volatile(
          "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
          "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
          : "+f"(c[j][0]), "+f"(c[j][1]), "+f"(c[j][2]), "+f"(c[j][3])
          : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  }
  float sum = 0.f;
  for (int j = 0; j < 8; ++j) sum += c[j][0] + c[j][1] + c[j][2] + c[j][3];
  out[blockIdx.x * blockDim.x + threadIdx.x] = sum;  // keeps the MMAs live
}
"""


def _sm_clock_mhz() -> int | None:
    try:
        import pynvml

        pynvml.nvmlInit()
        h = pynvml.nvmlDeviceGetHandleByIndex(cp.cuda.Device().id)
        return int(pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM))
    except Exception:  # the clock is a note beside the figure, not the figure
        return None


def _time(call: Callable[[], object], launches: int = 20) -> float:
    """Median of 5 (seconds per launch) of `launches` back-to-back calls."""
    for _ in range(3):
        call()
    times = []
    for _ in range(5):
        start, stop = cp.cuda.Event(), cp.cuda.Event()
        start.record()
        for _ in range(launches):
            call()
        stop.record()
        stop.synchronize()
        times.append(cp.cuda.get_elapsed_time(start, stop) / 1e3 / launches)
    return statistics.median(times)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", help="write the figures here")
    args = ap.parse_args(argv)
    dev = cp.cuda.Device()
    sms = int(dev.attributes["MultiProcessorCount"])
    rng = np.random.default_rng(26)
    bits = rng.integers(0x3C00, 0x4000, size=2048, dtype=np.uint16)  # BF16 in [0.5, 2)
    inp = cp.asarray(bits.view(np.uint32))
    blocks, steps = 4 * sms, 4096
    out = cp.empty(blocks * 256, dtype=cp.float32)
    kern = cp.RawKernel(SRC, "mma_peak")
    sec = _time(lambda: kern((blocks,), (256,), (inp, out, np.int32(steps))))
    clock = _sm_clock_mhz()
    macs = blocks * 8 * steps * 8 * 16 * 8 * 16  # warps x steps x MMAs x m x n x k
    res = {
        "gpu": cp.cuda.runtime.getDeviceProperties(dev.id)["name"].decode(),
        "sms": sms,
        "mma_sync_tflops": round(2 * macs / sec / 1e12, 1),
        "mma_sync_sm_clock_mhz": clock,
    }
    if clock:
        res["mma_sync_macs_per_clock_per_sm"] = round(macs / sec / (clock * 1e6) / sms)
    try:
        import torch

        n = 8192
        g = torch.Generator(device="cuda").manual_seed(26)
        a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16, generator=g)
        b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16, generator=g)
        sec_b = _time(lambda: torch.mm(a, b))
        res["cublas_bf16_8192_tflops"] = round(2 * n**3 / sec_b / 1e12, 1)
        res["cublas_sm_clock_mhz"] = _sm_clock_mhz()
    except ImportError as e:
        res["cublas_bf16_8192_tflops"] = f"not run: {e}"
    print(json.dumps(res, indent=1))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(res, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
