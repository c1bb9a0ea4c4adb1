// Prefill route (large T), first half: dequantize a band of weight rows into a
// row-major BF16 buffer [rows][kpad]; the second half is a cuBLAS BF16 GEMM on it
// (ninfer/routes/dq_gemm.py).
//
// Why: at large T the op is compute-bound and cuBLAS runs BF16 at ~0.8 PFLOP/s on this
// class of GPU (wgmma + TMA on sm_90), which a portable mma.sync kernel cannot reach;
// decoding the weight once per call costs 2 bytes written (and read back by the GEMM)
// per weight, amortized over T tokens. What it costs is measured in
// docs/perf/prefill_h200.md@8fe804d ("The floor"; versions table, v2): the decoded bands
// mostly round-trip through HBM (ncu, Q4 [14336,5120] T = 1024: 147 MB decoded, 73 MB of
// DRAM writes and 236 MB of DRAM reads for 39 MB of weight), so at small T the route is
// bound by that traffic.
//
// Numerics (docs/routes.md): each weight is scale x code computed exactly in FP32
// (FP16 scale x code: at most 19 significant bits) and rounded once to BF16 (round to
// nearest even), which cuBLAS then multiplies exactly and accumulates in FP32.
// NVFP4's e4m3 x e2m1 product is exact in BF16; its FP32 tensor scale is cuBLAS's alpha.
// BF16 weights are copied bit for bit.
#include "common.cuh"

// A block decodes a 16-row x 512-k tile: thread (row, chunk) decodes one 32-k chunk of
// one row (the 16 rows of a storage band fastest, so a warp reads one contiguous run of
// the band-tiled planes, formats.md) into shared memory; the tile then leaves as 16
// rows x 1 KB, each warp storing 512 contiguous bytes. (Storing each thread's 64 bytes
// straight from registers scattered every store over 16 lines: ncu showed the decode
// bound by L1/L2 store throughput at 22 % of DRAM bandwidth.)
constexpr int DQ_CH = 16;                 // chunks (of 32 k) per tile
constexpr int DQ_PITCH = DQ_CH * 32 + 8;  // bf16 per staged row; +16 B spreads the rows over banks

template <int QT>
__global__ void __launch_bounds__(256) dq_gemm(const u8* __restrict__ qs, const u8* __restrict__ qh,
                                               const u8* __restrict__ sc, int kpad, int n0, int rows,
                                               bf16_t* __restrict__ ws) {
  constexpr int G = Fmt<QT>::GROUP;
  __shared__ __align__(16) bf16_t tile[16 * DQ_PITCH];
  const int chunks = kpad / 32;
  const int r0 = 16 * blockIdx.x, c0 = DQ_CH * blockIdx.y;
  const int rl = threadIdx.x & 15, cl = threadIdx.x >> 4;
  const int r = r0 + rl, c = c0 + cl, n = n0 + r;
  if (r < rows && c < chunks) {
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
    u32 h[16];
#pragma unroll
    for (int e = 0; e < 16; ++e) h[e] = bf2_pack(v[2 * e], v[2 * e + 1]);
    uint4* dst = reinterpret_cast<uint4*>(tile + rl * DQ_PITCH + 32 * cl);
#pragma unroll
    for (int q = 0; q < 4; ++q) dst[q] = make_uint4(h[4 * q], h[4 * q + 1], h[4 * q + 2], h[4 * q + 3]);
  }
  __syncthreads();
  const int cols16 = min(DQ_CH, chunks - c0) * 4;  // 16-byte pieces per row in this tile
#pragma unroll
  for (int it = 0; it < 4; ++it) {
    const int idx = it * 256 + threadIdx.x, row = idx >> 6, col = idx & 63;
    if (col < cols16 && r0 + row < rows)
      *reinterpret_cast<uint4*>(ws + (size_t)(r0 + row) * kpad + 32 * c0 + 8 * col) =
          *reinterpret_cast<const uint4*>(tile + row * DQ_PITCH + 8 * col);
  }
}
