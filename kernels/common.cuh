// Shared device helpers and the per-format weight decoders.
//
// Header-free on purpose: the same text compiles under NVRTC (CuPy, at run time) and
// nvcc (the CPU compile check) with no include path. BF16 is carried as raw 16-bit
// words; every conversion below is explicit.
#pragma once

typedef unsigned char u8;
typedef unsigned short bf16_t;
typedef unsigned int u32;
typedef unsigned long long u64;

// Format ids: the order of ninfer.routes.kernel_ids.QTYPE_ID.
#define QT_Q4 0
#define QT_Q5 1
#define QT_Q6 2
#define QT_W8 3
#define QT_NVFP4 4
#define QT_BF16 5

__device__ __forceinline__ float bf2f(bf16_t h) { return __uint_as_float(((u32)h) << 16); }

// float -> bf16, round to nearest even; NaN stays a (quiet) NaN.
__device__ __forceinline__ bf16_t f2bf(float f) {
  u32 u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (bf16_t)((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (bf16_t)(u >> 16);
}

__device__ __forceinline__ float h2f(unsigned short h) {
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
  return f;
}

// E4M3fn scale byte -> float (0x7F is NaN and never stored by pack or the fixture).
__device__ __forceinline__ float e4m3_to_f(u32 c) {
  u32 e = (c >> 3) & 15u, m = c & 7u;
  float mag = e == 0 ? (float)m * 0.001953125f  // m/8 * 2^-6
                     : __uint_as_float(((e + 120u) << 23) | (m << 20));
  return (c & 0x80u) ? -mag : mag;
}

// E2M1 nibble -> float, exactly representable in BF16 (used as an MMA operand).
// Built from the bits (no lookup table: a run-time-indexed array would go to local memory).
__device__ __forceinline__ float e2m1_to_f(u32 c) {
  u32 e = (c >> 1) & 3u, m = c & 1u;
  u32 mag = e == 0 ? (m ? 0x3f000000u : 0u) : (((e + 126u) << 23) | (m << 22));
  return __uint_as_float(mag | ((c & 8u) << 28));
}

// D += A * B, m16n8k16, BF16 operands, FP32 accumulators (sm_80+).
__device__ __forceinline__ void mma_bf16_16816(float c[4], const u32 a[4], u32 b0, u32 b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
      "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ uint4 ldg16(const void* p) {
  return __ldg(reinterpret_cast<const uint4*>(p));
}

// Word j of a 16-byte load (j a compile-time constant once unrolled: a register, no select).
__device__ __forceinline__ u32 word_of(const uint4& q, int j) {
  return j == 0 ? q.x : j == 1 ? q.y : j == 2 ? q.z : q.w;
}

struct WPlanes {
  const u8* qs;  // codes (all formats; BF16 values for QT_BF16)
  const u8* qh;  // high bits (Q5, Q6), else null
  const u8* sc;  // group scales: FP16 (Q*, W8) or E4M3 (NVFP4), else null
  int kpad;
};

// Generic -> shared-window address (the 32-bit operand of cp.async, TMA, mbarrier, ldmatrix).
__device__ __forceinline__ u32 smem_u32(const void* p) {
  u32 a;
  asm("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(a) : "l"(p));
  return a;
}

// Storage order (docs/formats.md, ninfer/formats/tiling.py): rows in bands of 16, K in
// stages of 128; a band stores stage after stage, each stage one contiguous block in
// the order the decode kernel stages it. Row r of a band: i = (r >> 3), gid = r & 7.
// band_base(n, row_bytes): start of row n's band in a plane of row_bytes per row.
__device__ __forceinline__ size_t band_base(int n, int row_bytes) {
  return (size_t)(n & ~15) * (size_t)row_bytes;
}

// BF16 pair FMA (fma.rn.bf16x2, sm_80+): the exact a * b + c, rounded once.
__device__ __forceinline__ u32 bf2_fma(u32 a, u32 b, u32 c) {
  u32 d;
  asm("fma.rn.bf16x2 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
  return d;
}
constexpr u32 BF2_MAGIC = 0x43004300u, BF2_ONE = 0x3F803F80u, BF2_NEG_ZERO = 0x80008000u;

// NVFP4 operands carry 2^-8 (dq_rs's rs_frag, dec_q's Dec<QT_NVFP4>: e2m1 x e4m3x2_up);
// the store multiplies it back with the tensor scale. Powers of two: the FP32 sums are
// the unscaled ones times 2^-8, bit for bit.
constexpr float NVFP4_DOWN = 256.f;
// A BF16 pair's low (high) half in both halves, as PTX half moves: ptxas can take them as
// an operand's .H0_H0 (.H1_H1) selection in the BF16 multiply that uses them (a PRMT it
// does not fold).
__device__ __forceinline__ u32 bf2_lo2(u32 p) {
  u32 d;
  asm("{ .reg .b16 l, h; mov.b32 {l, h}, %1; mov.b32 %0, {l, l}; }" : "=r"(d) : "r"(p));
  return d;
}
__device__ __forceinline__ u32 bf2_hi2(u32 p) {
  u32 d;
  asm("{ .reg .b16 l, h; mov.b32 {l, h}, %1; mov.b32 %0, {h, h}; }" : "=r"(d) : "r"(p));
  return d;
}
// Two E4M3 scale bytes, bytes 0 and 2 of c (bytes 1 and 3 are masked off), each times
// 2^118, as the BF16 pair (byte 0's low, byte 2's high); exact: 4 significant bits, at most
// 448 * 2^118 < 2^127. A byte's bits (e: 4, m: 3) placed at BF16's exponent LSBs and
// mantissa MSBs are its value times 2^-120, the same for a subnormal E4M3 (e = 0), which
// lands on a BF16 subnormal; two exact BF16 multiplies by 2^119 follow. BF16 arithmetic
// keeps subnormals; FP32's would not: CuPy compiles with -ftz=true. Two scales for the
// price of one (the shifts stay inside a half; bf2_lo2 / bf2_hi2 give each row its pair).
__device__ __forceinline__ u32 e4m3x2_up(u32 c) {
  constexpr u32 UP = 0x7B007B00u;  // BF16 2^119 (exponent field 246) in both halves
  const u32 b = ((c & 0x007F007Fu) << 4) | ((c & 0x00800080u) << 8);
  return bf2_fma(bf2_fma(b, UP, BF2_NEG_ZERO), UP, BF2_NEG_ZERO);
}
// A row's four E4M3 k-step scales (byte ks of b) times 2^118, s[ks] that scale in both
// halves of a BF16 pair: k steps ks and ks + 2 converted as one pair, then split (dec_q's
// and dq_rs's NVFP4 decode).
__device__ __forceinline__ void e4m3x4_splat(u32 b, u32 s[4]) {
#pragma unroll
  for (int o = 0; o < 2; ++o) {
    const u32 p = e4m3x2_up(b >> (8 * o));
    s[o] = bf2_lo2(p);
    s[o + 2] = bf2_hi2(p);
  }
}

// (x & m) | c in one LOP3: m in a register (nib_mask) and c an immediate; with both
// immediates ptxas emits two LOP3s (one immediate operand each).
template <u32 C>
__device__ __forceinline__ u32 lop3_or_and(u32 x, u32 m) {
  u32 d;
  asm("lop3.b32 %0, %1, %2, %3, 0xEA;" : "=r"(d) : "r"(x), "r"(m), "n"(C));
  return d;
}
// 0x000F000F in a register ptxas cannot fold back into an immediate: zero is any
// non-negative int shifted right by 31 (dq_rs and dec_q pass kpad, a kernel argument).
__device__ __forceinline__ u32 nib_mask(int nonneg) {
  u32 m;
  asm("xor.b32 %0, %1, 0x000F000F;" : "=r"(m) : "r"((u32)nonneg >> 31));
  return m;
}
// 4-bit codes (formats.md, "Storage order"): lane block (gid, tig) of a slab is 16 bytes
// at (gid * 4 + tig) * 16, one 32-bit word per k step ks whose nibbles r and r + 4 hold
// the MMA's A register r's codes (rows gid + 8 (r & 1), k 16 ks + 8 (r >> 1) + 2 tig and
// + 1). Shifted down by 4 r and masked, the pair's lower k sits in bits 0..3 and its
// higher k in bits 16..19: the two halves of a BF16 pair.
__device__ __forceinline__ u32 nib_pair(u32 w, int r) { return (w >> (4 * r)) & 0x000F000Fu; }

// Q5 / Q6 high bits (formats.md): a lane's 32-bit high-bit word holds register x's
// (x = 4 ks + r; Q6: 4 (ks % 2) + r, one word per two k steps) lower-k bits at HB x and
// its higher-k bits at 16 + HB x. Shifted by 4 - HB x and masked they sit at bits 4 and
// 20, right above nib_pair's nibbles (x is a compile-time constant: one shift, one mask).
template <int HB>
__device__ __forceinline__ u32 hi_at(u32 h, int x) {
  constexpr u32 M = HB == 1 ? 0x00100010u : 0x00300030u;
  const int sh = 4 - HB * x;
  return (sh >= 0 ? h << sh : h >> -sh) & M;
}

// Address of a row's byte c (of sb bytes per stage) in a "rows"-ordered plane.
__device__ __forceinline__ const u8* rows_at(const u8* plane, int n, int row_bytes, int sb, int c) {
  return plane + band_base(n, row_bytes) + (c / sb) * 16 * sb + (n & 15) * sb + (c % sb);
}

// Fmt<QT>::codes: the 32 weights of chunk c (k = 32c .. 32c+31) of row n, WITHOUT the
// group scale, as exact floats (small integers, E2M1 values, or BF16 values).
// Fmt<QT>::scale: the scale of group g of row n. GROUP is the group size (0: none).
// Their user, dq_gemm, multiplies each code by its group's scale in FP32 (exact: at most
// 19 significant bits) and rounds the product once to BF16 (docs/routes.md, numerics).
// (dec_q reads its stage copies through its own Dec<QT>.)
template <int QT> struct Fmt;

// Two floats -> one BF16 pair (lo in the low half), each rounded to nearest even: one
// cvt for both (the one FP32 -> BF16 rounding of dq_rs, dec_q and dq_gemm).
__device__ __forceinline__ u32 bf2_pack(float lo, float hi) {
  u32 d;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(d) : "f"(hi), "f"(lo));
  return d;
}

// Small unsigned integer c (< 2^23) -> float exactly, without the quarter-rate I2F:
// the bits of 2^23 + c, minus 2^23 (one LOP and one FADD).
__device__ __forceinline__ float u2f_exact(u32 c) { return __uint_as_float(0x4B000000u | c) - 8388608.f; }

// The signed W8 code in byte b of wx = word ^ 0x80808080 (each byte then its code + 128)
// as an exact float: one PRMT puts the byte under 2^23's exponent (no shift, no mask;
// the XOR is one LOP3 for four codes) and one FADD takes off 2^23 + 128. The one int8 ->
// float of dq_rs, dec_q and dq_gemm's W8.
__device__ __forceinline__ float i8_float(u32 wx, int b) {
  return __uint_as_float(__byte_perm(wx, 0x4B000000u, 0x7440 | b)) - 8388736.f;
}

// E2M1 code pairs as BF16 pair bits. A pair at bits 0..3 and 16..19 of c (the rest zero):
// c * 0x1040 = c << 6 + c << 12 (the copies do not overlap) moves each magnitude (e1 e0 m)
// to BF16 bits 8..6 and the sign to bit 15, the value times 2^-126 (e = 0, the subnormal
// 0.5, included), and & 0x81C081C0 keeps those. One fma by the group's scale times 2^118
// (e4m3x2_up) then gives the weight times 2^-8, exact (<= 6 significant bits, no
// overflow: 448 < 2^9). The four pairs of a code word (pair k at bits 4k and 16 + 4k, nib
// = nib_mask): pairs 1 and 3 are masked in place (nib << 4) and moved by the multiply over
// 16 (0x104); pairs 2 and 3 come from the word shifted once by 8: 13 instructions a word,
// where shifting each pair down to bits 0..3 took 15.
__device__ __forceinline__ void e2m1x4_bf2(u32 q, u32 nib, u32 c[4]) {
  const u32 nib4 = nib << 4, q8 = q >> 8;
  c[0] = ((q & nib) * 0x1040u) & 0x81C081C0u;
  c[1] = ((q & nib4) * 0x104u) & 0x81C081C0u;
  c[2] = ((q8 & nib) * 0x1040u) & 0x81C081C0u;
  c[3] = ((q8 & nib4) * 0x104u) & 0x81C081C0u;
}

// The code words of chunk c (k = 32 c .. 32 c + 31) of row n, 4-bit codes: the chunk is k
// steps ks = 2 (c & 1) + dk (dk = 0, 1) of slab j, so its code at m = 16 dk + 8 e +
// 2 tig + p is nibble i + 2 e + 4 p of word ks of lane block (gid, tig) (nib_pair). w[tig]
// [dk] is that word shifted down by 4 i: the code then sits at bits 8 e + 16 p. (Rows gid
// and gid + 8 share the words: the two threads' loads are one.)
__device__ __forceinline__ void load_codes4(const WPlanes& p, int n, int c, u32 w[4][2]) {
  const int st = c >> 2, j = (c >> 1) & 1, r = n & 15;
  const u8* base = p.qs + band_base(n, p.kpad / 2) + st * 1024 + j * 512 + (r & 7) * 64 + 8 * (c & 1);
#pragma unroll
  for (int tig = 0; tig < 4; ++tig) {
    const uint2 q = __ldg(reinterpret_cast<const uint2*>(base + 16 * tig));
    w[tig][0] = q.x >> (4 * (r >> 3));
    w[tig][1] = q.y >> (4 * (r >> 3));
  }
}
// Code m of the chunk from load_codes4's words.
__device__ __forceinline__ u32 code4(const u32 w[4][2], int m) {
  const int dk = m >> 4, e = (m >> 3) & 1, tig = (m >> 1) & 3, p = m & 1;
  return (w[tig][dk] >> (8 * e + 16 * p)) & 15u;
}

__device__ __forceinline__ void unpack_nibbles(const WPlanes& p, int n, int c, float v[32], float off) {
  u32 w[4][2];
  load_codes4(p, n, c, w);
#pragma unroll
  for (int m = 0; m < 32; ++m) v[m] = __uint_as_float(0x4B000000u | code4(w, m)) - (8388608.f + off);
}

__device__ __forceinline__ float fp16_scale(const u8* sc, int n, int kpad, int group, int g) {
  const int row_bytes = kpad / group * 2, sb = 2 * 128 / group;
  return h2f(__ldg(reinterpret_cast<const unsigned short*>(rows_at(sc, n, row_bytes, sb, 2 * g))));
}

template <> struct Fmt<QT_Q4> {
  static constexpr int GROUP = 64;
  __device__ __forceinline__ static void codes(const WPlanes& p, int n, int c, float v[32]) {
    unpack_nibbles(p, n, c, v, 8.f);
  }
  __device__ __forceinline__ static float scale(const WPlanes& p, int n, int g) {
    return fp16_scale(p.sc, n, p.kpad, 64, g);
  }
};

// Q5 / Q6 high bits of chunk c of row n: lane block (gid, tig)'s word(s) of slab j, as
// load_codes4's (k steps ks = 2 (c & 1) + dk): code m = 16 dk + 8 e + 2 tig + p's bits
// are Q5 bit 16 p + 4 ks + 2 e + i of the lane's word, Q6 field 8 p + 4 dk + 2 e + i of
// the lane's word c & 1 (the words hi_at reads in the tensor-core kernels).
__device__ __forceinline__ const u8* high_at(const WPlanes& p, int n, int c, int hb, int tig) {
  const int st = c >> 2, j = (c >> 1) & 1, r = n & 15;
  return p.qh + band_base(n, p.kpad / 8 * hb) + st * 256 * hb + j * 128 * hb + ((r & 7) * 4 + tig) * 4 * hb;
}

// Q5 (HB = 1) and Q6 (HB = 2): the nibble plus HB high bits above it, offset 2^(3 + HB).
template <int HB> struct FmtHigh {
  static constexpr int GROUP = 64;
  __device__ __forceinline__ static void codes(const WPlanes& p, int n, int c, float v[32]) {
    unpack_nibbles(p, n, c, v, float(8 << HB));
    u32 h[4];
#pragma unroll
    for (int t = 0; t < 4; ++t)  // down by HB i; Q5 also by 8 (c & 1), Q6 reads word c & 1
      h[t] = __ldg(reinterpret_cast<const u32*>(high_at(p, n, c, HB, t) + (HB == 2 ? 4 * (c & 1) : 0))) >>
             (HB * ((n >> 3) & 1) + (HB == 1 ? 8 * (c & 1) : 0));
#pragma unroll
    for (int m = 0; m < 32; ++m) {
      const int dk = m >> 4, e = (m >> 3) & 1, t = (m >> 1) & 3, q = m & 1;
      v[m] += u2f_exact(((h[t] >> (16 * q + HB * (4 * dk + 2 * e))) & ((1u << HB) - 1u)) << 4);
    }
  }
  __device__ __forceinline__ static float scale(const WPlanes& p, int n, int g) {
    return fp16_scale(p.sc, n, p.kpad, 64, g);
  }
};
template <> struct Fmt<QT_Q5> : FmtHigh<1> {};
template <> struct Fmt<QT_Q6> : FmtHigh<2> {};

template <> struct Fmt<QT_W8> {
  static constexpr int GROUP = 32;
  // Chunk c is one group: group kh = c & 1 of slab j of stage st. Lane block (gid, tig)'s
  // 16 bytes (formats.md) hold code m = 16 kl + 8 e + 2 tig + p of rows gid (i = 0) and
  // gid + 8 at byte 8 kl + 4 e + 2 i + p.
  __device__ __forceinline__ static void codes(const WPlanes& p, int n, int c, float v[32]) {
    const int st = c >> 2, j = (c >> 1) & 1, kh = c & 1, r = n & 15;
    const u8* base = p.qs + band_base(n, p.kpad) + st * 2048 + (2 * j + kh) * 512 + (r & 7) * 64;
#pragma unroll
    for (int t = 0; t < 4; ++t) {
      const uint4 q = ldg16(base + t * 16);
      const u32 w[4] = {q.x, q.y, q.z, q.w};  // word 2 kl + e: rows' pairs at bytes 2 i, 2 i + 1
#pragma unroll
      for (int m = 0; m < 8; ++m) {
        const int kl = m >> 2, e = (m >> 1) & 1, q2 = m & 1;
        v[16 * kl + 8 * e + 2 * t + q2] = i8_float(w[2 * kl + e] ^ 0x80808080u, 2 * (r >> 3) + q2);
      }
    }
  }
  __device__ __forceinline__ static float scale(const WPlanes& p, int n, int g) {
    return fp16_scale(p.sc, n, p.kpad, 32, g);
  }
};

template <> struct Fmt<QT_NVFP4> {
  static constexpr int GROUP = 16;
  __device__ __forceinline__ static void codes(const WPlanes& p, int n, int c, float v[32]) {
    u32 w[4][2];
    load_codes4(p, n, c, w);
#pragma unroll
    for (int m = 0; m < 32; ++m) v[m] = e2m1_to_f(code4(w, m));
  }
  // The FP32 tensor scale is applied once, in the epilogue.
  __device__ __forceinline__ static float scale(const WPlanes& p, int n, int g) {
    return e4m3_to_f(__ldg(rows_at(p.sc, n, p.kpad / 16, 8, g)));
  }
};

template <> struct Fmt<QT_BF16> {
  static constexpr int GROUP = 0;
  // Chunk c: 32 values of slab j of stage st, lanes tig 2(c&1), 2(c&1)+1, halves 0, 1.
  __device__ __forceinline__ static void codes(const WPlanes& p, int n, int c, float v[32]) {
    const int st = c >> 2, j = (c >> 1) & 1, r = n & 15;
    const u8* base = p.qs + band_base(n, p.kpad * 2) + st * 4096 + (2 * j + (r >> 3)) * 1024 + (r & 7) * 64;
#pragma unroll
    for (int q4 = 0; q4 < 4; ++q4) {
      const int tig = 2 * (c & 1) + (q4 >> 1), half = q4 & 1;
      const uint4 q = ldg16(base + half * 512 + tig * 16);
      const u32 w[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        v[8 * q4 + 2 * e] = __uint_as_float(w[e] << 16);
        v[8 * q4 + 2 * e + 1] = __uint_as_float(w[e] & 0xffff0000u);
      }
    }
  }
  __device__ __forceinline__ static float scale(const WPlanes&, int, int) { return 1.f; }
};

// 32 raw BF16 words of x row `xr` from column k0; columns >= K read as zero (x is not
// padded, W is). `vec`: row pitch and base allow 16-byte loads.
__device__ __forceinline__ void load_x32_raw(const bf16_t* xr, int k0, int K, bool vec, u32 out[16]) {
  if (vec && k0 + 32 <= K) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      uint4 q = ldg16(xr + k0 + 8 * i);
      out[4 * i] = q.x; out[4 * i + 1] = q.y; out[4 * i + 2] = q.z; out[4 * i + 3] = q.w;
    }
  } else {
#pragma unroll
    for (int i = 0; i < 16; ++i) {
      int k = k0 + 2 * i;
      u32 lo = k < K ? (u32)__ldg(xr + k) : 0u;
      u32 hi = k + 1 < K ? (u32)__ldg(xr + k + 1) : 0u;
      out[i] = lo | (hi << 16);
    }
  }
}
