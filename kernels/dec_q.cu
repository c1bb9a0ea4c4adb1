// Decode route for small T (1 ... 64): mma.sync m16n8k16 with W as the A operand,
// decoded from global memory straight into registers, x as the B operand.
//
// Why this shape: at T <= 64 the op is a stream over W. Each weight byte is loaded once
// (sector-exact: the four lanes of a fragment row read one 32-byte sector), decoded with
// a few integer ops into BF16 pairs and fed to the tensor core, which does the T-fold
// reuse that FP32 FMAs could not afford (64 FMAs per weight at T = 64). No shared memory
// holds W, so no barrier sits in the stream; a block is KW warps on the same 16*MT rows,
// each warp a disjoint run of 64-k slabs, reduced through shared memory at the end in a
// fixed order (bitwise-repeatable, no atomics).
//
// The k order inside an MMA is free: a thread feeds the A slots of its lane-quad column
// (tig) and the matching B slots, so any physical k it assigns to a slot is summed
// correctly as long as A and B agree. Each lane takes 16 contiguous k of a slab (8 bytes
// of 4-bit codes per row) and pairs them as the decoder extracts them cheaply
// (k, k+4); x is permuted to match with one PRMT per pair.
//
// Exactness (formats.md): integer codes reach the tensor core as exact BF16 values, each
// group's FP32 partial is scaled once (Q4/Q5/Q6: one group per slab; W8: two). NVFP4's
// e2m1 x e4m3 product has at most 6 significant bits, so it is exact in BF16 and the
// scale is folded into A; the FP32 tensor scale is applied last.
#include "common.cuh"

__device__ __forceinline__ u32 bf2_fma(u32 a, u32 b, u32 c) {
  u32 d;
  asm("fma.rn.bf16x2 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
  return d;
}

// Two floats that are exactly BF16-representable -> one BF16 pair (lo in the low half).
__device__ __forceinline__ u32 bf2_pack(float lo, float hi) {
  u32 d;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(d) : "f"(hi), "f"(lo));
  return d;
}

__device__ __forceinline__ uint2 ld8(const void* p) { return __ldg(reinterpret_cast<const uint2*>(p)); }

// Nibbles s and s+4 of w as a u16 pair: the (k, k+4) pairing every 4-bit decoder uses.
__device__ __forceinline__ u32 nib_pair(u32 w, int s) { return (w >> (4 * s)) & 0x000f000fu; }

// BF16 of (128 + c) is 0x4300 | c for c < 128 (the mantissa holds c exactly); one BF16
// FMA subtracts 128 + off, leaving c - off exactly.
__device__ __forceinline__ u32 code_pair_to_bf2(u32 c, int off) {
  const u32 neg = 0xC300u | (u32)off;  // BF16 of -(128 + off)
  return bf2_fma(c | 0x43004300u, 0x3F803F80u, neg | (neg << 16));
}

// High bits of the pair (s, s+4) inside word wb (k 8wb .. 8wb+7) moved to bit 4 of each
// half. HB = 1 (Q5): h is 16 bits, bit j = k j. HB = 2 (Q6): h is 32 bits, 2 bits per k.
template <int HB>
__device__ __forceinline__ u32 hi_pair(u32 h, int wb, int s) {
  if constexpr (HB == 1) {
    const u32 u = (h >> (8 * wb)) & 0xffu;
    const u32 sp = (u & 0x0fu) | ((u & 0xf0u) << 12);
    return ((sp << 4) >> s) & 0x00100010u;
  } else {
    const u32 u = (h >> (16 * wb)) & 0xffffu;
    const u32 sp = (u & 0xffu) | ((u & 0xff00u) << 8);
    return ((sp >> (2 * s)) << 4) & 0x00300030u;
  }
}

// Per-format decoders. A thread of lane-quad column tig owns, in slab s (k = 64 s ...),
// the k offsets its Dec names; load() fetches the raw bits of rows r[0], r[1] (fragment
// rows gid and gid + 8), frag() builds the A registers of the slab's four k-steps:
// a[ks][0] / a[ks][1] = rows 0 / 1 at slots (2tig, 2tig+1), a[ks][2] / a[ks][3] at
// (2tig+8, 2tig+9). GSTEP: k-steps per scaled group (0: the scale is inside A or none).
template <int QT> struct Dec;

