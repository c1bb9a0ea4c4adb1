// GEMV-style route for small T: one warp per output row, TT tokens per block column.
//
// Decode is memory-bound: each weight byte is read once (16-byte loads, one 32-weight
// chunk per lane per step) and each chunk is reused for TT tokens; x is tiny and stays
// in L1/L2. Within a group the code*x products are summed in FP32, then scaled, so the
// order of additions is fixed: repeated runs are bitwise identical.
#include "common.cuh"

template <int QT, int TT>
__global__ void __launch_bounds__(128) gemv_q(const u8* __restrict__ qs, const u8* __restrict__ qh,
                                              const u8* __restrict__ sc, float tensor_scale, int N,
                                              int K, int kpad, const bf16_t* __restrict__ x,
                                              bf16_t* __restrict__ out, int T, int xvec) {
  constexpr int WARPS = 4;
  constexpr int GROUP = Fmt<QT>::GROUP;
  constexpr int SUB = (GROUP == 0 || GROUP >= 32) ? 32 : GROUP;  // weights per scale in a chunk
  const int lane = threadIdx.x & 31;
  const int row = blockIdx.x * WARPS + (threadIdx.x >> 5);
  const int t0 = blockIdx.y * TT;
  if (row >= N) return;  // whole warp leaves together: no barrier below
  const WPlanes p{qs, qh, sc, kpad};

  float acc[TT];
#pragma unroll
  for (int t = 0; t < TT; ++t) acc[t] = 0.f;

  const int nchunks = kpad / 32;
  for (int c = lane; c < nchunks; c += 32) {
    float v[32];
    Fmt<QT>::codes(p, row, c, v);
    float s[32 / SUB];
#pragma unroll
    for (int j = 0; j < 32 / SUB; ++j)
      s[j] = GROUP == 0 ? 1.f : Fmt<QT>::scale(p, row, (c * 32 + j * SUB) / (GROUP == 0 ? 1 : GROUP));
#pragma unroll
    for (int t = 0; t < TT; ++t) {
      if (t0 + t < T) {
        u32 xw[16];
        load_x32_raw(x + (size_t)(t0 + t) * K, c * 32, K, xvec != 0, xw);
#pragma unroll
        for (int j = 0; j < 32 / SUB; ++j) {
          float part = 0.f;
#pragma unroll
          for (int i = j * SUB / 2; i < (j + 1) * SUB / 2; ++i) {
            part = fmaf(v[2 * i], __uint_as_float(xw[i] << 16), part);
            part = fmaf(v[2 * i + 1], __uint_as_float(xw[i] & 0xffff0000u), part);
          }
          acc[t] = fmaf(s[j], part, acc[t]);
        }
      }
    }
  }
#pragma unroll
  for (int t = 0; t < TT; ++t) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) acc[t] += __shfl_xor_sync(0xffffffffu, acc[t], o);
  }
  if (lane < TT && t0 + lane < T) {
    float r = acc[0];
#pragma unroll
    for (int t = 1; t < TT; ++t)
      if (lane == t) r = acc[t];
    out[(size_t)(t0 + lane) * N + row] = f2bf(r * tensor_scale);
  }
}
