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

__device__ __forceinline__ uint4 lds16(const u8* p) { return *reinterpret_cast<const uint4*>(p); }
__device__ __forceinline__ u32 lds4(const u8* p) { return *reinterpret_cast<const u32*>(p); }
__device__ __forceinline__ u32 lds2(const u8* p) { return *reinterpret_cast<const unsigned short*>(p); }

// Per-format decoders. A thread of lane-quad column tig owns, in slab s (k = 64 s ...),
// the k of its fragment slots (XNAT below: the MMA's own; BF16: xoff()). copy() issues
// the cp.async of one stage (two slabs) of one 16-row band (contiguous in storage) into
// shared memory, in storage order: its codes into QBYTES at q, the rest (high bits,
// scales) into TBYTES at t (WBYTES = QBYTES + TBYTES); read() takes a lane's raw bits of
// slab j (rows gid and gid + 8) from there; frag() builds the A registers of the slab's four
// k-steps: a[ks][0] / a[ks][1] = rows 0 / 1 at slots (2tig, 2tig+1), a[ks][2] / a[ks][3]
// at (2tig+8, 2tig+9). GSTEP: k-steps per scaled group (0: the scale is inside A or none).
// XNAT: slot k of step ks is k 16 ks + k of the slab (the 4-bit codes and W8: x's B
// fragments by ldmatrix); otherwise xoff() and bfrag() say which k a lane's slots hold.
template <int QT> struct Dec;

template <int HB, int OFF> struct Dec4 {
  static constexpr int GSTEP = 4;
  static constexpr bool XNAT = true;
  struct Raw {
    u32 q[4];     // word ks: the lane's codes of k step ks (formats.md)
    u32 h[2];     // the lane's high-bit words of the slab (Q5: h[0]; Q6: k steps 0, 1 and 2, 3)
    float s[2];
  };
  // Stage layout (one m-tile, 128 k): codes QS [2 slabs][32 lanes][16 B] (a lane's
  // fragment codes: one conflict-free LDS.128); tail QH [2 slabs][32 lanes][4 or 8 B] (the
  // lane's high bits, formats.md), scales [16 rows][4 B].
  static constexpr int QH_B = HB * 16, SC_B = 4;
  static constexpr int QBYTES = 1024, TBYTES = 16 * QH_B + 16 * SC_B, WBYTES = QBYTES + TBYTES;
  // Per-lane sources of one m-tile (a 16-row band), computed once; a stage adds st times
  // its block size. Storage order makes every stage block contiguous (formats.md).
  struct Src {
    const u8* q;
    const u8* h;
    const u8* s;
  };
  __device__ __forceinline__ static void src(const WPlanes& p, int n_mt, int lane, Src& g) {
    g.q = p.qs + band_base(n_mt, p.kpad / 2) + lane * 16;
    if constexpr (HB > 0) g.h = p.qh + band_base(n_mt, p.kpad / 8 * HB) + lane * 16;
    g.s = p.sc + band_base(n_mt, p.kpad / 32) + lane * 16;
  }
  __device__ __forceinline__ static void copy(const Src& g, int st, int lane, u32 q, u32 t, bool ok) {
#pragma unroll
    for (int j = 0; j < 2; ++j) cp_async16_if(q + j * 512 + lane * 16, g.q + st * 1024 + j * 512, ok);
    if constexpr (HB == 1) cp_async16_if(t + lane * 16, g.h + st * 256, ok && lane < 16);
    if constexpr (HB == 2) cp_async16_if(t + lane * 16, g.h + st * 512, ok);
    cp_async16_if(t + 16 * QH_B + lane * 16, g.s + st * 64, ok && lane < 4);
  }
  __device__ __forceinline__ static void read(const u8* qs, const u8* t, int lane, int j, Raw& w) {
    const int gid = lane >> 2;
    const uint4 q = lds16(qs + j * 512 + lane * 16);
    w.q[0] = q.x, w.q[1] = q.y, w.q[2] = q.z, w.q[3] = q.w;
    if constexpr (HB == 1) w.h[0] = lds4(t + j * 128 + lane * 4);
    if constexpr (HB == 2) {
      const uint2 h = *reinterpret_cast<const uint2*>(t + j * 256 + lane * 8);
      w.h[0] = h.x, w.h[1] = h.y;
    }
#pragma unroll
    for (int i = 0; i < 2; ++i) w.s[i] = h2f((unsigned short)lds2(t + 16 * QH_B + (gid + 8 * i) * 4 + j * 2));
  }
  // A pair's codes (| high bits << 4: u < 64) over BF16 128.0: halves 128 + u, one LOP3
  // with the mask from a register (nib_mask; with two immediates ptxas emits two LOP3s);
  // one BF16 fma takes off 128 + OFF, exact. 11 instructions per 8 Q4 weights (three
  // shifts), where the C expression gave 15.
  __device__ __forceinline__ static void frag(const Raw& w, u32 nib, u32 a[4][4]) {
    constexpr u32 NEG = (0xC300u | OFF) * 0x10001u;  // BF16 -(128 + OFF), both halves
#pragma unroll
    for (int ks = 0; ks < 4; ++ks)
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        u32 c = lop3_or_and<BF2_MAGIC>(w.q[ks] >> (4 * k), nib);
        if constexpr (HB == 1) c |= hi_at<1>(w.h[0], 4 * ks + k);
        if constexpr (HB == 2) c |= hi_at<2>(w.h[ks >> 1], 4 * (ks & 1) + k);
        a[ks][k] = bf2_fma(c, BF2_ONE, NEG);
      }
  }
  __device__ __forceinline__ static float scale(const Raw& w, int i, int) { return w.s[i]; }
};