template <int HB, int OFF> struct Dec4 {
  static constexpr int GSTEP = 4;
  struct Raw {
    uint2 q[2];
    u32 h[2];
    float s[2];
  };
  __device__ __forceinline__ static void load(const WPlanes& p, const int r[2], int slab, int tig, Raw& w) {
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      w.q[i] = ld8(p.qs + (size_t)r[i] * (p.kpad / 2) + slab * 32 + tig * 8);
      if constexpr (HB == 1)
        w.h[i] = __ldg(reinterpret_cast<const unsigned short*>(p.qh + (size_t)r[i] * (p.kpad / 8) + slab * 8 + tig * 2));
      else if constexpr (HB == 2)
        w.h[i] = __ldg(reinterpret_cast<const u32*>(p.qh + (size_t)r[i] * (p.kpad / 4) + slab * 16 + tig * 4));
      w.s[i] = h2f(__ldg(reinterpret_cast<const unsigned short*>(p.sc) + (size_t)r[i] * (p.kpad / 64) + slab));
    }
  }
  __device__ __forceinline__ static u32 pair(const Raw& w, int i, int wb, int s) {
    u32 c = nib_pair(wb ? w.q[i].y : w.q[i].x, s);
    if constexpr (HB > 0) c |= hi_pair<HB>(w.h[i], wb, s);
    return code_pair_to_bf2(c, OFF);
  }
  __device__ __forceinline__ static void frag(const Raw& w, u32 a[4][4]) {
#pragma unroll
    for (int ks = 0; ks < 4; ++ks)
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        a[ks][i] = pair(w, i, ks >> 1, 2 * (ks & 1));
        a[ks][2 + i] = pair(w, i, ks >> 1, 2 * (ks & 1) + 1);
      }
  }
  __device__ __forceinline__ static float scale(const Raw& w, int i, int) { return w.s[i]; }
  // x runs (two of 8 contiguous k) this lane loads per slab, as offsets in the slab.
  __device__ __forceinline__ static int xoff(int tig, int run) { return 16 * tig + 8 * run; }
  // B registers from the 8 x words X[j] = (x[2j], x[2j+1]) of the lane's 16 k.
  __device__ __forceinline__ static void bfrag(const u32 X[8], u32 b[4][2]) {
#pragma unroll
    for (int ks = 0; ks < 4; ++ks)
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        const int wb = ks >> 1, s = 2 * (ks & 1) + j;
        b[ks][j] = __byte_perm(X[4 * wb + s / 2], X[4 * wb + 2 + s / 2], (s & 1) ? 0x7632 : 0x5410);
      }
  }
};

template <> struct Dec<QT_Q4> : Dec4<0, 8> {};
template <> struct Dec<QT_Q5> : Dec4<1, 16> {};
template <> struct Dec<QT_Q6> : Dec4<2, 32> {};

// NVFP4: same nibble plane and k ownership as Q4 (a lane's 16 k are exactly one group).
template <> struct Dec<QT_NVFP4> : Dec4<0, 0> {
  static constexpr int GSTEP = 0;
  struct Raw {
    uint2 q[2];
    u32 s2[2];  // the group's E4M3 scale as a BF16 pair (exact)
  };
  __device__ __forceinline__ static void load(const WPlanes& p, const int r[2], int slab, int tig, Raw& w) {
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      w.q[i] = ld8(p.qs + (size_t)r[i] * (p.kpad / 2) + slab * 32 + tig * 8);
      const u32 b = f2bf(e4m3_to_f(__ldg(p.sc + (size_t)r[i] * (p.kpad / 16) + slab * 4 + tig)));
      w.s2[i] = b | (b << 16);
    }
  }
  // E2M1 bits s.e1e0m -> BF16 bits with e1e0m at 8..6 and the sign at 15: the value
  // times 2^-126 (m = 1, e = 0 lands on a BF16 subnormal, which BF16 FMA keeps), then
  // x 2^126 and x scale, both exact.
  __device__ __forceinline__ static u32 pair(const Raw& w, int i, int wb, int s) {
    const u32 t = (wb ? w.q[i].y : w.q[i].x) >> (4 * s);
    const u32 v = ((t & 0x00070007u) << 6) | ((t & 0x00080008u) << 12);
    return bf2_fma(bf2_fma(v, 0x7E807E80u, 0x80008000u), w.s2[i], 0x80008000u);
  }
  __device__ __forceinline__ static void frag(const Raw& w, u32 a[4][4]) {
#pragma unroll
    for (int ks = 0; ks < 4; ++ks)
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        a[ks][i] = pair(w, i, ks >> 1, 2 * (ks & 1));
        a[ks][2 + i] = pair(w, i, ks >> 1, 2 * (ks & 1) + 1);
      }
  }
  __device__ __forceinline__ static float scale(const Raw&, int, int) { return 1.f; }
};

