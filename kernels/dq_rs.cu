// dq_rs: the prefill route on sm_90a (Hopper). out = x · W^T with the weight decoded by
// the warps that multiply it, straight into wgmma's register A operand (the RS form):
// the decoded weight never goes to memory, and nothing but x and the packed planes is
// read (docs/routes.md, "dq_rs"; docs/perf/prefill_h200.md, "dq_rs").
//
// A tile is 128 weight rows x 128 NB tokens; K goes in stages of 64. The grid is persistent
// (Stream-K): block b owns a contiguous run of the (tile, 128-k stage pair) iterations,
// tiles one after another, so every SM gets the same number of stage pairs whatever the
// tile count (a tile count just above a multiple of the SMs had left up to half of them
// idle for a whole wave). Its 384 threads are three warpgroups:
// - warpgroups 0 and 1 (the consumers) hold rows 64 c .. 64 c + 63 each; warp w (0..7)
//   decodes band w (16 rows) of a stage into four k16 A fragments and issues
//   wgmma.m64n128k16 per k16 step and 128-token half, A from registers, B (x) from
//   shared memory. Stage st's MMAs run while the warp decodes stage st + 1 (two
//   fragment sets; wgmma.wait_group 1), so that the decode can run under the tensor
//   cores. Measured, it mostly does not: with the planes' earlier byte order the MMAs'
//   reads of x, the decode's loads and the TMA writes oversubscribed the SM's
//   shared-memory pipe, and at NB = 1 the decode alone took longer than the MMAs' peak
//   stage (541 cycles against 512; they took 611 alone). In fragment order it takes less
//   than the MMAs alone (Q4 T = 128: 21.2 against 30.4 us) and the two still add up
//   (39.1 us; docs/perf/prefill_h200.md, "Why the decode and the MMAs do not overlap").
// - warpgroup 2: one thread issues the copies — per stage one TMA box of x (64 k x 128 NB
//   tokens, 128-byte swizzle; out-of-bounds tokens and columns read as zero) and one box
//   per weight plane (the stage's blocks of the tile's 8 bands, as stored: formats.md),
//   all completing on the stage's mbarrier; a ring of S stages, each slot refilled once
//   both consumer warpgroups have retired its MMAs. The ring runs on across the block's
//   tiles, so the next tile's first stages load during a tile's epilogue; each consumer
//   warpgroup's output box leaves by one TMA store that runs on under the next tile.
//
// Why this shape (measured on the H200, docs/perf/prefill_h200.md): a separate decode
// warpgroup writing a BF16 A tile to shared memory (dq_ws, not landed) spent ~89 KB of
// shared-memory traffic per stage against 512 cycles of MMA and ran at 1440 cycles per
// stage; decoding into registers removes the A tile's store and its reads by the MMAs.
//
// Numerics are dq_gemm's: each weight is scale x code computed exactly in FP32 and
// rounded once to BF16 (NVFP4: e4m3 x e2m1, exact; BF16: copied); FP32 accumulation;
// NVFP4's tensor scale multiplies the FP32 sum; one rounding to BF16 at the end.
// Requires sm_90a (wgmma, TMA, setmaxnreg): NVRTC gets -arch=sm_90a (routes/dq_rs.py).
#include "common.cuh"

constexpr int RS_BK = 64;                    // k per stage
constexpr int RS_BM = 128;                   // weight rows per tile: 2 consumer warpgroups x m64
constexpr int RS_BT = 128;                   // tokens per wgmma (m64n128k16) and per x box half
constexpr int RS_X_HALF = RS_BT * RS_BK * 2;  // 16 KB: one 128-token half of an x stage
constexpr int RS_ATOM = 1024;                // 8 swizzled 128-byte rows: the x tile's SBO

// Bytes of one 16-row band per 64-k stage, per plane (formats.md: a 128-k storage stage
// holds two 64-k slabs of codes and of high bits, each contiguous, so a stage copies its
// slab; the scales, row by row, are copied whole per 128 k). Copying Q6's high bits whole
// too (512 bytes) kept its NB = 1 ring at 4 slots: 8 did not fit in shared memory.
template <int QT> struct RsBand;
template <> struct RsBand<QT_Q4> { static constexpr int CODES = 512, QH = 0, SC = 64; };
template <> struct RsBand<QT_Q5> { static constexpr int CODES = 512, QH = 128, SC = 64; };
template <> struct RsBand<QT_Q6> { static constexpr int CODES = 512, QH = 256, SC = 64; };
template <> struct RsBand<QT_W8> { static constexpr int CODES = 1024, QH = 0, SC = 128; };
template <> struct RsBand<QT_NVFP4> { static constexpr int CODES = 512, QH = 0, SC = 128; };
template <> struct RsBand<QT_BF16> { static constexpr int CODES = 2048, QH = 0, SC = 0; };

