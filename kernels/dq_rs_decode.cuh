// dq_rs's decode (kernels/dq_rs.cu): a consumer warp's stage of packed weight, read from
// the ring slot in shared memory, into the four k16 A fragments of wgmma.m64n128k16.
//
// Exactness (dq_gemm's numerics, docs/routes.md): each weight is scale x code rounded
// once to BF16, done here in BF16 pairs: the code pair by a LOP3 over a BF16 magic
// number, the offset by one exact fma, the FP16 scale split into an exact hi + lo
// (split_scale); NVFP4's e2m1 x e4m3 is exact in BF16; W8 by one PRMT a code.
#include "common.cuh"
#include "dq_rs_tile.cuh"

// Two values times FP32 s as one BF16 pair, each rounded once: two weights (the lower k in
// the low half; each product exact, dq_gemm's numerics) or two outputs (rs_store).
__device__ __forceinline__ u32 bf16_pair(float lo, float hi, float s) { return bf2_pack(lo * s, hi * s); }

// An FP16 scale s as BF16 pairs hi = RN(s) and lo = s - hi. lo is exact in BF16 (it has at
// most 2 significant bits: s has 11), so for a code value v with |v| <= 32, v lo is exact
// (<= 8 bits) and fma(v, hi, v lo) is v s rounded once: the same bits as the exact FP32
// product rounded to BF16 (dq_gemm's numerics; checked in NumPy for every finite FP16
// scale and every |v| <= 32: docs/perf/prefill_h200.md@8fe804d, "Numerics and
// conformance").
struct Bf2Scale {
  u32 hi, lo;
};
__device__ __forceinline__ Bf2Scale split_scale(float s) {
  Bf2Scale r;
  asm("cvt.rn.bf16x2.f32 %0, %1, %1;" : "=r"(r.hi) : "f"(s));
  const float lo = s - __uint_as_float(r.hi << 16);
  asm("cvt.rn.bf16x2.f32 %0, %1, %1;" : "=r"(r.lo) : "f"(lo));
  return r;
}

// One 16-byte shared-memory load, opaque to NVVM: with a plain uint4 load, NVVM's
// byte-usage narrowing around prmt chose between keeping the vector load and re-loading
// one word, differently from one compile to the next (the same source gave two PTX texts;
// tests/cpu/test_ir.py::test_rerun_is_byte_identical caught it).
//
// The address is base + off inside the asm, base the thread's (one register for a whole
// loop body) and off the slot's and k step's constant: ptxas folds off into the load's
// immediate. A whole address per load kept sixteen of them live across the loop, and with
// the persistent schedule's state those spilled (into the loop, at NB = 2).
__device__ __forceinline__ uint4 lds128(u32 base, u32 off) {
  uint4 v;
  // volatile + "memory": the load must stay after the stage's mbarrier wait (a plain asm
  // has no memory dependence, and NVVM hoisted all sixteen of a loop body above it).
  asm volatile("{\n.reg .b32 a;\nadd.u32 a, %4, %5;\nld.shared.v4.u32 {%0, %1, %2, %3}, [a];\n}"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "r"(base), "r"(off)
               : "memory");
  return v;
}

