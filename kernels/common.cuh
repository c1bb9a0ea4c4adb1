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

struct WPlanes {
  const u8* qs;  // codes (all formats; BF16 values for QT_BF16)
  const u8* qh;  // high bits (Q5, Q6), else null
  const u8* sc;  // group scales: FP16 (Q*, W8) or E4M3 (NVFP4), else null
  int kpad;
};

// Fmt<QT>::codes: the 32 weights of chunk c (k = 32c .. 32c+31) of row n, WITHOUT the
// group scale, as floats that are exactly BF16-representable (small integers, E2M1
// values, or BF16 values). Kernels multiply by the scale after summing a group, so the
// tensor-core products code*x are exact and only FP32 accumulation rounds.
// Fmt<QT>::scale: the scale of group g of row n. GROUP is the group size (0: none).
template <int QT> struct Fmt;

__device__ __forceinline__ void unpack_nibbles(uint4 q, float v[32], float off) {
  const u32 w[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      u32 b = (w[i] >> (8 * j)) & 0xffu;
      v[8 * i + 2 * j] = (float)(b & 15u) - off;
      v[8 * i + 2 * j + 1] = (float)(b >> 4) - off;
    }
}

template <> struct Fmt<QT_Q4> {
  static constexpr int GROUP = 64;
  __device__ __forceinline__ static void codes(const WPlanes& p, int n, int c, float v[32]) {
    unpack_nibbles(ldg16(p.qs + (size_t)n * (p.kpad / 2) + (size_t)c * 16), v, 8.f);
  }
  __device__ __forceinline__ static float scale(const WPlanes& p, int n, int g) {
    return h2f(__ldg(reinterpret_cast<const unsigned short*>(p.sc) + (size_t)n * (p.kpad / 64) + g));
  }
};

template <> struct Fmt<QT_Q5> {
  static constexpr int GROUP = 64;
  __device__ __forceinline__ static void codes(const WPlanes& p, int n, int c, float v[32]) {
    unpack_nibbles(ldg16(p.qs + (size_t)n * (p.kpad / 2) + (size_t)c * 16), v, 16.f);
    u32 hb = __ldg(reinterpret_cast<const u32*>(p.qh + (size_t)n * (p.kpad / 8)) + c);
#pragma unroll
    for (int i = 0; i < 32; ++i) v[i] += (float)(((hb >> i) & 1u) << 4);
  }
  __device__ __forceinline__ static float scale(const WPlanes& p, int n, int g) {
    return Fmt<QT_Q4>::scale(p, n, g);
  }
};

template <> struct Fmt<QT_Q6> {
  static constexpr int GROUP = 64;
  __device__ __forceinline__ static void codes(const WPlanes& p, int n, int c, float v[32]) {
    unpack_nibbles(ldg16(p.qs + (size_t)n * (p.kpad / 2) + (size_t)c * 16), v, 32.f);
    uint2 hb = __ldg(reinterpret_cast<const uint2*>(p.qh + (size_t)n * (p.kpad / 4)) + c);
#pragma unroll
    for (int i = 0; i < 16; ++i) {
      v[i] += (float)(((hb.x >> (2 * i)) & 3u) << 4);
      v[16 + i] += (float)(((hb.y >> (2 * i)) & 3u) << 4);
    }
  }
  __device__ __forceinline__ static float scale(const WPlanes& p, int n, int g) {
    return Fmt<QT_Q4>::scale(p, n, g);
  }
};

template <> struct Fmt<QT_W8> {
  static constexpr int GROUP = 32;
  __device__ __forceinline__ static void codes(const WPlanes& p, int n, int c, float v[32]) {
    const u8* row = p.qs + (size_t)n * p.kpad + (size_t)c * 32;
    uint4 a = ldg16(row), b = ldg16(row + 16);
    const u32 w[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
#pragma unroll
    for (int i = 0; i < 8; ++i)
#pragma unroll
      for (int j = 0; j < 4; ++j) v[4 * i + j] = (float)(signed char)((w[i] >> (8 * j)) & 0xffu);
  }
  __device__ __forceinline__ static float scale(const WPlanes& p, int n, int g) {
    return h2f(__ldg(reinterpret_cast<const unsigned short*>(p.sc) + (size_t)n * (p.kpad / 32) + g));
  }
};

template <> struct Fmt<QT_NVFP4> {
  static constexpr int GROUP = 16;
  __device__ __forceinline__ static void codes(const WPlanes& p, int n, int c, float v[32]) {
    uint4 q = ldg16(p.qs + (size_t)n * (p.kpad / 2) + (size_t)c * 16);
    const u32 w[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
      for (int j = 0; j < 8; ++j) v[8 * i + j] = e2m1_to_f((w[i] >> (4 * j)) & 15u);
  }
  // The FP32 tensor scale is applied once, in the epilogue.
  __device__ __forceinline__ static float scale(const WPlanes& p, int n, int g) {
    return e4m3_to_f(__ldg(p.sc + (size_t)n * (p.kpad / 16) + g));
  }
};

template <> struct Fmt<QT_BF16> {
  static constexpr int GROUP = 0;
  __device__ __forceinline__ static void codes(const WPlanes& p, int n, int c, float v[32]) {
    const u8* row = p.qs + ((size_t)n * p.kpad + (size_t)c * 32) * 2;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      uint4 q = ldg16(row + 16 * i);
      const u32 w[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        v[8 * i + 2 * j] = __uint_as_float(w[j] << 16);
        v[8 * i + 2 * j + 1] = __uint_as_float(w[j] & 0xffff0000u);
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