struct alignas(64) RsTensorMap {  // CUtensorMap: 128 opaque bytes, 64-byte aligned
  u64 v[16];
};

__device__ __forceinline__ void mbar_init(u32 bar, u32 count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_arrive(u32 bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory");
}
__device__ __forceinline__ void mbar_expect_tx(u32 bar, u32 bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_wait(u32 bar, u32 parity) {
  u32 done = 0;
  while (!done) {
    asm volatile(
        "{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
        : "=r"(done)
        : "r"(bar), "r"(parity)
        : "memory");
  }
}
// A split tile's count of published partials, ordered before the partials' reads.
__device__ __forceinline__ u32 ld_acquire(const u32* p) {
  u32 v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}
// Counts a split tile's partial: release for the partial's stores (which the block's
// threads made before a barrier), acquire for the others' when this count is the last.
__device__ __forceinline__ u32 atom_add_acq_rel(u32* p, u32 v) {
  u32 old;
  asm volatile("atom.acq_rel.gpu.global.add.u32 %0, [%1], %2;" : "=r"(old) : "l"(p), "r"(v) : "memory");
  return old;
}
// One box of a 2-D tensor map (x: {k, token}; a weight plane: {8-byte column, band}).
__device__ __forceinline__ void tma_2d(u32 dst, const RsTensorMap* map, int c0, int c1, u32 bar) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%2, %3}], [%4];" ::"r"(dst),
      "l"(reinterpret_cast<u64>(map)), "r"(c0), "r"(c1), "r"(bar)
      : "memory");
}

// wgmma shared-memory descriptor: start, leading and stride byte offsets (>> 4), swizzle
// mode (1: 128-byte). x's box is K-major with 128-byte rows: SBO = one 1 KB swizzle atom,
// LBO unused, start + 32 bytes per k16 step (verified: fused/probe_tma.py).
__device__ __forceinline__ u64 rs_desc(u32 addr) {
  return (u64)((addr & 0x3FFFF) >> 4) | ((u64)(16 >> 4) << 16) | ((u64)(RS_ATOM >> 4) << 32) | (1ull << 62);
}

