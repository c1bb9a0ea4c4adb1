// dec_q's per-format stage decoders (kernels/dec_q.cu): a ring stage of one 16-row band
// copied into shared memory, a lane's raw bits read back, and the MMA's A fragments built
// from them. Exactness: kernels/dec_q.cu's header.
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
  __device__ __forceinline__ static void copy(const Src& g, int st, int lane, u32 q, u32 t) {
#pragma unroll
    for (int j = 0; j < 2; ++j) cp_async16_all(q + j * 512 + lane * 16, g.q + st * 1024 + j * 512);
    if constexpr (HB == 1) cp_async16_if(t + lane * 16, g.h + st * 256, lane < 16);
    if constexpr (HB == 2) cp_async16_all(t + lane * 16, g.h + st * 512);
    cp_async16_if(t + 16 * QH_B + lane * 16, g.s + st * 64, lane < 4);
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

// The stage copy of NVFP4 and W8: a codes plane of QCH 512-byte chunks a stage (a row
// holds kpad * QCH / 4 bytes: NVFP4's nibbles, W8's bytes) and a scale plane of kpad / 16
// bytes a row (E4M3 per 16 k, FP16 per 32 k): 128 B a stage, copied by lanes 0 ... 7.
// Stage layout: codes QS [QCH chunks: 2 slabs (NVFP4), 2 slabs x 2 groups (W8)][32 lanes]
// [16 B]; tail scales [16 rows][8 B].
template <int QCH> struct Codes8Scales {
  static_assert(QCH == 2 || QCH == 4, "nibbles or bytes");
  static constexpr int QBYTES = QCH * 512, TBYTES = 16 * 8, WBYTES = QBYTES + TBYTES;
  struct Src {
    const u8* q;
    const u8* s;
  };
  __device__ __forceinline__ static void src(const WPlanes& p, int n_mt, int lane, Src& g) {
    g.q = p.qs + band_base(n_mt, p.kpad / (4 / QCH)) + lane * 16;
    g.s = p.sc + band_base(n_mt, p.kpad / 16) + lane * 16;
  }
  __device__ __forceinline__ static void copy(const Src& g, int st, int lane, u32 q, u32 t) {
#pragma unroll
    for (int m = 0; m < QCH; ++m) cp_async16_all(q + m * 512 + lane * 16, g.q + st * QBYTES + m * 512);
    cp_async16_if(t + lane * 16, g.s + st * 128, lane < 8);
  }
};

// NVFP4: the nibble plane and k ownership of Q4; a k step is one group (16 k), its E4M3
// scale folded into A (e4m3x2_up: exact, the operands carry 2^-8, multiplied back at the
// store with the tensor scale).
template <> struct Dec<QT_NVFP4> : Codes8Scales<2> {
  static constexpr int GSTEP = 0;
  static constexpr bool XNAT = true;
  struct Raw {
    u32 q[4];
    u32 s2[2][4];  // row i's scale of k step ks times 2^118, a BF16 pair
  };
  __device__ __forceinline__ static void read(const u8* qs, const u8* t, int lane, int j, Raw& w) {
    const int gid = lane >> 2;
    const uint4 q = lds16(qs + j * 512 + lane * 16);
    w.q[0] = q.x, w.q[1] = q.y, w.q[2] = q.z, w.q[3] = q.w;
#pragma unroll
    for (int i = 0; i < 2; ++i)  // groups 4 j .. 4 j + 3
      e4m3x4_splat(lds4(t + (gid + 8 * i) * 8 + j * 4), w.s2[i]);
  }
  // The pairs' E2M1 codes (nib_pair) as BF16 bits (e2m1x4_bf2), times the scale times
  // 2^118: the weight times 2^-8, exact.
  __device__ __forceinline__ static void frag(const Raw& w, u32 nib, u32 a[4][4]) {
#pragma unroll
    for (int ks = 0; ks < 4; ++ks) {
      u32 c[4];
      e2m1x4_bf2(w.q[ks], nib, c);
#pragma unroll
      for (int k = 0; k < 4; ++k) a[ks][k] = bf2_fma(c[k], w.s2[k & 1][ks], BF2_NEG_ZERO);
    }
  }
  __device__ __forceinline__ static float scale(const Raw&, int, int) { return 1.f; }
};

// W8, group 32 (two k steps): the plane is in fragment order (formats.md), so a lane's
// 16 bytes of a group are its A registers' code pairs of the group's two k steps.
template <> struct Dec<QT_W8> : Codes8Scales<4> {
  static constexpr int GSTEP = 2;
  static constexpr bool XNAT = true;
  struct Raw {
    uint4 q[2];  // [group]: word 2 kl + e, rows gid / gid + 8 at bytes 0, 1 / 2, 3
    float s[2][2];
  };
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
  __device__ __forceinline__ static void copy(const Src& g, int st, int lane, u32 q, u32) {
#pragma unroll
    for (int m = 0; m < 8; ++m) cp_async16_all(q + m * 512 + lane * 16, g.q + st * 4096 + m * 512);
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