template <> struct Dec<QT_Q4> : Dec4<0, 8> {};
template <> struct Dec<QT_Q5> : Dec4<1, 16> {};
template <> struct Dec<QT_Q6> : Dec4<2, 32> {};

// NVFP4: the nibble plane and k ownership of Q4; a k step is one group (16 k), its E4M3
// scale folded into A (e4m3x2_up: exact, the operands carry 2^-8, multiplied back at the
// store with the tensor scale).
template <> struct Dec<QT_NVFP4> : Dec4<0, 0> {
  static constexpr int GSTEP = 0;
  struct Raw {
    u32 q[4];
    u32 s2[2][4];  // row i's scale of k step ks times 2^118, a BF16 pair
  };
  // Stage layout: codes QS as Dec4; tail scales [16 rows][8 B] (E4M3).
  static constexpr int QBYTES = 1024, TBYTES = 16 * 8, WBYTES = QBYTES + TBYTES;
  struct Src {
    const u8* q;
    const u8* s;
  };
  __device__ __forceinline__ static void src(const WPlanes& p, int n_mt, int lane, Src& g) {
    g.q = p.qs + band_base(n_mt, p.kpad / 2) + lane * 16;
    g.s = p.sc + band_base(n_mt, p.kpad / 16) + lane * 16;
  }
  __device__ __forceinline__ static void copy(const Src& g, int st, int lane, u32 q, u32 t, bool ok) {
#pragma unroll
    for (int j = 0; j < 2; ++j) cp_async16_if(q + j * 512 + lane * 16, g.q + st * 1024 + j * 512, ok);
    cp_async16_if(t + lane * 16, g.s + st * 128, ok && lane < 8);
  }
  __device__ __forceinline__ static void read(const u8* qs, const u8* t, int lane, int j, Raw& w) {
    const int gid = lane >> 2;
    const uint4 q = lds16(qs + j * 512 + lane * 16);
    w.q[0] = q.x, w.q[1] = q.y, w.q[2] = q.z, w.q[3] = q.w;
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const u32 b = lds4(t + (gid + 8 * i) * 8 + j * 4);  // groups 4 j .. 4 j + 3
#pragma unroll
      for (int o = 0; o < 2; ++o) {  // k steps o and o + 2 as one pair, then each half splat
        const u32 s = e4m3x2_up(b >> (8 * o));
        w.s2[i][o] = bf2_lo2(s);
        w.s2[i][o + 2] = bf2_hi2(s);
      }
    }
  }
  // The pair's E2M1 codes (nib_pair) as BF16 bits (e2m1_bf2), times the scale times 2^118:
  // the weight times 2^-8, exact.
  __device__ __forceinline__ static void frag(const Raw& w, u32 nib, u32 a[4][4]) {
#pragma unroll
    for (int ks = 0; ks < 4; ++ks)
#pragma unroll
      for (int k = 0; k < 4; ++k)
        a[ks][k] = bf2_fma(e2m1_bf2((w.q[ks] >> (4 * k)) & nib), w.s2[k & 1][ks], BF2_NEG_ZERO);
  }
  __device__ __forceinline__ static float scale(const Raw&, int, int) { return 1.f; }
};