// Keeps the compiler from moving accumulator accesses across the wgmma fence and wait
// (an accumulator is undefined between the MMA's issue and its wait; CUTLASS's
// warpgroup_fence_operand).
__device__ __forceinline__ void acc_fence(float d[64]) {
#pragma unroll
  for (int i = 0; i < 64; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

__device__ __forceinline__ void wgmma_rs(float d[64], const u32 a[4], u64 db) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
      "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%"
      "27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%"
      "52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63}, {%64,%65,%66,%67}, %68, p, 1, 1, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
        "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
        "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
        "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db));
}

// Two values times FP32 s as one BF16 pair, each rounded once: two weights (the lower k in
// the low half; each product exact, dq_gemm's numerics) or two outputs (rs_store).
__device__ __forceinline__ u32 bf16_pair(float lo, float hi, float s) { return bf2_pack(lo * s, hi * s); }

// (x & m) | c in one LOP3: m in a register (nib_mask) and c an immediate; with both
// immediates ptxas emits two LOP3s (one immediate operand each).
template <u32 C>
__device__ __forceinline__ u32 lop3_or_and(u32 x, u32 m) {
  u32 d;
  asm("lop3.b32 %0, %1, %2, %3, 0xEA;" : "=r"(d) : "r"(x), "r"(m), "n"(C));
  return d;
}
// 0x000F000F in a register ptxas cannot fold back into an immediate: zero is any
// non-negative int shifted right by 31 (here kpad, a kernel argument).
__device__ __forceinline__ u32 nib_mask(int nonneg) {
  u32 m;
  asm("xor.b32 %0, %1, 0x000F000F;" : "=r"(m) : "r"((u32)nonneg >> 31));
  return m;
}
// An FP16 scale s as BF16 pairs hi = RN(s) and lo = s - hi. lo is exact in BF16 (it has at
// most 2 significant bits: s has 11), so for a code value v with |v| <= 32, v lo is exact
// (<= 8 bits) and fma(v, hi, v lo) is v s rounded once: the same bits as the exact FP32
// product rounded to BF16 (dq_gemm's numerics; checked in NumPy for every finite FP16
// scale and every |v| <= 32, docs/perf/prefill_h200.md "v4").
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
// (Loading a stage's words a stage ahead, right after the previous stage's MMAs, was
// measured and dropped: Q4 / Q5 1-3 % slower, NVFP4 2 % faster, Q6 / W8 / BF16 13-14 %
// slower, whose words held across the MMAs' issue are many; at NB = 2 they spilled.
// docs/perf/prefill_h200.md, versions table, "stage words a stage ahead".)
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
      // whole warp put rows gid, gid + 2, gid + 4, gid + 6 on the same four banks: 4-way
      // conflicts, 64 shared-memory wavefronts per warp and stage where 16 carry the data
      // (ncu at c357c42, T = 128: L1 79 % busy, MIO throttle 2.49 per instruction). Load m
      // of the warp instead reads step m ^ g in each thread (g = gid >> 1): the four rows
      // of one parity then hit four different bank groups; rs_frag puts the steps back.
      // Measured on the H200 (BF16 [14336,5120], T = 128): 56.7 us at 5be0201, 53.2 with
      // this (tools/dq_rs_tiles.py).
      const u8* p = cb + gid * 64 + 4 * tig + ((i ^ (gid >> 1)) << 4);
      return make_uint4(*reinterpret_cast<const u32*>(p), *reinterpret_cast<const u32*>(p + 1024),
                        *reinterpret_cast<const u32*>(p + 512), *reinterpret_cast<const u32*>(p + 1536));
    } else if constexpr (QT == QT_W8) {
      // Group (32 k) i of the half is 512 bytes; the thread's 16 bytes of it (formats.md)
      // are word 2 kl + e: register 2 e + row's code pair of k step 2 i + kl at bytes
      // 2 row, 2 row + 1. One conflict-free LDS.128 per group (the byte order before had
      // each quad load the same 16 bytes, eight loads a stage).
      return *reinterpret_cast<const uint4*>(cb + i * 512 + (gid * 4 + tig) * 16);
    } else {
      // 4-bit codes: one conflict-free LDS.128 a stage (a warp reads 512 contiguous
      // bytes: 4 wavefronts). The byte order before 2026-12 had each quad load the same
      // lane block of one k step, four loads a stage (16 wavefronts), and take its bytes
      // apart with a prmt (docs/perf/prefill_h200.md, versions table).
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
          // Rows gid (bytes 0, 1) and gid + 8 (bytes 2, 3). A PRMT a code (i8_float): the
          // shift and two LOP3s a code before it took the stage from 145 to 185
          // instructions, W8's decode alone then outlasting its MMAs (prefill_h200.md).
          const u32 x = w[2 * kl + e] ^ 0x80808080u;
          a[2 * kh + kl][2 * e] = bf16_pair(i8_float(x, 0), i8_float(x, 1), s0);
          a[2 * kh + kl][2 * e + 1] = bf16_pair(i8_float(x, 2), i8_float(x, 3), s1);
        }
    }
  } else {
    constexpr u32 OFF = QT == QT_Q4 ? 8u : QT == QT_Q5 ? 16u : 32u;
    constexpr u32 NEG = (0xC300u | OFF) * 0x10001u;  // BF16 -(128 + OFF) in both halves
    u32 e0 = 0, e1 = 0;  // NVFP4: the rows' scales times 2^118 as BF16 pairs
    Bf2Scale sc0{}, sc1{};
    if constexpr (QT != QT_NVFP4)
      sc0 = split_scale(h2f((unsigned short)r.s(0))), sc1 = split_scale(h2f((unsigned short)r.s(1)));
    const uint4 q = r.q(0);
    const u32 qw[4] = {q.x, q.y, q.z, q.w};
    uint2 hw = make_uint2(0u, 0u);
    if constexpr (QT == QT_Q5 || QT == QT_Q6) hw = r.h();
#pragma unroll
    for (int ks = 0; ks < 4; ++ks) {
      if constexpr (QT == QT_NVFP4) {  // E4M3 scale per 16 k: group 4 j + ks
        e0 = e4m3_up(r.s(0) >> (8 * ks));
        e1 = e4m3_up(r.s(1) >> (8 * ks));
      }
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        // The pair's codes at bits 0..3 (lower k) and 16..19: a shift and the mask (for
        // k = 0 the mask alone).
        const u32 w = qw[ks] >> (4 * k);
        if constexpr (QT == QT_NVFP4) {
          a[ks][k] = bf2_fma(e2m1_bf2(w & nib), (k & 1) ? e1 : e0, BF2_NEG_ZERO);
        } else {
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

// The tile's output through shared memory (cs: 128 tokens x 128 rows BF16, its own region:
// the ring may already hold the block's next tile). Consumer warpgroup c holds rows
// 64 c .. 64 c + 63 in wgmma's accumulator layout and stages them in its own 16 KB box,
// [128 tokens][64 rows] in TMA's 128-byte swizzle (a token's 16-byte row chunk j at
// chunk j ^ token & 7; cs starts on a 1 KB boundary): one TMA store (otma) then copies
// the box to out while the warpgroup goes on to its next tile, and the swizzle keeps a
// stmatrix's 8 tokens on 8 distinct 16-byte bank groups.
__device__ __forceinline__ int cs_at(int col, int r) {
  return (r >> 6) * (RS_BT * 64) + col * 64 + ((((r >> 3) ^ col) & 7) << 3) + (r & 7);
}
// Four 8 x 8 BF16 matrices from the accumulator fragment layout into shared memory,
// transposed: lane 8 m + i gives the address of row i of matrix m (a token's 16 bytes).
__device__ __forceinline__ void stmatrix_x4_trans(u32 addr, u32 r0, u32 r1, u32 r2, u32 r3) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%0], {%1, %2, %3, %4};" ::"r"(addr), "r"(r0),
               "r"(r1), "r"(r2), "r"(r3)
               : "memory");
}
// One box of cs to out ({row, token} of the output map; rows past N and tokens past T
// are not written), in the issuing thread's bulk group.
__device__ __forceinline__ void tma_store_2d(const RsTensorMap* map, u32 src, int c0, int c1) {
  asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%1, %2}], [%3];" ::"l"(
                   reinterpret_cast<u64>(map)),
               "r"(c0), "r"(c1), "r"(src)
               : "memory");
  asm volatile("cp.async.bulk.commit_group;" ::: "memory");
}
// The issuing thread's earlier box stores have read cs (it may be written again).
__device__ __forceinline__ void tma_store_read_wait() {
  asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
}
// The staging writes a warp's 16 rows x 128 tokens as pairs packed by one cvt and 8
// stmatrix.x4.trans a thread: one scalar 2-byte store, a software rounding (f2bf) and an
// address per value before took 18 % of the kernel's instructions at [14336,5120] T=1024
// (ncu: 47.7 M against 39.1 M without the store) and the store ~5 us a 128 x 256 tile
// (tools/dq_rs_ablate.py `nostore` / `nostg`: staging, not the global stores, most of it).
// With an output map (otma: out 16-byte aligned, N a multiple of 8) thread 0 of the
// warpgroup stores the box by TMA, and the warpgroup meets on its own named barrier
// (2 + c); otherwise the 256 consumers copy cs out in 16-byte chunks (or elements) and
// meet on barrier 1.
__device__ __forceinline__ void rs_store(const float acc[64], bf16_t* cs, int c, int ct, float tensor_scale,
                                         const RsTensorMap* omap, bool otma, bf16_t* __restrict__ out, int N,
                                         int T, int n0, int t0) {
  // ct through an opaque move: the staging addresses below are the same for every tile,
  // and NVVM otherwise hoists them out of the tile loop, where they spilled.
  asm volatile("mov.b32 %0, %0;" : "+r"(ct));
  const int wt = ct & 127, lane = wt & 31, w4 = wt >> 5;
  // (The warpgroup's barrier id is 2 + ct >> 7 = 2 + c, from ct: a register of its own
  // spilled at BF16 NB = 2, into the main loop.)
  if (otma) {
    // The box's previous store (this warpgroup's last half or tile) has read cs.
    if (wt == 0) tma_store_read_wait();
    asm volatile("bar.sync %0, 128;" ::"r"(2 + (ct >> 7)) : "memory");
  } else {
    asm volatile("bar.sync 1, 256;" ::: "memory");
  }
  // Matrix m = lane >> 3 of stmatrix x4 number j / 2: token block j + (m >> 1), rows
  // 64 c + 16 w4 + 8 (m & 1) .. + 7 (registers 0 / 1: rows gid / gid + 8 of block j,
  // 2 / 3 of block j + 1); its row (lane & 7) is that block's token.
  const int m = lane >> 3, chunk = 8 * (8 * c + 2 * w4 + (m & 1));
  const u32 cs0 = smem_u32(cs);
#pragma unroll
  for (int j = 0; j < 16; j += 2) {
    const int col = 8 * (j + (m >> 1)) + (lane & 7);
    const float* a0 = acc + 4 * j;
    const float* a1 = acc + 4 * j + 4;
    stmatrix_x4_trans(cs0 + 2u * (u32)cs_at(col, chunk), bf16_pair(a0[0], a0[1], tensor_scale),
                      bf16_pair(a0[2], a0[3], tensor_scale), bf16_pair(a1[0], a1[1], tensor_scale),
                      bf16_pair(a1[2], a1[3], tensor_scale));
  }
  if (otma) {
    // The staging's generic-proxy writes made visible to the TMA unit (async proxy).
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    asm volatile("bar.sync %0, 128;" ::"r"(2 + (ct >> 7)) : "memory");
    if (wt == 0) tma_store_2d(omap, cs0 + 2u * (u32)(c * RS_BT * 64), n0 + 64 * c, t0);
    return;
  }
  asm volatile("bar.sync 1, 256;" ::: "memory");
  const bool ovec = N % 8 == 0 && (reinterpret_cast<size_t>(out) & 15) == 0;
  for (int idx = ct; idx < RS_BT * (RS_BM / 8); idx += 256) {
    const int col = idx / (RS_BM / 8), r = 8 * (idx % (RS_BM / 8));
    const int t = t0 + col, n = n0 + r;
    if (t >= T || n >= N) continue;
    const bf16_t* src = cs + cs_at(col, r);
    bf16_t* dst = out + (size_t)t * N + n;
    if (ovec) {
      *reinterpret_cast<uint4*>(dst) = *reinterpret_cast<const uint4*>(src);
    } else {
      for (int e = 0; e < 8 && n + e < N; ++e) dst[e] = src[e];
    }
  }
}

