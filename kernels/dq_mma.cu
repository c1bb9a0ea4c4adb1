// dq_mma: the portable fused route (sm_80 and up, the users' sm_120 among them: mma.sync,
// ldmatrix and cp.async only; no wgmma, TMA or setmaxnreg). out = x · W^T with the weight
// decoded by the warps that multiply it, into mma.m16n8k16's A registers: the decoded
// weight never goes to memory (decode-to-BF16 + cuBLAS writes and reads it back).
//
// A block is 8 warps on a tile of 128 weight rows (8 bands of 16) x 32, 64 or 128 tokens
// (the warps' layout: the kernel's template). K goes in stages of 64 through an S-slot
// cp.async ring; a slot is one x stage (the tile's token rows, 64 k each, padded so that
// ldmatrix's eight row addresses fall in distinct banks) and one weight stage in dq_rs's
// layout (RsBand: the 8 bands' codes, then high bits, then scales, as stored), so dq_rs's
// decode (rs_frag) reads it unchanged: the same A fragments, the same numerics. Per k16 step a warp's decoded A
// fragments meet its tokens' B fragments (ldmatrix.x4: two 8-token tiles each).
//
// Grid: (row tiles x token tiles, row tiles fastest: neighbouring blocks share x's token
// tile in L2; splits). Split z takes 64-k stages [z G / splits, (z + 1) G / splits) of the
// G = kpad / 64; where the tiles alone leave SMs idle (down projections: N small, K
// long) the host splits K. A split tile's FP32 partials go to the workspace and the
// tile's last block to finish sums them in split order: the same bits whichever is last.
//
// Numerics are dq_rs's and dq_gemm's: each weight is scale x code rounded once to BF16
// (rs_frag; NVFP4 and BF16 exact); FP32 accumulation; NVFP4's tensor scale multiplies the
// FP32 sum; one rounding to BF16 at the end.
#include "common.cuh"
#include "sm80.cuh"
#include "dq_rs_tile.cuh"
#include "dq_rs_decode.cuh"

constexpr int MM_BK = 64;       // k per stage
constexpr int MM_ROWS = 128;    // weight rows per tile: 8 bands of 16
constexpr int MM_THREADS = 256;
constexpr int MM_XS = 144;      // bytes of one staged x row: 64 k of BF16 + 16 of padding
constexpr int MM_CS = 136;      // BF16 elements of one staged output row (128 + 8 padding)

// One ring slot: the x stage (TOK token rows) and the weight stage (8 bands).
template <int QT, int TOK>
struct MmSlot {
  using B = RsBand<QT>;
  static constexpr int XT = TOK * MM_XS;
  static constexpr int WST = 8 * (B::CODES + B::QH + B::SC);
  static constexpr int BYTES = XT + WST;
  static constexpr int XCH = TOK * MM_BK * 2 / 16;  // 16-byte chunks of an x stage
  static constexpr int WCH = WST / 16;              // ... and of a weight stage
};

// Chunk c (16 bytes) of a weight stage: its offset in the slot's weight stage, its band,
// and its source at stage 0 with the step per 64-k stage g (> 0: g x step; < 0: the
// scales, stored per 128-k storage stage, (g >> 1) x -step). A band's plane bytes are
// contiguous over K (formats.md); RsSmem reads codes, then high bits, then scales.
template <int QT>
__device__ __forceinline__ const u8* mm_wchunk(const WPlanes& p, int c, int bb, u32& dst, int& band, int& step) {
  using B = RsBand<QT>;
  constexpr int CC = 8 * B::CODES / 16, HC = 8 * B::QH / 16;
  if (c < CC) {
    band = c / (B::CODES / 16);
    const int off = (c % (B::CODES / 16)) * 16;
    dst = band * B::CODES + off, step = B::CODES;
    return p.qs + (size_t)(bb + band) * (p.kpad / MM_BK * B::CODES) + off;
  }
  if constexpr (B::QH > 0) {
    if (c < CC + HC) {
      const int cc = c - CC;
      band = cc / (B::QH / 16);
      const int off = (cc % (B::QH / 16)) * 16;
      dst = 8 * B::CODES + band * B::QH + off, step = B::QH;
      return p.qh + (size_t)(bb + band) * (p.kpad / MM_BK * B::QH) + off;
    }
  }
  if constexpr (B::SC > 0) {
    const int cc = c - CC - HC;
    band = cc / (B::SC / 16);
    const int off = (cc % (B::SC / 16)) * 16;
    dst = 8 * (B::CODES + B::QH) + band * B::SC + off, step = -B::SC;
    return p.sc + (size_t)(bb + band) * (p.kpad / (2 * MM_BK) * B::SC) + off;
  }
  band = 0, dst = 0, step = 0;  // (no such chunk: c < WCH is all codes)
  return p.qs;
}

