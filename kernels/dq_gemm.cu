// Prefill route (large T), first half: dequantize a band of weight rows into a
// row-major BF16 buffer [rows][kpad]; the second half is a cuBLAS BF16 GEMM on it
// (ninfer/routes/dq_gemm.py).
//
// Why: at large T the op is compute-bound and cuBLAS runs BF16 at ~0.8 PFLOP/s on this
// class of GPU (wgmma + TMA on sm_90), which a portable mma.sync kernel cannot reach;
// decoding the weight once per call costs ~2 bytes written per weight and is amortized
// over T tokens. The launcher cuts N into bands small enough to stay in L2, so the GEMM
// reads the decoded band from L2, not from HBM.
//
// Numerics (docs/routes.md): each weight is scale x code computed exactly in FP32
// (FP16 scale x code: at most 19 significant bits) and rounded once to BF16 (round to
// nearest even), which cuBLAS then multiplies exactly and accumulates in FP32.
// NVFP4's e4m3 x e2m1 product is exact in BF16; its FP32 tensor scale is cuBLAS's alpha.
// BF16 weights are copied bit for bit.
#include "common.cuh"

// One thread per (row, 32-k chunk), the 16 rows of a storage band fastest: a warp is
// 16 rows x 2 chunks, so it reads one contiguous run of the band-tiled planes (formats.md)
// and writes 16 rows x 128 contiguous bytes (whole lines).
template <int QT>
__global__ void __launch_bounds__(256) dq_gemm(const u8* __restrict__ qs, const u8* __restrict__ qh,
                                               const u8* __restrict__ sc, int kpad, int n0, int rows,
                                               bf16_t* __restrict__ ws) {
  constexpr int G = Fmt<QT>::GROUP;
  const int chunks = kpad / 32;
  // 32-bit index: a band holds at most ~BAND_BYTES / 64 chunks (the launcher's budget).
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  const int per_band = 16 * chunks;
  const int band = i / per_band, rem = i - band * per_band;
  const int r = 16 * band + (rem & 15), c = rem >> 4, n = n0 + r;
  if (r >= rows) return;
  const WPlanes p{qs, qh, sc, kpad};
  float v[32];
  Fmt<QT>::codes(p, n, c, v);
  if constexpr (G >= 32) {  // one group covers the chunk
    const float s = Fmt<QT>::scale(p, n, 32 * c / G);
#pragma unroll
    for (int e = 0; e < 32; ++e) v[e] *= s;
  } else if constexpr (G == 16) {
    const float s0 = Fmt<QT>::scale(p, n, 2 * c), s1 = Fmt<QT>::scale(p, n, 2 * c + 1);
#pragma unroll
    for (int e = 0; e < 16; ++e) {
      v[e] *= s0;
      v[16 + e] *= s1;
    }
  }
  u32 h[16];  // cvt.rn.bf16x2.f32: two round-to-nearest-even conversions in one instruction
#pragma unroll
  for (int e = 0; e < 16; ++e) asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(h[e]) : "f"(v[2 * e + 1]), "f"(v[2 * e]));
  uint4* dst = reinterpret_cast<uint4*>(ws + (size_t)r * kpad + 32 * c);
#pragma unroll
  for (int q = 0; q < 4; ++q) dst[q] = make_uint4(h[4 * q], h[4 * q + 1], h[4 * q + 2], h[4 * q + 3]);
}
