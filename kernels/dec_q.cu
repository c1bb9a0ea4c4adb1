// Decode route for small T (1 ... 64): mma.sync m16n8k16 with W as the A operand and
// x as the B operand, fed through a cp.async ring in shared memory.
//
// Why this shape: at T <= 64 the op is a stream over W, and a stream is only as fast
// as the bytes it keeps in flight (H200: ~4.5 TB/s x ~1 us => tens of KB per SM) and
// as contiguous as HBM wants them. The planes are stored band-tiled (formats.md): one
// stage (128 k) of one 16-row band is one contiguous block, copied with 16-byte
// cp.async straight into the shared-memory order the fragments are read in; S-1 stages
// per warp are in flight at no register cost. (Row-major planes, 16 rows x 64 bytes a stage
// 2.5 KB apart, ran BF16 at half of cuBLAS: docs/perf/decode_h200.md@8fe804d, "probe".)
// Each weight byte is read once, decoded with a few integer ops into BF16 pairs and fed
// to the tensor core, which does the T-fold reuse FP32 FMAs could not afford.
// A block is WK k-groups x WR row-warps: the WR warps of a k-group share its staged x
// tile (x traffic from L2 shrinks WR-fold, which matters at larger T), the WK groups
// split K and are reduced through shared memory at the end in a fixed order
// (bitwise-repeatable, no atomics).
//
// The k order inside an MMA is free: a thread feeds the A slots of its lane-quad column
// (tig) and the matching B slots, so any physical k it assigns to a slot is summed
// correctly as long as A and B agree. The 4-bit and W8 code planes are stored in the
// MMA's own fragment order (formats.md: a lane's 16 bytes of a slab, or of a W8 group,
// are its A registers' codes; a 4-bit register's pair at nibbles r, r + 4), so x's B
// fragments are the standard ones, two ldmatrix.x4 per 8 tokens and slab. BF16 lanes
// take 16 contiguous k (natural pairs) and x is loaded to match (xoff, bfrag).
//
// Exactness (formats.md): integer codes reach the tensor core as exact BF16 values, each
// group's FP32 partial is scaled once (Q4/Q5/Q6: one group per slab; W8: two). NVFP4's
// e2m1 x e4m3 product has at most 6 significant bits, so it is exact in BF16 and the
// scale is folded into A; the FP32 tensor scale is applied last.
#include "common.cuh"
#include "sm80.cuh"
#include "dec_q_decode.cuh"

// Bytes of one staged x row: 128 k of BF16 plus 16 bytes of padding, so the 16-byte
// pieces a B-fragment load takes from 8 token rows (ldmatrix's row addresses, or BF16's
// LDS.128s) fall in distinct banks.
#define DEC_XS 272

// x rows whose base or pitch is not 16-byte aligned (a strided view): no cp.async, plain
// loads, columns >= K as zero. Out of line: the aligned path is the one that runs.
__device__ __noinline__ void copy_x8_unaligned(u8* dst, const bf16_t* g, int kc, int K) {
  u32 w[4];
#pragma unroll
  for (int q = 0; q < 4; ++q) {
    const int kk = kc + 2 * q;
    w[q] = (kk < K ? (u32)g[2 * q] : 0u) | ((kk + 1 < K ? (u32)g[2 * q + 1] : 0u) << 16);
  }
  *reinterpret_cast<uint4*>(dst) = make_uint4(w[0], w[1], w[2], w[3]);
}

// The ring's barrier, scoped to one k-group: a group's warps read only the x tile its
// warps copied and the weights each warp copied itself, so the WK groups need not wait for
// each other every stage (a block-wide barrier ties each stage of all WK x WR warps to the
// slowest one; at T <= 8, WR = 1, the group is one warp). Barrier 0 is __syncthreads.
template <int WR, int WK>
__device__ __forceinline__ void group_sync(int grp) {
  if constexpr (WK == 1) {
    __syncthreads();
  } else if constexpr (WR == 1) {
    __syncwarp();
  } else {
    asm volatile("bar.sync %0, %1;" ::"r"(1 + grp), "n"(32 * WR) : "memory");
  }
}