// W8, group 32: a lane owns k 8tig .. 8tig+7 of each half of the slab (one group each),
// so every k-step stays inside one group. Natural (k, k+1) pairs.
template <> struct Dec<QT_W8> {
  static constexpr int GSTEP = 2;
  struct Raw {
    uint2 q[2][2];  // [row][half]
    float s[2][2];
  };
  __device__ __forceinline__ static void load(const WPlanes& p, const int r[2], int slab, int tig, Raw& w) {
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        w.q[i][h] = ld8(p.qs + (size_t)r[i] * p.kpad + slab * 64 + 32 * h + tig * 8);
        w.s[i][h] = h2f(__ldg(reinterpret_cast<const unsigned short*>(p.sc) + (size_t)r[i] * (p.kpad / 32) + 2 * slab + h));
      }
  }
  // int8 -> float exactly: byte ^ 0x80 under the exponent of 2^23, minus 2^23 + 128.
  __device__ __forceinline__ static u32 pair(u32 v, int b0) {
    const u32 wx = v ^ 0x80808080u;
    const float f0 = __uint_as_float(__byte_perm(wx, 0x4B000000u, 0x7440 | b0)) - 8388736.f;
    const float f1 = __uint_as_float(__byte_perm(wx, 0x4B000000u, 0x7440 | (b0 + 1))) - 8388736.f;
    return bf2_pack(f0, f1);
  }
  __device__ __forceinline__ static void frag(const Raw& w, u32 a[4][4]) {
#pragma unroll
    for (int ks = 0; ks < 4; ++ks)
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        const u32 v = (ks & 1) ? w.q[i][ks >> 1].y : w.q[i][ks >> 1].x;
        a[ks][i] = pair(v, 0);
        a[ks][2 + i] = pair(v, 2);
      }
  }
  __device__ __forceinline__ static float scale(const Raw& w, int i, int g) { return w.s[i][g]; }
  __device__ __forceinline__ static int xoff(int tig, int run) { return 32 * run + 8 * tig; }
  __device__ __forceinline__ static void bfrag(const u32 X[8], u32 b[4][2]) {
#pragma unroll
    for (int ks = 0; ks < 4; ++ks) {
      b[ks][0] = X[2 * ks];
      b[ks][1] = X[2 * ks + 1];
    }
  }
};

// BF16: 16 contiguous k per lane and row (two 16-byte loads), natural pairs.
template <> struct Dec<QT_BF16> {
  static constexpr int GSTEP = 0;
  struct Raw {
    uint4 q[2][2];
  };
  __device__ __forceinline__ static void load(const WPlanes& p, const int r[2], int slab, int tig, Raw& w) {
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const u8* row = p.qs + ((size_t)r[i] * p.kpad + slab * 64 + tig * 16) * 2;
      w.q[i][0] = ldg16(row);
      w.q[i][1] = ldg16(row + 16);
    }
  }
  __device__ __forceinline__ static u32 word(const uint4& q, int j) {
    return j == 0 ? q.x : j == 1 ? q.y : j == 2 ? q.z : q.w;
  }
  __device__ __forceinline__ static void frag(const Raw& w, u32 a[4][4]) {
#pragma unroll
    for (int ks = 0; ks < 4; ++ks)
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        a[ks][i] = word(w.q[i][ks >> 1], 2 * (ks & 1));
        a[ks][2 + i] = word(w.q[i][ks >> 1], 2 * (ks & 1) + 1);
      }
  }
  __device__ __forceinline__ static float scale(const Raw&, int, int) { return 1.f; }
  __device__ __forceinline__ static int xoff(int tig, int run) { return 16 * tig + 8 * run; }
  __device__ __forceinline__ static void bfrag(const u32 X[8], u32 b[4][2]) { Dec<QT_W8>::bfrag(X, b); }
};