// Block b's iterations of the (tile, stage pair) axis: [start(b), start(b + 1)), a tile's
// pairs consecutive. Runs begin on multiples of `unit` pairs (2 where a tile has an even
// number: at S = 4 every run of a tile is then a whole number of ring laps; at S = 6 or 8
// a run may end part-way through a lap, and the lap's unused slots are passed, see
// below). Each block has at least one unit (the host keeps G <= total / unit).
struct RsSched {
  long long units;  // total / unit
  int blocks, unit;
  __device__ __forceinline__ long long start(int b) const { return (long long)b * units / blocks * unit; }
  // The block whose run holds iteration i: the largest b with start(b) <= i.
  __device__ __forceinline__ int owner(long long i) const {
    return (int)(((i / unit + 1) * blocks + units - 1) / units) - 1;
  }
};

// One loop body is one lap of the ring (S slots, S stages): its stage u sits in slot u,
// so every shared-memory address of the body is a constant offset, and the body ends in
// wait_group 0 (with MMAs in flight across the loop's back edge, ptxas cannot tell the
// two fragment sets apart and serializes every wgmma, C7513; within straight-line code
// it tracks them). A tile's run whose stage count is not a multiple of S leaves the
// last lap's slots from nst % S on unused; the copy thread and the consumers pass them
// with a bare arrive and wait, so that each slot's barrier phases still count laps.
// (With a run-dependent slot, the addresses took 20 % more instructions per stage.)
// S is the deepest even ring that fits (routes/dq_rs.py::stages: 8, 6 or 4): 8 slots put
// twice the copies of x and W in flight of 4 (tools/dq_rs_ablate.py at 42b3b1f: Q4
// [14336,5120] T=128 45.9 -> 43.4 us, the decode with the copies and no MMAs 38.6 -> 30.1).
constexpr int RS_CS = RS_BT * RS_BM * 2;  // the output staging tile, bytes