// W8, group 32 (two k steps): the plane is in fragment order (formats.md), so a lane's
// 16 bytes of a group are its A registers' code pairs of the group's two k steps.
template <> struct Dec<QT_W8> {
  static constexpr int GSTEP = 2;
  static constexpr bool XNAT = true;
  struct Raw {
    uint4 q[2];  // [group]: word 2 kl + e, rows gid / gid + 8 at bytes 0, 1 / 2, 3
    float s[2][2];
  };
  // Stage layout: codes QS [2 slabs][2 groups][32 lanes][16 B]; tail scales [16 rows][8 B].
  static constexpr int QBYTES = 2048, TBYTES = 16 * 8, WBYTES = QBYTES + TBYTES;
  struct Src {
    const u8* q;
    const u8* s;
  };
  __device__ __forceinline__ static void src(const WPlanes& p, int n_mt, int lane, Src& g) {
    g.q = p.qs + band_base(n_mt, p.kpad) + lane * 16;
    g.s = p.sc + band_base(n_mt, p.kpad / 16) + lane * 16;
  }
  __device__ __forceinline__ static void copy(const Src& g, int st, int lane, u32 q, u32 t, bool ok) {
#pragma unroll
    for (int m = 0; m < 4; ++m) cp_async16_if(q + m * 512 + lane * 16, g.q + st * 2048 + m * 512, ok);
    cp_async16_if(t + lane * 16, g.s + st * 128, ok && lane < 8);
  }
  __device__ __forceinline__ static void read(const u8* qs, const u8* t, int lane, int j, Raw& w) {
    const int gid = lane >> 2;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      w.q[h] = lds16(qs + (2 * j + h) * 512 + lane * 16);
#pragma unroll
      for (int i = 0; i < 2; ++i)
        w.s[i][h] = h2f((unsigned short)lds2(t + (gid + 8 * i) * 8 + (2 * j + h) * 2));
    }
  }
  // Bytes b0, b0 + 1 of v as exact floats (i8_float), packed.
  __device__ __forceinline__ static u32 pair(u32 v, int b0) {
    const u32 wx = v ^ 0x80808080u;
    return bf2_pack(i8_float(wx, b0), i8_float(wx, b0 + 1));
  }
  __device__ __forceinline__ static void frag(const Raw& w, u32, u32 a[4][4]) {
#pragma unroll
    for (int ks = 0; ks < 4; ++ks) {
      const uint4& q = w.q[ks >> 1];
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int m = 2 * (ks & 1) + e;
        const u32 v = word_of(q, m);
        a[ks][2 * e] = pair(v, 0);
        a[ks][2 * e + 1] = pair(v, 2);
      }
    }
  }
  __device__ __forceinline__ static float scale(const Raw& w, int i, int g) { return w.s[i][g]; }
};

