// Tensor-core route for larger T: 64(N) x 64(T) x 64(K) block tiles, 4 warps of 32x32,
// mma.sync m16n8k16 BF16 -> FP32 (sm_80+).
//
// W is decoded into shared memory as its integer codes (exact in BF16), never as
// scale*code: the products code*x are then exact and each group's FP32 partial sum is
// scaled once per group in registers. x tiles are copied as raw BF16. Row stride 72
// halves (36 words) makes the 8 rows x 4 columns of a fragment load hit 32 banks.
#include "common.cuh"

__device__ __forceinline__ u32 pack_bf16x2(float lo, float hi) {
  return (u32)f2bf(lo) | ((u32)f2bf(hi) << 16);
}

template <int QT>
__global__ void __launch_bounds__(128) mma_q(const u8* __restrict__ qs, const u8* __restrict__ qh,
                                             const u8* __restrict__ sc, float tensor_scale, int N,
                                             int K, int kpad, const bf16_t* __restrict__ x,
                                             bf16_t* __restrict__ out, int T, int xvec) {
  constexpr int BM = 64, BN = 64, BK = 64, LDS = BK + 8;
  constexpr int GROUP = Fmt<QT>::GROUP;
  constexpr int G = GROUP == 0 ? BK : GROUP;  // k extent summed before scaling
  constexpr int NG = BK / G;                  // groups per k tile
  __shared__ __align__(16) bf16_t sW[BM * LDS];
  __shared__ __align__(16) bf16_t sX[BN * LDS];
  __shared__ float sS[BM][NG];

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int gid = lane >> 2, tig = lane & 3;
  const int wm = (warp >> 1) * 32, wn = (warp & 1) * 32;
  const int n0 = blockIdx.x * BM, t0 = blockIdx.y * BN;
  const WPlanes p{qs, qh, sc, kpad};

  // Fill assignment: thread -> (row r, 32-wide half h) of the W tile and of the x tile.
  const int r = tid >> 1, h = tid & 1;
  const int wrow = n0 + r, xrow = t0 + r;

  float acc[2][4][4];
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.f;

  for (int kt = 0; kt < kpad; kt += BK) {
    {
      uint4* dst = reinterpret_cast<uint4*>(sW + r * LDS + h * 32);
      if (wrow < N) {
        float v[32];
        Fmt<QT>::codes(p, wrow, kt / 32 + h, v);
#pragma unroll
        for (int i = 0; i < 4; ++i)
          dst[i] = make_uint4(pack_bf16x2(v[8 * i], v[8 * i + 1]), pack_bf16x2(v[8 * i + 2], v[8 * i + 3]),
                              pack_bf16x2(v[8 * i + 4], v[8 * i + 5]), pack_bf16x2(v[8 * i + 6], v[8 * i + 7]));
      } else {
#pragma unroll
        for (int i = 0; i < 4; ++i) dst[i] = make_uint4(0u, 0u, 0u, 0u);
      }
      if constexpr (GROUP != 0) {
        // This half covers k in [kt + 32h, kt + 32h + 32): groups (32h/G ...) of the tile.
#pragma unroll
        for (int j = 0; j < (32 >= G ? 32 / G : 1); ++j) {
          const int gi = (h * 32) / G + j;
          if (32 >= G || h == 0)
            sS[r][gi] = wrow < N ? Fmt<QT>::scale(p, wrow, kt / G + gi) : 0.f;
        }
      }
    }
    {
      u32 xw[16];
      if (xrow < T) {
        load_x32_raw(x + (size_t)xrow * K, kt + h * 32, K, xvec != 0, xw);
      } else {
#pragma unroll
        for (int i = 0; i < 16; ++i) xw[i] = 0u;
      }
      uint4* dst = reinterpret_cast<uint4*>(sX + r * LDS + h * 32);
#pragma unroll
      for (int i = 0; i < 4; ++i) dst[i] = make_uint4(xw[4 * i], xw[4 * i + 1], xw[4 * i + 2], xw[4 * i + 3]);
    }
    __syncthreads();

#pragma unroll
    for (int gi = 0; gi < NG; ++gi) {
      float gacc[2][4][4];
#pragma unroll
      for (int i = 0; i < 2; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j)
#pragma unroll
          for (int e = 0; e < 4; ++e) gacc[i][j][e] = 0.f;
#pragma unroll
      for (int ks = 0; ks < G / 16; ++ks) {
        const int kk = gi * G + ks * 16;
        u32 a[2][4];
#pragma unroll
        for (int mt = 0; mt < 2; ++mt) {
          const bf16_t* base = sW + (wm + mt * 16 + gid) * LDS + kk + 2 * tig;
          a[mt][0] = *reinterpret_cast<const u32*>(base);
          a[mt][1] = *reinterpret_cast<const u32*>(base + 8 * LDS);
          a[mt][2] = *reinterpret_cast<const u32*>(base + 8);
          a[mt][3] = *reinterpret_cast<const u32*>(base + 8 * LDS + 8);
        }
#pragma unroll
        for (int nt = 0; nt < 4; ++nt) {
          const bf16_t* bb = sX + (wn + nt * 8 + gid) * LDS + kk + 2 * tig;
          const u32 b0 = *reinterpret_cast<const u32*>(bb);
          const u32 b1 = *reinterpret_cast<const u32*>(bb + 8);
#pragma unroll
          for (int mt = 0; mt < 2; ++mt) mma_bf16_16816(gacc[mt][nt], a[mt], b0, b1);
        }
      }
#pragma unroll
      for (int mt = 0; mt < 2; ++mt) {
        const float s_lo = GROUP == 0 ? 1.f : sS[wm + mt * 16 + gid][gi];
        const float s_hi = GROUP == 0 ? 1.f : sS[wm + mt * 16 + gid + 8][gi];
#pragma unroll
        for (int nt = 0; nt < 4; ++nt) {
          acc[mt][nt][0] = fmaf(s_lo, gacc[mt][nt][0], acc[mt][nt][0]);
          acc[mt][nt][1] = fmaf(s_lo, gacc[mt][nt][1], acc[mt][nt][1]);
          acc[mt][nt][2] = fmaf(s_hi, gacc[mt][nt][2], acc[mt][nt][2]);
          acc[mt][nt][3] = fmaf(s_hi, gacc[mt][nt][3], acc[mt][nt][3]);
        }
      }
    }
    __syncthreads();
  }

#pragma unroll
  for (int mt = 0; mt < 2; ++mt)
#pragma unroll
    for (int nt = 0; nt < 4; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int n = n0 + wm + mt * 16 + gid + (e >= 2 ? 8 : 0);
        const int t = t0 + wn + nt * 8 + 2 * tig + (e & 1);
        if (n < N && t < T) out[(size_t)t * N + n] = f2bf(acc[mt][nt][e] * tensor_scale);
      }
}