// NT: 8-token MMA column tiles (T tile = 8 NT); MT: 16-row MMA tiles per warp; WR:
// row-warps sharing a staged x tile; WK: k-groups splitting K; S: ring stages (S - 1 in
// flight). Dynamic shared memory: max(S * stage bytes, the reduction buffer), see
// ninfer/routes/dec_q.py::shared_bytes (the same formula).
template <int QT, int NT, int MT, int WR, int WK, int S>
__global__ void __launch_bounds__(32 * WR * WK) dec_q(const u8* __restrict__ qs, const u8* __restrict__ qh,
                                                      const u8* __restrict__ sc, float tensor_scale, int N,
                                                      int K, int kpad, const bf16_t* __restrict__ x,
                                                      bf16_t* __restrict__ out, int T, int xvec) {
  using D = Dec<QT>;
  constexpr int NW = WR * WK, R = 16 * MT * WR, TT = 8 * NT;
  static_assert(S >= 3, "the ring needs a stage in flight while one is read");
  static_assert(WK <= 15, "a named barrier per k-group (ids 1 ... 15)");
  extern __shared__ __align__(128) u8 smem[];  // 128: the codes blocks start on 128-byte lines

  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int gid = lane >> 2, tig = lane & 3;
  const int grp = warp / WR, wr = warp % WR;
  const int n0 = blockIdx.x * R, t0 = blockIdx.y * TT;
  const int n_w = n0 + 16 * MT * wr;   // first row of this warp's m-tiles
  const int txa = min(TT, T);          // x rows allocated per tile (the launcher's formula)
  const int txc = min(TT, T - t0);     // x rows of this block's tile
  const int XT = txa * DEC_XS;
  // A stage: the WK x tiles, then per warp its MT codes blocks and their tails, each part
  // rounded up to 128 bytes: every codes block starts on a 128-byte line at every T (odd T,
  // 16 or 64 bytes off one, ran 8-12 % over even T: docs/perf/decode_h200.md, "Deliver 4").
  constexpr int WREG = (MT * D::WBYTES + 127) / 128 * 128;
  const int XW = (WK * XT + 127) & ~127;
  const int SB = XW + NW * WREG;
  const int nst = kpad / 128;
  const int iters = (nst + WK - 1) / WK;
  const WPlanes p{qs, qh, sc, kpad};
  const bool vec = xvec != 0;
  const u32 nib = nib_mask(kpad);

  // Everything a stage's copies need that does not depend on the stage, computed once:
  // per-lane sources (a stage adds st * stride) and shared-space destinations.
  // A band past N (the last block's) copies the last band instead: a read in bounds, its
  // rows dropped at the store. A per-band predicate on each copy held registers across the
  // loop (NVRTC 13.0 spilled the Q4 head's two: two local loads a stage).
  typename D::Src src[MT];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) D::src(p, min(n_w + 16 * mt, (N - 1) & ~15), lane, src[mt]);
  const u32 sm0 = smem_u32(smem);
  const u32 w_off = XW + warp * WREG;
  // x chunks (16 bytes = 8 k) of this k-group's tile that this lane copies each stage:
  // chunk r is token row (c0 >> 4) + 2 WR r of the tile at column 8 (c0 & 15) of the
  // stage; rows past the tile's tokens are not copied (their B columns are zeros).
  constexpr int XCH = (TT * 16 + 32 * WR - 1) / (32 * WR);
  const int c0 = wr * 32 + lane;
  const bf16_t* xg = x + (size_t)(t0 + min(c0 >> 4, txc - 1)) * K + (c0 & 15) * 8;
  const u32 xs0 = grp * XT + (c0 >> 4) * DEC_XS + (c0 & 15) * 16;

  auto issue = [&](int i, u32 base) {
    const int st = i * WK + grp;
    if (i < iters && st < nst) {
      // Chunk r: its source, its slot, whether this lane copies it.
      auto g_of = [&](int r) { return xg + (size_t)r * 2 * WR * K + st * 128; };
      auto dst_of = [&](int r) { return base + xs0 + r * 2 * WR * DEC_XS; };
      auto mine = [&](int r) { return c0 + 32 * WR * r < txc * 16; };
      // Every stage but the one holding column K - 1 is whole: there a chunk is one
      // cp.async, predicated, without the zero-fill arithmetic (issue slots are the
      // decode's bound).
      if (vec && (st + 1) * 128 <= K) {
#pragma unroll
        for (int r = 0; r < XCH; ++r)
          if (32 * WR * r + 32 * wr < txc * 16)  // some lane of the warp has chunk r
            cp_async16_if(dst_of(r), g_of(r), mine(r));
      } else {
#pragma unroll
        for (int r = 0; r < XCH; ++r) {
          if (!mine(r)) continue;
          const int kc = (c0 & 15) * 8 + st * 128;  // column of the chunk in its row
          const bf16_t* g = g_of(r);
          const u32 dst = dst_of(r);
          if (vec) {
            const int bytes = max(0, min(16, (K - kc) * 2));  // columns >= K: zero-filled
            cp_async16(dst, bytes ? g : x, bytes);
          } else {
            copy_x8_unaligned(smem + (dst - sm0), g, kc, K);
          }
        }
      }
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
        D::copy(src[mt], st, lane, base + w_off + mt * D::QBYTES, base + w_off + MT * D::QBYTES + mt * D::TBYTES);
    }
    cp_async_commit();  // empty groups too: the wait count below stays uniform
  };

  float acc[MT][NT][4];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[mt][nt][e] = 0.f;

  // Ring slots rotate by offset: slot(i) = i mod S, without a division in the loop.