// BF16: 16 contiguous k per lane and row (two 16-byte loads), natural pairs.
template <> struct Dec<QT_BF16> {
  static constexpr int GSTEP = 0;
  static constexpr bool XNAT = false;
  struct Raw {
    uint4 q[2][2];
  };
  // Stage layout: codes [2 slabs][2 rows][2 halves][32 lanes][16 B] (a lane's 32 bytes per
  // row); no tail.
  static constexpr int QBYTES = 4096, TBYTES = 0, WBYTES = QBYTES;
  struct Src {
    const u8* q;
  };
  __device__ __forceinline__ static void src(const WPlanes& p, int n_mt, int lane, Src& g) {
    g.q = p.qs + band_base(n_mt, p.kpad * 2) + lane * 16;
  }
  __device__ __forceinline__ static void copy(const Src& g, int st, int lane, u32 q, u32, bool ok) {
#pragma unroll
    for (int m = 0; m < 8; ++m) cp_async16_if(q + m * 512 + lane * 16, g.q + st * 4096 + m * 512, ok);
  }
  __device__ __forceinline__ static void read(const u8* qs, const u8*, int lane, int j, Raw& w) {
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
      for (int c = 0; c < 2; ++c) w.q[i][c] = lds16(qs + ((2 * j + i) * 2 + c) * 512 + lane * 16);
  }
  __device__ __forceinline__ static void frag(const Raw& w, u32, u32 a[4][4]) {
#pragma unroll
    for (int ks = 0; ks < 4; ++ks)
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        a[ks][i] = word_of(w.q[i][ks >> 1], 2 * (ks & 1));
        a[ks][2 + i] = word_of(w.q[i][ks >> 1], 2 * (ks & 1) + 1);
      }
  }
  __device__ __forceinline__ static float scale(const Raw&, int, int) { return 1.f; }
  __device__ __forceinline__ static int xoff(int tig, int run) { return 16 * tig + 8 * run; }
  __device__ __forceinline__ static void bfrag(const u32 X[8], u32 b[4][2]) {
#pragma unroll
    for (int ks = 0; ks < 4; ++ks) {
      b[ks][0] = X[2 * ks];
      b[ks][1] = X[2 * ks + 1];
    }
  }
};


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
  extern __shared__ __align__(16) u8 smem[];

  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int gid = lane >> 2, tig = lane & 3;
  const int grp = warp / WR, wr = warp % WR;
  const int n0 = blockIdx.x * R, t0 = blockIdx.y * TT;
  const int n_w = n0 + 16 * MT * wr;   // first row of this warp's m-tiles
  const int txa = min(TT, T);          // x rows allocated per tile (the launcher's formula)
  const int txc = min(TT, T - t0);     // x rows of this block's tile
  const int XT = txa * DEC_XS;
  // A stage: the WK x tiles, rounded up to 128 bytes; then per warp its MT codes blocks and
  // after them their tails (high bits, scales), rounded up to 128 bytes (WREG). Every codes
  // block (a multiple of 1024 bytes) so starts on a 128-byte line whatever T is. Unrounded,
  // odd T put them 16 or 64 bytes off one, and odd T ran 5-12 % over their even neighbours
  // on the same instance (the Q4 head at T = 7 ... 15, W8 [5120,17408] at T = 3, 5, 7:
  // docs/perf/decode_h200.md, "Deliver 4"); with each tail right after its codes, a 4-bit
  // warp's second m-tile started 64 bytes off one at every T.
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
  typename D::Src src[MT];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) D::src(p, n_w + 16 * mt, lane, src[mt]);
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
      // Every stage but the one holding column K - 1 is whole: there a chunk is one
      // cp.async, predicated, without the zero-fill arithmetic (issue slots are the
      // decode's bound).
      // Chunk r: its source, its slot, whether this lane copies it.
      auto g_of = [&](int r) { return xg + (size_t)r * 2 * WR * K + st * 128; };
      auto dst_of = [&](int r) { return base + xs0 + r * 2 * WR * DEC_XS; };
      auto mine = [&](int r) { return c0 + 32 * WR * r < txc * 16; };
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
      for (int mt = 0; mt < MT; ++mt)  // bands past N are not stored (their rows are dropped)
        D::copy(src[mt], st, lane, base + w_off + mt * D::QBYTES, base + w_off + MT * D::QBYTES + mt * D::TBYTES,
                n_w + 16 * mt < N);
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