// 8 x values from column k0 of x row xr as 4 words; columns >= K read as zero.
__device__ __forceinline__ void load_x8(const bf16_t* xr, int k0, int K, bool vec, u32 X[4]) {
  if (vec && k0 + 8 <= K) {
    const uint4 q = ldg16(xr + k0);
    X[0] = q.x; X[1] = q.y; X[2] = q.z; X[3] = q.w;
  } else {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int k = k0 + 2 * i;
      const u32 lo = k < K ? (u32)__ldg(xr + k) : 0u;
      const u32 hi = k + 1 < K ? (u32)__ldg(xr + k + 1) : 0u;
      X[i] = lo | (hi << 16);
    }
  }
}

// NT: 8-token MMA column tiles (T tile = 8 NT); MT: 16-row MMA tiles per warp; KW: warps
// of a block, each on its own slabs of the same rows; U: slabs loaded before first use
// (memory-level parallelism without shared memory).
template <int QT, int NT, int MT, int KW, int U>
__global__ void __launch_bounds__(32 * KW) dec_q(const u8* __restrict__ qs, const u8* __restrict__ qh,
                                                 const u8* __restrict__ sc, float tensor_scale, int N,
                                                 int K, int kpad, const bf16_t* __restrict__ x,
                                                 bf16_t* __restrict__ out, int T, int xvec) {
  using D = Dec<QT>;
  constexpr int R = 16 * MT, TT = 8 * NT;
  static_assert(KW * R * TT * 4 <= 48 * 1024, "reduction buffer exceeds static shared memory");
  __shared__ float red[KW][R][TT];

  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int gid = lane >> 2, tig = lane & 3;
  const int n0 = blockIdx.x * R, t0 = blockIdx.y * TT;
  const WPlanes p{qs, qh, sc, kpad};

  // Rows past N read row N-1 (valid memory, results dropped): no divergent loads.
  int rows[MT][2];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
    rows[mt][0] = min(n0 + 16 * mt + gid, N - 1);
    rows[mt][1] = min(n0 + 16 * mt + gid + 8, N - 1);
  }
  const bf16_t* xr[NT];
  bool tok[NT];
#pragma unroll
  for (int nt = 0; nt < NT; ++nt) {
    const int t = t0 + 8 * nt + gid;
    tok[nt] = t < T;
    xr[nt] = x + (size_t)(tok[nt] ? t : 0) * K;
  }
  const bool vec = xvec != 0;

  float acc[MT][NT][4];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[mt][nt][e] = 0.f;

  const int nslab = kpad / 64;
  for (int s0 = warp * U; s0 < nslab; s0 += KW * U) {
    typename D::Raw raw[U][MT];
    u32 X[U][NT][8];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int s = s0 + u;
      if (s < nslab) {
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) D::load(p, rows[mt], s, tig, raw[u][mt]);
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) {
          if (tok[nt]) {
            load_x8(xr[nt], 64 * s + D::xoff(tig, 0), K, vec, X[u][nt]);
            load_x8(xr[nt], 64 * s + D::xoff(tig, 1), K, vec, X[u][nt] + 4);
          } else {
#pragma unroll
            for (int j = 0; j < 8; ++j) X[u][nt][j] = 0u;
          }
        }
      }
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      if (s0 + u >= nslab) break;
      u32 b[NT][4][2];
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) D::bfrag(X[u][nt], b[nt]);
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        u32 a[4][4];
        D::frag(raw[u][mt], a);
        if constexpr (D::GSTEP == 0) {
#pragma unroll
          for (int ks = 0; ks < 4; ++ks)
#pragma unroll
            for (int nt = 0; nt < NT; ++nt) mma_bf16_16816(acc[mt][nt], a[ks], b[nt][ks][0], b[nt][ks][1]);
        } else {
#pragma unroll
          for (int g = 0; g < 4 / D::GSTEP; ++g) {
            const float s_lo = D::scale(raw[u][mt], 0, g), s_hi = D::scale(raw[u][mt], 1, g);
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

  // Fixed-order reduction over the KW warps (C fragment: rows gid / gid+8, tokens 2tig, 2tig+1).
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e)
        red[warp][16 * mt + gid + (e >= 2 ? 8 : 0)][8 * nt + 2 * tig + (e & 1)] = acc[mt][nt][e];
  __syncthreads();
  for (int i = threadIdx.x; i < R * TT; i += 32 * KW) {
    const int r = i % R, c = i / R;
    const int n = n0 + r, t = t0 + c;
    if (n < N && t < T) {
      float v = red[0][r][c];
#pragma unroll
      for (int w = 1; w < KW; ++w) v += red[w][r][c];
      out[(size_t)t * N + n] = f2bf(v * tensor_scale);
    }
  }
}