// A split tile (splits > 1): this block's partial to the workspace, and true if it is the
// tile's last to finish, with acc then the sum of all partials in split order.
template <int MT, int NT>
__device__ __forceinline__ bool mm_fixup(float (&acc)[MT][NT][4], float* part, u32* cnt, int tile, int z,
                                         int splits, int tid, int* flag) {
  constexpr int F = MT * NT * 4;  // accumulators per thread
  float* const base = part + (size_t)tile * splits * (F * MM_THREADS) + tid;
#pragma unroll
  for (int f = 0; f < F; ++f) base[(size_t)z * (F * MM_THREADS) + f * MM_THREADS] = acc[f / (4 * NT)][f / 4 % NT][f % 4];
  __threadfence();  // the partial is visible device-wide before the count says so
  __syncthreads();
  if (tid == 0) *flag = atomicAdd(&cnt[tile], 1u) == (u32)(splits - 1);
  __syncthreads();
  if (!*flag) return false;
  __threadfence();
  // Split by split, all of a split's loads in flight together (a loop over the splits per
  // accumulator waited out an L2 round trip per accumulator); the sum stays in split
  // order, 0 + p_0 + p_1 + ...
#pragma unroll
  for (int f = 0; f < F; ++f) acc[f / (4 * NT)][f / 4 % NT][f % 4] = 0.f;
  for (int zz = 0; zz < splits; ++zz) {
    float v[F];
#pragma unroll
    for (int f = 0; f < F; ++f) v[f] = __ldcg(base + (size_t)zz * (F * MM_THREADS) + f * MM_THREADS);
#pragma unroll
    for (int f = 0; f < F; ++f) acc[f / (4 * NT)][f / 4 % NT][f % 4] += v[f];
  }
  return true;
}

// The tile's output through shared memory (cs: [TOK tokens][MM_CS]), times `ts`, rounded
// once to BF16: a token's 128 rows leave as 16-byte stores where out allows them. Warp
// (wm, wn) holds bands MT wm .. MT wm + MT - 1 and tokens 8 NT wn .. 8 NT wn + 8 NT - 1.
template <int MT, int NT>
__device__ __forceinline__ void mm_store(const float (&acc)[MT][NT][4], bf16_t* cs, float ts, bf16_t* out, int N,
                                         int T, int n0, int t0, int wm, int wn, int gid, int tig, int tid) {
  constexpr int TOK = 8 * NT * MT;
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e)
        cs[(8 * NT * wn + 8 * nt + 2 * tig + (e & 1)) * MM_CS + 16 * (MT * wm + mt) + gid + 8 * (e >> 1)] =
            f2bf(acc[mt][nt][e] * ts);
  __syncthreads();
  const bool vec = (reinterpret_cast<size_t>(out) & 15) == 0 && (N & 7) == 0;
  for (int i = tid; i < TOK * 16; i += MM_THREADS) {
    const int c = i >> 4, q = i & 15, t = t0 + c, n = n0 + 8 * q;
    if (t >= T || n >= N) continue;
    const bf16_t* src = cs + c * MM_CS + 8 * q;
    bf16_t* dst = out + (size_t)t * N + n;
    if (vec) {
      *reinterpret_cast<uint4*>(dst) = *reinterpret_cast<const uint4*>(src);
    } else {
      for (int e = 0; e < 8 && n + e < N; ++e) dst[e] = src[e];
    }
  }
}