// S: ring slots; NB: 128-token halves per tile (the decode of a stage then feeds 128 NB
// tokens of MMAs). Dynamic shared memory: 1 KB of alignment slack, [S][x stage: NB x 16 KB]
// [S][W stage][cs: 32 KB][2 S mbarriers][a 16-byte word] (routes/dq_rs.py: shared_bytes).
//
// Tiles are numbered row tile fastest (tiles_x of them per token tile; n_tiles in all),
// so neighbouring blocks share x's token tile in L2; a block walks its run's tiles last
// first. A tile whose pairs fall to nz > 1 blocks (Stream-K's split) is stored by the
// last of them to finish it, which adds the others' FP32 partials to its own in block
// order — the same bits whichever block is last, so results stay bitwise repeatable. The
// others each publish theirs in a slot of `part` (block b's slots: 2 b for the tile its
// run starts inside, 2 b + 1 for the one it ends inside) and count it in the tile's
// counter in `cnt` (zeroed by the host before the call); a block that finds nz - 1
// counted is the last. No block waits for another.
//
// The last token tile reads x through `xtail`, whose box is only tail_rows tall (T's rows
// in that tile, rounded up to 8; 0: no such map): a box mostly past T made TMA zero-fill
// most of it, measured slow (docs/perf/prefill_h200.md, v5). The stage's rows past the
// box keep stale values; each output row depends on its own x row only, and rows past T
// are never stored.
template <int QT, int S, int NB>
__global__ void __launch_bounds__(384, 1)
    dq_rs(const __grid_constant__ RsTensorMap xmap, const __grid_constant__ RsTensorMap xtail,
          const __grid_constant__ RsTensorMap wcodes, const __grid_constant__ RsTensorMap whigh,
          const __grid_constant__ RsTensorMap wscale, const __grid_constant__ RsTensorMap omap, float tensor_scale,
          int N, int kpad, bf16_t* __restrict__ out, int T, float4* __restrict__ part, u32* __restrict__ cnt,
          int tiles_x, int n_tiles, int tail_rows, int otma) {
  using B = RsBand<QT>;
  constexpr int WST = 8 * (B::CODES + B::QH + B::SC), XT = NB * RS_X_HALF;
  extern __shared__ __align__(16) u8 smem_raw[];
  // The 128-byte swizzle works on 1 KB atoms: the x stages start on a 1 KB boundary.
  u8* smem = smem_raw + ((1024u - (smem_u32(smem_raw) & 1023u)) & 1023u);
  u8* wr = smem + S * XT;  // [S][WST]; every part a multiple of 128 bytes (TMA's alignment)
  bf16_t* cs = reinterpret_cast<bf16_t*>(wr + S * WST);
  const u32 xs0 = smem_u32(smem), wr0 = smem_u32(wr), bar0 = smem_u32(wr + S * WST + RS_CS);
  auto full = [&](int s) { return bar0 + 8 * s; };        // the stage's copies landed
  auto empty = [&](int s) { return bar0 + 8 * (S + s); };  // both consumers retired its MMAs
  const int tid = threadIdx.x, wg = tid / 128, b = blockIdx.x;
  static_assert(S % 2 == 0, "a loop body alternates the two fragment sets");
  static_assert(S * WST % 1024 == 0, "cs's boxes start on 1 KB swizzle atoms");
  const int pairs = kpad / (2 * RS_BK);  // a pair is one 128-k storage stage
  // The schedule is computed after the warpgroups part (sched()): live across
  // setmaxnreg, its 64-bit values spilled in the copy warpgroup's few registers.
  auto sched = [&] {
    const int unit = pairs % 2 == 0 ? 2 : 1;
    return RsSched{(long long)n_tiles * pairs / unit, (int)gridDim.x, unit};
  };
  if (tid == 0) {
    for (int s = 0; s < S; ++s) {
      mbar_init(full(s), 1);
      mbar_init(empty(s), 2);
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();

  // Registers are allocated per warpgroup (ptxas gives a 384-thread block 168 each): the
  // copy warpgroup hands its share to the consumers, whose NB x 64 accumulators and two
  // fragment sets need more (24 x 128 + 240 x 256 <= 65536; at 40 / 232 NB = 2 spilled
  // in the loop once the persistent schedule's state was live across it).
  if (wg == 2) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 24;" ::: "memory");
    if (tid == 256) {
      const RsSched sc = sched();
      const long long it_begin = sc.start(b);
      const int last_ty = n_tiles / tiles_x - 1;
      int rc = 0;  // stages issued: ring slot rc % S, its use rc / S
      for (long long hi = sc.start(b + 1); hi > it_begin;) {  // the run's tiles, last first
        const int tile = (int)((hi - 1) / pairs);
        const long long tile0 = (long long)tile * pairs;
        const int p0 = (int)(max(it_begin, tile0) - tile0), p1 = (int)(hi - tile0);
        hi = tile0 + p0;
        const int ty = tile / tiles_x, n0 = (tile - ty * tiles_x) * RS_BM, t0 = ty * RS_BT * NB;
        const bool tail = tail_rows > 0 && ty == last_ty;
        const RsTensorMap* xm = tail ? &xtail : &xmap;
        // A box always delivers its whole size (zero fill included): a fixed byte count.
        const u32 xbytes = tail ? (u32)tail_rows * 2u * RS_BK : (u32)XT;
        for (int g = 2 * p0; g < 2 * p1; ++g, ++rc) {
          const int s = rc % S, sst = g >> 1, half = g & 1;
          if (rc >= S) mbar_wait(empty(s), ((rc - S) / S) & 1);
          const u32 dst = wr0 + s * WST;
          mbar_expect_tx(full(s), xbytes + WST);
          tma_2d(xs0 + s * XT, xm, g * RS_BK, t0, full(s));
          tma_2d(dst, &wcodes, (sst * 2 * B::CODES + half * B::CODES) / 8, n0 / 16, full(s));
          if constexpr (B::QH > 0)
            tma_2d(dst + 8 * B::CODES, &whigh, (sst * 2 * B::QH + half * B::QH) / 8, n0 / 16, full(s));
          if constexpr (B::SC > 0) tma_2d(dst + 8 * (B::CODES + B::QH), &wscale, sst * B::SC / 8, n0 / 16, full(s));
        }
        for (int d = 2 * (p1 - p0); d % S != 0; ++d, ++rc) {  // the lap's unused slots
          const int s = rc % S;
          if (rc >= S) mbar_wait(empty(s), ((rc - S) / S) & 1);
          mbar_arrive(full(s));
        }
      }
    }
    return;
  }
  asm volatile("setmaxnreg.inc.sync.aligned.u32 240;" ::: "memory");
  const int c = wg, band = tid / 32, lane = tid % 32, gid = lane >> 2, tig = lane & 3;
  float acc[NB][64];
  auto fence_acc = [&] {
#pragma unroll
    for (int h = 0; h < NB; ++h) acc_fence(acc[h]);
  };
  u32 a0[4][4], a1[4][4];
  const u32 lane_codes = wr0 + band * B::CODES + lane * 16;  // RsSmem's 4-bit codes
  const u32 nib = nib_mask(kpad);
  // Slot s of ring lap `lap`, stage st of the tile: decode into `a` (the other set may
  // still feed the previous stage's MMAs), issue its MMAs, wait for the previous stage's,
  // release that slot.
  auto step = [&](int s, int lap, int st, u32 (&a)[4][4]) {
    mbar_wait(full(s), lap & 1);
    // Slot s holds a stage of parity s: a run starts on a lap, and S is even.
    rs_frag<QT>(RsSmem<QT>(wr + s * WST, lane_codes, s * WST, band, s & 1, gid, tig), nib, a);
    fence_acc();
    // The fence takes the fragments as operands, so their definitions stay before it.
    asm volatile("wgmma.fence.sync.aligned;"
                 : "+r"(a[0][0]), "+r"(a[0][1]), "+r"(a[0][2]), "+r"(a[0][3]), "+r"(a[1][0]), "+r"(a[1][1]),
                   "+r"(a[1][2]), "+r"(a[1][3]), "+r"(a[2][0]), "+r"(a[2][1]), "+r"(a[2][2]), "+r"(a[2][3]),
                   "+r"(a[3][0]), "+r"(a[3][1]), "+r"(a[3][2]), "+r"(a[3][3])
                 :
                 : "memory");
    const u32 xb = xs0 + s * XT;
#pragma unroll
    for (int ks = 0; ks < 4; ++ks)
#pragma unroll
      for (int h = 0; h < NB; ++h) wgmma_rs(acc[h], a[ks], rs_desc(xb + h * RS_X_HALF + 32 * ks));
    asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
    asm volatile("wgmma.wait_group.sync.aligned 1;" ::: "memory");
    fence_acc();
    if (st >= 1 && tid % 128 == 0) mbar_arrive(empty((s + S - 1) % S));
  };
  u32* flag = reinterpret_cast<u32*>(wr + S * WST + RS_CS + 16 * S);
  const RsSched sc = sched();
  const long long it_begin = sc.start(b);
  int lap = 0;  // ring laps begun, as the copy thread fills them
  for (long long hi = sc.start(b + 1); hi > it_begin;) {  // as the copy thread walks them
    const int tile = (int)((hi - 1) / pairs);
    const long long tile0 = (long long)tile * pairs;
    const int p0 = (int)(max(it_begin, tile0) - tile0), p1 = (int)(hi - tile0);
    hi = tile0 + p0;
    const int nst = 2 * (p1 - p0);
#pragma unroll
    for (int h = 0; h < NB; ++h)
#pragma unroll
      for (int e = 0; e < 64; ++e) acc[h][e] = 0.f;
    for (int st = 0; st < nst; st += S, ++lap) {
#pragma unroll
      for (int u = 0; u < S; u += 2) {
        if (st + u < nst) {
          step(u, lap, st + u, a0);
          step(u + 1, lap, st + u + 1, a1);
        }
      }
      asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
      fence_acc();
    }
    if (tid % 128 == 0) mbar_arrive(empty((nst - 1) % S));  // the run's last stage
    for (int u = nst % S; u != 0 && u < S; ++u) mbar_wait(full(u), (lap - 1) & 1);  // the last lap's unused slots
    if (tid % 128 == 0)
      for (int u = nst % S; u != 0 && u < S; ++u) mbar_arrive(empty(u));
    if (p1 - p0 < pairs) {
      // A split tile. Its counter holds how many of its other nz - 1 blocks have
      // published their partial ([slot][float4 e][thread]: a warp's store of one e is 512
      // contiguous bytes). When all have, this block is the last: it adds theirs to its
      // registers and stores the tile. Otherwise it publishes its own and counts it; the
      // count may make it the last after all.
      const long long i0 = (long long)tile * pairs;
      const int fb = sc.owner(i0), nz = sc.owner(i0 + pairs - 1) - fb + 1, z = b - fb;
      auto slot = [&](int zz) { return part + (size_t)(2 * (fb + zz) + (zz == 0 ? 1 : 0)) * (16 * NB * 256) + tid; };
      // Ordering as CUTLASS's stream-K barrier: the threads' partial stores, a barrier,
      // then one thread's release (the count); one thread's acquire, a barrier, then the
      // reads, rather than a __threadfence (fence.sc.gpu) in each of the 256 threads.
      asm volatile("bar.sync 1, 256;" ::: "memory");  // every thread has read the last flag
      if (tid == 0) *flag = ld_acquire(&cnt[tile]) == (u32)(nz - 1);
      asm volatile("bar.sync 1, 256;" ::: "memory");
      if (!*flag) {
        float4* mine = slot(z);
#pragma unroll
        for (int h = 0; h < NB; ++h)
#pragma unroll
          for (int e = 0; e < 16; ++e)
            mine[(16 * h + e) * 256] = make_float4(acc[h][4 * e], acc[h][4 * e + 1], acc[h][4 * e + 2],
                                                   acc[h][4 * e + 3]);
        asm volatile("bar.sync 1, 256;" ::: "memory");
        if (tid == 0) *flag = atom_add_acq_rel(&cnt[tile], 1u) == (u32)(nz - 1);
        asm volatile("bar.sync 1, 256;" ::: "memory");
        if (!*flag) continue;
      }
      // The sum in block order, p_0 + p_1 + ... (bitwise the same whichever block adds:
      // a + b == b + a exactly), with this block's own p_z in registers: per chunk of 8
      // float4, the partials before it summed in a buffer, then the ones after it added to
      // the registers. 8 loads in flight at a time: wider buffers beside NB = 2's 128
      // accumulators spilled, into the main loop too.
      constexpr int CH = 8;
#pragma unroll
      for (int c0 = 0; c0 < 16 * NB; c0 += CH) {
        float* a = &acc[c0 / 16][4 * (c0 % 16)];
        float4 w[CH];
        if (z > 0) {
#pragma unroll
          for (int e = 0; e < CH; ++e) w[e] = __ldcg(slot(0) + (c0 + e) * 256);
          for (int zz = 1; zz < z; ++zz) {  // (rare: a middle block finishing last)
            float4 v[CH];
#pragma unroll
            for (int e = 0; e < CH; ++e) v[e] = __ldcg(slot(zz) + (c0 + e) * 256);
#pragma unroll
            for (int e = 0; e < CH; ++e) w[e].x += v[e].x, w[e].y += v[e].y, w[e].z += v[e].z, w[e].w += v[e].w;
          }
#pragma unroll
          for (int e = 0; e < CH; ++e)
            a[4 * e] = w[e].x + a[4 * e], a[4 * e + 1] = w[e].y + a[4 * e + 1], a[4 * e + 2] = w[e].z + a[4 * e + 2],
                  a[4 * e + 3] = w[e].w + a[4 * e + 3];
        }
        for (int zz = z + 1; zz < nz; ++zz) {
#pragma unroll
          for (int e = 0; e < CH; ++e) w[e] = __ldcg(slot(zz) + (c0 + e) * 256);
#pragma unroll
          for (int e = 0; e < CH; ++e)
            a[4 * e] += w[e].x, a[4 * e + 1] += w[e].y, a[4 * e + 2] += w[e].z, a[4 * e + 3] += w[e].w;
        }
      }
    }
    const int ty = tile / tiles_x, n0 = (tile - ty * tiles_x) * RS_BM, t0 = ty * RS_BT * NB;
#pragma unroll
    for (int h = 0; h < NB; ++h) {
      // (rs_store opens with a barrier: the last half's reads of cs are done.)
      rs_store(acc[h], cs, c, tid, QT == QT_NVFP4 ? tensor_scale * NVFP4_DOWN : tensor_scale, &omap, otma != 0,
               out, N, T, n0, t0 + RS_BT * h);
    }
  }
  // Shared memory stays allocated until the last box store has read it.
  if (otma && tid % 128 == 0) tma_store_read_wait();
}