// One thread's words of one stage, read from shared memory where rs_frag uses them.
//   q(i): codes. 4-bit codes: the thread's own 16 bytes (i = 0 only), word ks its
//   fragment codes of k step ks (formats.md); W8: the thread's 16 bytes of group i (k
//   steps 2 i, 2 i + 1); BF16: step i ^ (gid >> 1)'s four fragment words. h(): the
//   thread's Q5 / Q6 high-bit words; s(i): row gid + 8 i's scales (Q4/Q5/Q6 the FP16
//   scale; W8 the FP16 scales of groups 2 j, 2 j + 1; NVFP4 the E4M3 bytes of groups
//   4 j .. 4 j + 3).
// (Not loaded a stage ahead, right after the previous stage's MMAs: the words held across
// the MMAs' issue are many, and Q6 / W8 / BF16 lost 13-14 % (at NB = 2 they spilled):
// docs/perf/prefill_h200.md@8fe804d, versions table, "stage words a stage ahead".)
//
// Offsets follow formats.md's storage order: the stage's blocks lie at `wst` (codes, then
// high bits, then scales, each 8 bands; the stage is half j of its 128-k storage stage:
// its codes and high bits are that half's, its scales the whole storage stage's).
// 4-bit codes: lane_codes = the shared address of the thread's 16 bytes in slot 0 (band,
// lane block gid * 4 + tig), slot_off = the slot's offset.
template <int QT> struct RsSmem {
  using B = RsBand<QT>;
  const u8 *cb, *hb, *sb;
  u32 lane_codes, slot_off;
  int j, gid, tig;
  __device__ __forceinline__ RsSmem(const u8* wst, u32 lane_codes_, u32 slot_off_, int band, int j_, int gid_,
                                    int tig_)
      : cb(wst + band * B::CODES),
        hb(wst + 8 * B::CODES + band * B::QH),
        sb(wst + 8 * (B::CODES + B::QH) + band * B::SC),
        lane_codes(lane_codes_),
        slot_off(slot_off_),
        j(j_),
        gid(gid_),
        tig(tig_) {}
  __device__ __forceinline__ uint4 q(int i) const {
    if constexpr (QT == QT_BF16) {
      // Sub-block (2 i + h) of the half: rows gid + 8 i, k 8 h .. 8 h + 7 of step ks at
      // lane block (gid, ks); the pair 2 tig is its bytes 4 tig .. 4 tig + 3.
      //
      // Lane block (gid, ks) starts at byte 64 gid + 16 ks, so one load of step ks by the
      // whole warp would put rows gid, gid + 2, gid + 4, gid + 6 on the same four banks:
      // 4-way conflicts, 64 shared-memory wavefronts per warp and stage where 16 carry the
      // data. Load m of the warp instead reads step m ^ g in each thread (g = gid >> 1):
      // the four rows of one parity then hit four different bank groups; rs_frag puts the
      // steps back (ncu: L1 79 -> 43 % busy; BF16 [14336,5120] T = 128 56.7 -> 53.7 us:
      // docs/perf/prefill_h200.md@8fe804d, versions table, 37049e0).
      const u8* p = cb + gid * 64 + 4 * tig + ((i ^ (gid >> 1)) << 4);
      return make_uint4(*reinterpret_cast<const u32*>(p), *reinterpret_cast<const u32*>(p + 1024),
                        *reinterpret_cast<const u32*>(p + 512), *reinterpret_cast<const u32*>(p + 1536));
    } else if constexpr (QT == QT_W8) {
      // Group (32 k) i of the half is 512 bytes; the thread's 16 bytes of it (formats.md)
      // are word 2 kl + e: register 2 e + row's code pair of k step 2 i + kl at bytes
      // 2 row, 2 row + 1: one conflict-free LDS.128 per group (four when each quad loaded
      // the same bytes: docs/perf/prefill_h200.md@8fe804d, versions table, b9c0e3b).
      return *reinterpret_cast<const uint4*>(cb + i * 512 + (gid * 4 + tig) * 16);
    } else {
      // 4-bit codes: one conflict-free LDS.128 a stage (a warp reads 512 contiguous
      // bytes: 4 wavefronts; four loads a stage and 16 wavefronts when each quad loaded
      // the same lane block: docs/perf/prefill_h200.md@8fe804d, versions table, f85ae6f).
      return lds128(lane_codes, slot_off + i * 16);
    }
  }
  // The thread's high-bit words of the stage (formats.md; the stage copies slab j of its
  // 128-k storage stage alone): Q5 one (x.y unused), Q6 two (k steps 0, 1 and 2, 3).
  // hi_at takes a register's bits out of them.
  __device__ __forceinline__ uint2 h() const {
    const int lane = gid * 4 + tig;
    if constexpr (QT == QT_Q5) return make_uint2(*reinterpret_cast<const u32*>(hb + lane * 4), 0u);
    if constexpr (QT == QT_Q6) return *reinterpret_cast<const uint2*>(hb + lane * 8);
    return make_uint2(0u, 0u);
  }
  __device__ __forceinline__ u32 s(int i) const {
    const int row = gid + 8 * i;
    if constexpr (QT == QT_W8 || QT == QT_NVFP4) return *reinterpret_cast<const u32*>(sb + row * 8 + 4 * j);
    if constexpr (QT != QT_BF16) return *reinterpret_cast<const unsigned short*>(sb + row * 4 + 2 * j);
    return 0;
  }
};
// Stage fragments from the stage's words: the four k16 A fragments (a[ks][0..3]). Per
// warp, wgmma's A layout is mma.m16n8k16's: thread (gid, tig) holds rows gid (regs 0, 2)
// and gid + 8 (regs 1, 3), k 2 tig, 2 tig + 1 (regs 0, 1) and 2 tig + 8, 2 tig + 9 (regs
// 2, 3) of each k16 step: register k's two codes are nibbles k and k + 4 of word ks of
// the thread's codes (formats.md). nib: 0x000F000F from a register (nib_mask).
template <int QT>
__device__ __forceinline__ void rs_frag(const RsSmem<QT>& r, u32 nib, u32 a[4][4]) {
  if constexpr (QT == QT_BF16) {
    // r.q(m) holds step m ^ g (RsSmem::q): a[ks] = q[ks ^ g] = q[(ks ^ (g & 2)) ^ (g & 1)],
    // by two rounds of selects (32 per stage, on an otherwise idle ALU).
    const int g = r.gid >> 1;
    const bool b1 = g & 2, b0 = g & 1;
    u32 t[4][4];
#pragma unroll
    for (int m = 0; m < 4; ++m) {
      const uint4 v = r.q(m);
      t[m][0] = v.x, t[m][1] = v.y, t[m][2] = v.z, t[m][3] = v.w;
    }
#pragma unroll
    for (int m = 0; m < 4; ++m)
#pragma unroll
      for (int k = 0; k < 4; ++k) a[m][k] = b1 ? t[m ^ 2][k] : t[m][k];
#pragma unroll
    for (int m = 0; m < 4; m += 2)
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        const u32 x0 = a[m][k], x1 = a[m + 1][k];
        a[m][k] = b0 ? x1 : x0;
        a[m + 1][k] = b0 ? x0 : x1;
      }
  } else if constexpr (QT == QT_W8) {
#pragma unroll
    for (int kh = 0; kh < 2; ++kh) {
      const int sh = 16 * kh;  // group 2 j + kh: the scale word's half
      const float s0 = h2f((unsigned short)(r.s(0) >> sh)), s1 = h2f((unsigned short)(r.s(1) >> sh));
      const uint4 q = r.q(kh);
      const u32 w[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
      for (int kl = 0; kl < 2; ++kl)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          // Rows gid (bytes 0, 1) and gid + 8 (bytes 2, 3). One PRMT a code (i8_float):
          // a shift and two LOP3s a code made the stage 185 instructions instead of 145,
          // and W8's decode alone outlasted its MMAs (docs/perf/prefill_h200.md@8fe804d,
          // versions table, 39199f4).
          const u32 x = w[2 * kl + e] ^ 0x80808080u;
          a[2 * kh + kl][2 * e] = bf16_pair(i8_float(x, 0), i8_float(x, 1), s0);
          a[2 * kh + kl][2 * e + 1] = bf16_pair(i8_float(x, 2), i8_float(x, 3), s1);
        }
    }
  } else {
    constexpr u32 OFF = QT == QT_Q4 ? 8u : QT == QT_Q5 ? 16u : 32u;
    constexpr u32 NEG = (0xC300u | OFF) * 0x10001u;  // BF16 -(128 + OFF) in both halves
    u32 e[2][4] = {};  // NVFP4: row i's scale of k step ks times 2^118, a BF16 pair
    if constexpr (QT == QT_NVFP4)  // E4M3 scale per 16 k: group 4 j + ks
#pragma unroll
      for (int i = 0; i < 2; ++i) e4m3x4_splat(r.s(i), e[i]);
    Bf2Scale sc0{}, sc1{};
    if constexpr (QT != QT_NVFP4)
      sc0 = split_scale(h2f((unsigned short)r.s(0))), sc1 = split_scale(h2f((unsigned short)r.s(1)));
    const uint4 q = r.q(0);
    const u32 qw[4] = {q.x, q.y, q.z, q.w};
    uint2 hw = make_uint2(0u, 0u);
    if constexpr (QT == QT_Q5 || QT == QT_Q6) hw = r.h();
#pragma unroll
    for (int ks = 0; ks < 4; ++ks) {
      u32 c[4] = {};
      if constexpr (QT == QT_NVFP4) e2m1x4_bf2(qw[ks], nib, c);
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        if constexpr (QT == QT_NVFP4) {
          a[ks][k] = bf2_fma(c[k], e[k & 1][ks], BF2_NEG_ZERO);
        } else {
          // The pair's codes at bits 0..3 (lower k) and 16..19: a shift and the mask (for
          // k = 0 the mask alone).
          const u32 w = qw[ks] >> (4 * k);
          // u = code | high bits << 4 (< 64) of the pair's lower k in bits 0..5, higher k
          // in bits 16..21, over BF16 128.0 (one LOP3, the mask from a register): the
          // halves are 128 + u, and one fma takes off 128 + OFF exactly.
          u32 d = lop3_or_and<BF2_MAGIC>(w, nib);
          if constexpr (QT == QT_Q5) d |= hi_at<1>(hw.x, 4 * ks + k);
          if constexpr (QT == QT_Q6) d |= hi_at<2>((ks >> 1) ? hw.y : hw.x, 4 * (ks & 1) + k);
          const u32 v = bf2_fma(d, BF2_ONE, NEG);  // code value, exact: |v| <= 32
          const Bf2Scale& sc = (k & 1) ? sc1 : sc0;
          a[ks][k] = bf2_fma(v, sc.hi, bf2_fma(v, sc.lo, BF2_NEG_ZERO));
        }
      }
    }
  }
}
