"""Probe for fused/NEXT.md's first step: TMA (128-byte swizzle) feeding wgmma's B operand.

One CTA, one warpgroup: x [T=50, K=64] BF16 is loaded by ``cp.async.bulk.tensor.2d`` into
a 64 x 64 box (rows 50..63 out of bounds: zero-filled by the unit) with 128-byte swizzle,
completion on an mbarrier; A [64, 64] is stored by the threads in the no-swizzle
core-matrix layout f4/f5 used; four ``wgmma.m64n64k16`` (k advanced by +32 bytes on the
swizzled descriptor's start address) give D = A x^T, compared with NumPy. Prints the
error of each (LBO, SBO) field pair tried for the swizzled descriptor.

    PYTHONPATH=. python3 docs/perf/prefill_h200/fused/probe_tma.py
"""

import ctypes

import cupy as cp
import ml_dtypes
import numpy as np

SRC = r"""
typedef unsigned int u32; typedef unsigned long long u64; typedef unsigned short bf16_t;
struct alignas(128) TMap { u64 v[16]; };
__device__ __forceinline__ u32 smem_u32(const void* p) {
  u32 a; asm("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(a) : "l"(p)); return a; }
__device__ __forceinline__ u64 desc(u32 addr, u32 lbo_f, u32 sbo_f, u32 swz) {
  return (u64)((addr & 0x3FFFF) >> 4) | ((u64)lbo_f << 16) | ((u64)sbo_f << 32) | ((u64)swz << 62); }
__device__ __forceinline__ void mma(float d[32], u64 da, u64 db) {
  asm volatile(
    "{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
    "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
    "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,"
    "%24,%25,%26,%27,%28,%29,%30,%31}, %32, %33, p, 1, 1, 0, 0;\n}\n"
    : "+f"(d[0]),"+f"(d[1]),"+f"(d[2]),"+f"(d[3]),"+f"(d[4]),"+f"(d[5]),"+f"(d[6]),"+f"(d[7]),
      "+f"(d[8]),"+f"(d[9]),"+f"(d[10]),"+f"(d[11]),"+f"(d[12]),"+f"(d[13]),"+f"(d[14]),"+f"(d[15]),
      "+f"(d[16]),"+f"(d[17]),"+f"(d[18]),"+f"(d[19]),"+f"(d[20]),"+f"(d[21]),"+f"(d[22]),"+f"(d[23]),
      "+f"(d[24]),"+f"(d[25]),"+f"(d[26]),"+f"(d[27]),"+f"(d[28]),"+f"(d[29]),"+f"(d[30]),"+f"(d[31])
    : "l"(da), "l"(db));
}
extern "C" __global__ void probe(const __grid_constant__ TMap tmap, const bf16_t* A, float* D,
                                 int lbo_f, int sbo_f) {
  __shared__ __align__(1024) bf16_t xs[64 * 64];
  __shared__ __align__(1024) bf16_t as[64 * 64];
  __shared__ __align__(8) u64 mbar;
  const int tid = threadIdx.x;
  const u32 mb = smem_u32(&mbar);
  if (tid == 0) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(mb) : "memory");
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  if (tid == 0) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(mb), "r"(64 * 64 * 2) : "memory");
    asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];"
      :: "r"(smem_u32(xs)), "l"(reinterpret_cast<u64>(&tmap)), "r"(0), "r"(0), "r"(mb) : "memory");
  }
  for (int i = tid; i < 64 * 64; i += 128) {
    const int r = i / 64, k = i % 64;
    *reinterpret_cast<bf16_t*>(reinterpret_cast<char*>(as) + (r / 8) * 1024 + (k / 8) * 128 + (r % 8) * 16 + (k % 8) * 2) = A[i];
  }
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  u32 done = 0;
  while (!done)
    asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], 0; selp.u32 %0, 1, 0, p; }"
                 : "=r"(done) : "r"(mb) : "memory");
  __syncthreads();
  float d[32];
  for (int i = 0; i < 32; ++i) d[i] = 0.f;
  asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
  for (int ks = 0; ks < 4; ++ks)
    mma(d, desc(smem_u32(as) + 256 * ks, 128 >> 4, 1024 >> 4, 0), desc(smem_u32(xs) + 32 * ks, lbo_f, sbo_f, 1));
  asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
  asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
  const int warp = tid / 32, lane = tid % 32, gid = lane / 4, tig = lane % 4;
  for (int j = 0; j < 8; ++j)
    for (int e = 0; e < 4; ++e)
      D[(16 * warp + gid + (e >= 2 ? 8 : 0)) * 64 + 8 * j + 2 * tig + (e & 1)] = d[4 * j + e];
}
"""


def main() -> None:
    from cupy.cuda import driver

    t, k = 50, 64
    rng = np.random.default_rng(0)
    a = rng.standard_normal((64, k)).astype(ml_dtypes.bfloat16)
    x = rng.standard_normal((t, k)).astype(ml_dtypes.bfloat16)
    want = np.zeros((64, 64), np.float32)
    want[:, :t] = a.astype(np.float32) @ x.astype(np.float32).T
    ad, xd = cp.asarray(a.view(np.uint16)), cp.asarray(x.view(np.uint16))

    lib = ctypes.CDLL("libcuda.so.1")
    enc = lib.cuTensorMapEncodeTiled
    enc.restype = ctypes.c_int
    # The map must be 64-byte aligned (cuTensorMapEncodeTiled); a ctypes array is only
    # 16-byte aligned: an aligned view of a larger buffer (the run below predates this).
    buf = ctypes.create_string_buffer(192)
    tmap = (ctypes.c_uint64 * 16).from_address((ctypes.addressof(buf) + 63) & ~63)
    dims = (ctypes.c_uint64 * 2)(k, t)
    strides = (ctypes.c_uint64 * 1)(k * 2)
    box = (ctypes.c_uint32 * 2)(64, 64)
    estr = (ctypes.c_uint32 * 2)(1, 1)
    # BF16 = 9, interleave none = 0, swizzle 128B = 3, L2 promotion 128B = 2, OOB fill zeros = 0
    rc = enc(
        ctypes.byref(tmap), 9, 2, ctypes.c_void_p(xd.data.ptr), dims, strides, box, estr, 0, 3, 2, 0
    )
    print("cuTensorMapEncodeTiled:", rc)
    mod = cp.RawModule(code=SRC, options=("-std=c++17", "-arch=sm_90a"))
    fn = int(mod.get_function("probe").kernel.ptr)
    for lbo_f, sbo_f in ((1, 64), (0, 64), (64, 1)):
        dd = cp.full((64, 64), np.nan, dtype=cp.float32)
        args = [
            tmap,
            ctypes.c_uint64(ad.data.ptr),
            ctypes.c_uint64(dd.data.ptr),
            ctypes.c_int32(lbo_f),
            ctypes.c_int32(sbo_f),
        ]
        argv = (ctypes.c_void_p * len(args))(*[ctypes.addressof(v) for v in args])
        driver.launchKernel(fn, 1, 1, 1, 128, 1, 1, 0, 0, ctypes.addressof(argv), 0)
        cp.cuda.Device().synchronize()
        got = dd.get()
        err = float(np.nanmax(np.abs(got - want))) if not np.isnan(got).all() else float("nan")
        print(
            f"LBO field {lbo_f}, SBO field {sbo_f}: max abs err {err:.3e}, NaN {int(np.isnan(got).sum())}"
        )


if __name__ == "__main__":
    main()