#pragma unroll
  for (int i = 0; i < S - 1; ++i) issue(i, sm0 + i * SB);
  u32 rd = 0, wr_slot = (S - 1) * SB;  // byte offsets of the slots read and refilled
  for (int i = 0; i < iters; ++i) {
    cp_async_wait<S - 2>();  // stage i has landed for this thread ...
    group_sync<WR, WK>(grp);  // ... and for its k-group; stage i-1's readers there are done
    issue(i + S - 1, sm0 + wr_slot);  // refills the slot stage i-1 used
    wr_slot = rd;
    const u8* base = smem + rd;
    rd = rd + SB == S * SB ? 0 : rd + SB;
    if (i * WK + grp >= nst) continue;
    const u8* xs = base + grp * XT;
    const u8* ws = base + w_off;
    const u32 xsa = sm0 + (u32)(xs - smem);
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      u32 b[NT][4][2];
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) {
        const int tr = 8 * nt + gid;
        if constexpr (D::XNAT) {
          if (nt == 0 || 8 * nt < txc) {  // a tile has at least one token
            // Lane l addresses token row 8 nt + (l & 7) at k 64 j + 8 (l >> 3) (+ 32 for
            // steps 2, 3); rows past the tile's tokens read its last one (their output
            // columns are dropped).
            const int xr = min(8 * nt + (lane & 7), txc - 1);
            const u32 xa = xsa + xr * DEC_XS + 2 * (64 * j + 8 * (lane >> 3));
            ldsm_x4(xa, b[nt][0][0], b[nt][0][1], b[nt][1][0], b[nt][1][1]);
            ldsm_x4(xa + 64, b[nt][2][0], b[nt][2][1], b[nt][3][0], b[nt][3][1]);
          } else {
#pragma unroll
            for (int ks = 0; ks < 4; ++ks) b[nt][ks][0] = b[nt][ks][1] = 0u;
          }
        } else if (tr < txc) {
          u32 X[8];
#pragma unroll
          for (int run = 0; run < 2; ++run) {
            const uint4 q = lds16(xs + tr * DEC_XS + 2 * (64 * j + D::xoff(tig, run)));
            X[4 * run] = q.x; X[4 * run + 1] = q.y; X[4 * run + 2] = q.z; X[4 * run + 3] = q.w;
          }
          D::bfrag(X, b[nt]);
        } else {  // tokens past T: zero columns, no loads and no permutes
#pragma unroll
          for (int ks = 0; ks < 4; ++ks) b[nt][ks][0] = b[nt][ks][1] = 0u;
        }
      }
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        typename D::Raw raw;
        D::read(ws + mt * D::QBYTES, ws + MT * D::QBYTES + mt * D::TBYTES, lane, j, raw);
        u32 a[4][4];
        D::frag(raw, nib, a);
        if constexpr (D::GSTEP == 0) {
#pragma unroll
          for (int ks = 0; ks < 4; ++ks)
#pragma unroll
            for (int nt = 0; nt < NT; ++nt) mma_bf16_16816(acc[mt][nt], a[ks], b[nt][ks][0], b[nt][ks][1]);
        } else {
#pragma unroll
          for (int g = 0; g < 4 / D::GSTEP; ++g) {
            const float s_lo = D::scale(raw, 0, g), s_hi = D::scale(raw, 1, g);
#pragma unroll
            for (int nt = 0; nt < NT; ++nt) {
              float part[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
              for (int ks = g * D::GSTEP; ks < (g + 1) * D::GSTEP; ++ks)
                mma_bf16_16816(part, a[ks], b[nt][ks][0], b[nt][ks][1]);
              acc[mt][nt][0] = fmaf(s_lo, part[0], acc[mt][nt][0]);
              acc[mt][nt][1] = fmaf(s_lo, part[1], acc[mt][nt][1]);
              acc[mt][nt][2] = fmaf(s_hi, part[2], acc[mt][nt][2]);
              acc[mt][nt][3] = fmaf(s_hi, part[3], acc[mt][nt][3]);
            }
          }
        }
      }
    }
  }
  cp_async_wait<0>();
  __syncthreads();

  // Fixed-order reduction over the WK k-groups (C fragment: rows gid / gid+8, tokens
  // 2tig, 2tig+1), through the drained ring.
  float* red = reinterpret_cast<float*>(smem);
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int r = 16 * MT * wr + 16 * mt + gid + (e >= 2 ? 8 : 0);
        red[(grp * R + r) * TT + 8 * nt + 2 * tig + (e & 1)] = acc[mt][nt][e];
      }
  __syncthreads();
  for (int i = threadIdx.x; i < R * TT; i += 32 * NW) {
    const int r = i % R, c = i / R;
    const int n = n0 + r, t = t0 + c;
    if (n < N && t < T) {
      float v = red[r * TT + c];
#pragma unroll
      for (int g = 1; g < WK; ++g) v += red[(g * R + r) * TT + c];
      out[(size_t)t * N + n] = f2bf(v * (QT == QT_NVFP4 ? tensor_scale * NVFP4_DOWN : tensor_scale));
    }
  }
}