// MT: bands a warp decodes and multiplies; the 8 warps are 8 / MT band groups x MT token
// groups, each token group NT 8-token MMA tiles: a tile of 128 rows x 8 NT MT tokens. A
// band's fragments are decoded by each of the MT token groups (MT times in all), and an x
// fragment is loaded by each of the 8 / MT band groups: at 128 tokens, MT = 2 halves the
// x reads from shared memory that MT = 1 (each warp all tokens) needs, for twice the
// decode; it measured slower than two 64-token tiles, and routes/dq_mma.py instantiates
// MT = 1 only (32 and 64 tokens). S: ring slots (S - 1 stages in flight). Dynamic shared
// memory: max(S slots, the output staging), routes/dq_mma.py. x: rows of xld elements,
// 16-byte aligned base and pitch (the host stages other x).
template <int QT, int MT, int NT, int S>
__global__ void __launch_bounds__(MM_THREADS, MT * NT <= 8 ? 2 : 1)
    dq_mma(const u8* __restrict__ qs, const u8* __restrict__ qh, const u8* __restrict__ sc, float tensor_scale,
           int N, int K, int kpad, const bf16_t* __restrict__ x, bf16_t* __restrict__ out, int T, int xld,
           float* __restrict__ part, u32* __restrict__ cnt, int splits) {
  constexpr int TOK = 8 * NT * MT;
  using L = MmSlot<QT, TOK>;
  constexpr int XR = (L::XCH + MM_THREADS - 1) / MM_THREADS, WR = (L::WCH + MM_THREADS - 1) / MM_THREADS;
  static_assert(S >= 3, "the ring needs a stage in flight while one is read");
  static_assert(8 % MT == 0 && NT % 2 == 0, "8 / MT band groups; x fragments two 8-token tiles a load");
  extern __shared__ __align__(16) u8 smem[];
  __shared__ int flag;

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, gid = lane >> 2, tig = lane & 3;
  const int wm = warp / MT, wn = warp % MT;
  const int tiles_x = (N + MM_ROWS - 1) / MM_ROWS, tile = blockIdx.x, z = blockIdx.y;
  const int n0 = (tile % tiles_x) * MM_ROWS, t0 = (tile / tiles_x) * TOK;
  const int G = kpad / MM_BK;
  const int g0 = (int)((long long)z * G / splits), nst = (int)((long long)(z + 1) * G / splits) - g0;
  const WPlanes p{qs, qh, sc, kpad};
  const u32 sm0 = smem_u32(smem);

  // What a stage's copies need that does not depend on the stage, once: this thread's x
  // chunks (row, 8 columns) and weight chunks (null: none, or a band past N, whose rows
  // are dropped; rows past T are not copied either: their output columns are dropped).
  const bf16_t* xsrc[XR];
  int xcol[XR];
  u32 xdst[XR];
#pragma unroll
  for (int r = 0; r < XR; ++r) {
    const int c = tid + r * MM_THREADS, row = c >> 3;
    xcol[r] = (c & 7) * 8;
    xdst[r] = row * MM_XS + (c & 7) * 16;
    xsrc[r] = c < L::XCH && t0 + row < T ? x + (size_t)(t0 + row) * xld + xcol[r] : nullptr;
  }
  const u8* wsrc[WR];
  u32 wdst[WR];
  int wstep[WR];
#pragma unroll
  for (int r = 0; r < WR; ++r) {
    const int c = tid + r * MM_THREADS;
    int band = 0;
    wsrc[r] = nullptr, wdst[r] = 0, wstep[r] = 0;
    if (c < L::WCH) {
      const u8* s = mm_wchunk<QT>(p, c, n0 / 16, wdst[r], band, wstep[r]);
      if (n0 + 16 * band < N) wsrc[r] = s;
    }
  }

  auto issue = [&](int i) {
    if (i < nst) {
      const int g = g0 + i;
      const u32 base = sm0 + (u32)(i % S) * L::BYTES;
      // Every stage but the one holding column K - 1 is whole: there a chunk is one
      // cp.async, without the zero-fill arithmetic (about 20 instructions a chunk in the
      // 64-token loop's SASS).
      const bool whole = (g + 1) * MM_BK <= K;
#pragma unroll
      for (int r = 0; r < XR; ++r) {
        if (xsrc[r] == nullptr) continue;
        if (whole) {
          cp_async16(base + xdst[r], xsrc[r] + g * MM_BK);
        } else {
          const int kc = g * MM_BK + xcol[r];
          const int bytes = max(0, min(16, (K - kc) * 2));  // columns >= K: zero-filled
          cp_async16(base + xdst[r], bytes ? xsrc[r] + g * MM_BK : x, bytes);
        }
      }
#pragma unroll
      for (int r = 0; r < WR; ++r) {
        if (wsrc[r] == nullptr) continue;
        const size_t off = wstep[r] > 0 ? (size_t)g * wstep[r] : (size_t)(g >> 1) * -wstep[r];
        cp_async16(base + L::XT + wdst[r], wsrc[r] + off);
      }
    }
    cp_async_commit();  // empty groups too: the wait count below stays uniform
  };

  float acc[MT][NT][4] = {};

  // ldmatrix.x4 of tokens 16 np .. 16 np + 15 (of this warp's token group) and k16 step
  // ks: lane l addresses token row 16 np + 8 ((l >> 3) >> 1) + (l & 7) at k 16 ks + 8
  // ((l >> 3) & 1): matrices (tokens 0..7, k 0..7), (0..7, 8..15), (8..15, 0..7), (8..15,
  // 8..15), the B fragments of two 8-token tiles.
  const u32 x_lane =
      (u32)((8 * NT * wn + 8 * ((lane >> 3) >> 1) + (lane & 7)) * MM_XS + 16 * ((lane >> 3) & 1));
  const u32 lane_codes = sm0 + L::XT + MT * wm * RsBand<QT>::CODES + lane * 16;
  const u32 nib = nib_mask(kpad);

#pragma unroll
  for (int i = 0; i < S - 1; ++i) issue(i);
  for (int i = 0; i < nst; ++i) {
    cp_async_wait<S - 2>();  // stage i has landed for this thread ...
    __syncthreads();         // ... and for every thread; stage i - 1's readers are done
    issue(i + S - 1);        // refills the slot stage i - 1 used
    const u32 slot = (u32)(i % S) * L::BYTES;
    u32 a[MT][4][4];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
      const RsSmem<QT> r(smem + slot + L::XT, lane_codes + mt * RsBand<QT>::CODES, slot, MT * wm + mt, (g0 + i) & 1,
                         gid, tig);
      rs_frag<QT>(r, nib, a[mt]);
    }
    const u32 xs = sm0 + slot + x_lane;
#pragma unroll
    for (int ks = 0; ks < 4; ++ks)
#pragma unroll
      for (int np = 0; np < NT / 2; ++np) {
        u32 b0, b1, b2, b3;
        ldsm_x4(xs + np * 16 * MM_XS + 32 * ks, b0, b1, b2, b3);
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          mma_bf16_16816(acc[mt][2 * np], a[mt][ks], b0, b1);
          mma_bf16_16816(acc[mt][2 * np + 1], a[mt][ks], b2, b3);
        }
      }
  }
  cp_async_wait<0>();
  __syncthreads();  // every warp is done with the ring: cs may overwrite it

  if (splits > 1 && !mm_fixup<MT, NT>(acc, part, cnt, tile, z, splits, tid, &flag)) return;
  mm_store<MT, NT>(acc, reinterpret_cast<bf16_t*>(smem), QT == QT_NVFP4 ? tensor_scale * NVFP4_DOWN : tensor_scale,
                   out, N, T, n0, t0, wm, wn, gid, tig, tid);
}
