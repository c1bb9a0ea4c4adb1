// dq_rs: the prefill route on sm_90a (Hopper). out = x · W^T with the weight decoded by
// the warps that multiply it, straight into wgmma's register A operand (the RS form):
// the decoded weight never goes to memory, and nothing but x and the packed planes is
// read (docs/routes.md, "dq_rs"; docs/perf/prefill_h200.md, "Routes").
//
// A tile is 128 weight rows x 128 NB tokens; K goes in stages of 64. The grid is persistent
// (Stream-K, RsSched): block b owns a contiguous run of the (tile, 128-k stage pair)
// iterations, tiles one after another, so every SM gets the same number of stage pairs
// whatever the tile count (with whole tiles per block, a tile count just above a multiple
// of the SMs leaves up to half of them idle for a whole wave). Its 384 threads are three
// warpgroups, and the kernel is their phases:
// - rs_producer (warpgroup 2, one thread): per stage one TMA box of x (64 k x 128 NB
//   tokens, 128-byte swizzle; out-of-bounds tokens and columns read as zero) and one box
//   per weight plane (the stage's blocks of the tile's 8 bands, as stored: formats.md),
//   all completing on the stage's mbarrier, into a ring of S slots; a slot is refilled
//   once both consumer warpgroups have retired its MMAs. The ring runs on across the
//   block's tiles, so the next tile's first stages load during a tile's epilogue.
// - rs_mainloop (warpgroups 0 and 1, the consumers: rows 64 c .. 64 c + 63 each): per
//   stage (rs_stage), warp w decodes band w (16 rows) into four k16 A fragments and
//   issues wgmma.m64n128k16 per k16 step and 128-token half, A from registers, B (x) from
//   shared memory. Stage st's MMAs run while the warp decodes stage st + 1 (two fragment
//   sets; wgmma.wait_group 1), so that the decode can run under the tensor cores. It
//   mostly does not: the decode alone takes less than the MMAs alone (Q4 T = 128: 21.2
//   against 30.4 us) and the two still add up (39.1 us), with no one resource saturated
//   (docs/perf/prefill_h200.md, "Why the decode and the MMAs do not overlap").
// - rs_fixup (the consumers, on a tile split between blocks): the tile's FP32 partials
//   summed in block order by the last of its blocks to finish.
// - rs_epilogue (the consumers): each consumer warpgroup's output box leaves by one TMA
//   store that runs on under the next tile.
//
// Why registers: a separate decode warpgroup writing a BF16 A tile to shared memory
// (dq_ws, not landed) spent ~89 KB of shared-memory traffic per stage against 512 cycles
// of MMA and ran at 1440 cycles per stage; decoding into registers removes the A tile's
// store and its reads by the MMAs (docs/perf/prefill_h200.md@8fe804d, "dq_ws:
// warp-specialized, A tile in shared memory (not landed)").
//
// Numerics are dq_gemm's: each weight is scale x code computed exactly in FP32 and
// rounded once to BF16 (NVFP4: e4m3 x e2m1, exact; BF16: copied); FP32 accumulation;
// NVFP4's tensor scale multiplies the FP32 sum; one rounding to BF16 at the end.
// Requires sm_90a (wgmma, TMA, setmaxnreg): NVRTC gets -arch=sm_90a (routes/dq_rs.py).
//
// Parts: dq_rs_tile.cuh (tile geometry, bytes per band and stage), dq_rs_sm90.cuh (the
// sm_90a instructions), dq_rs_decode.cuh (a stage's words into A fragments),
// dq_rs_store.cuh (the output's staging and store); here the schedule, the shared-memory
// layout, the phases and the kernel.
#include "common.cuh"
#include "dq_rs_tile.cuh"
#include "dq_rs_sm90.cuh"
#include "dq_rs_decode.cuh"
#include "dq_rs_store.cuh"

// ---- Schedule ----------------------------------------------------------------------

// Block b's iterations of the (tile, stage pair) axis: [start(b), start(b + 1)), a tile's
// pairs consecutive. Runs begin on multiples of `unit` pairs (2 where a tile has an even
// number: at S = 4 every run of a tile is then a whole number of ring laps; at S = 6 or 8
// a run may end part-way through a lap, and the lap's unused slots are passed: see
// rs_mainloop). Each block has at least one unit (the host keeps G <= total / unit).
struct RsSched {
  long long units;  // total / unit
  int blocks, unit;
  // Each of gridDim.x blocks over n_tiles tiles of `pairs` stage pairs.
  static __device__ __forceinline__ RsSched make(int n_tiles, int pairs) {
    const int unit = pairs % 2 == 0 ? 2 : 1;
    return RsSched{(long long)n_tiles * pairs / unit, (int)gridDim.x, unit};
  }
  __device__ __forceinline__ long long start(int b) const { return (long long)b * units / blocks * unit; }
  // The block whose run holds iteration i: the largest b with start(b) <= i.
  __device__ __forceinline__ int owner(long long i) const {
    return (int)(((i / unit + 1) * blocks + units - 1) / units) - 1;
  }
};

// One tile's share of a run: stage pairs [p0, p1) of tile `tile` (a tile has kpad / 128
// pairs; with fewer, it is split between blocks: rs_fixup).
struct RsWork {
  int tile, p0, p1;
};
// Block b's run, tile by tile, last first: the producer and the consumers walk it alike.
// A tile split between blocks b and b + 1 is then the first that b works on and the last
// that b + 1 does, so b + 1 normally finds b's partial published and finishes the tile from
// its registers (docs/perf/prefill_h200.md@8fe804d, versions table, 85a1b6e).
struct RsRun {
  long long begin, hi;  // the run's iterations [begin, hi) not yet walked
  int pairs;
  __device__ __forceinline__ RsRun(const RsSched& sc, int b, int pairs_)
      : begin(sc.start(b)), hi(sc.start(b + 1)), pairs(pairs_) {}
  // The run's next tile from its end; false once the run is walked.
  __device__ __forceinline__ bool next(RsWork& w) {
    if (hi <= begin) return false;
    w.tile = (int)((hi - 1) / pairs);
    const long long tile0 = (long long)w.tile * pairs;
    w.p0 = (int)(max(begin, tile0) - tile0), w.p1 = (int)(hi - tile0);
    hi = tile0 + w.p0;
    return true;
  }
};
// Tile `tile`'s first weight row n0 and first token t0 (ty: its token tile). Tiles are
// numbered row tile fastest (tiles_x per token tile), so neighbouring blocks share x's
// token tile in L2.
template <int NB>
struct RsOrigin {
  int ty, n0, t0;
  __device__ __forceinline__ RsOrigin(int tile, int tiles_x)
      : ty(tile / tiles_x), n0((tile - ty * tiles_x) * RS_BM), t0(ty * RS_BT * NB) {}
};

// ---- Shared memory -----------------------------------------------------------------

// The block's dynamic shared memory (routes/dq_rs.py: shared_bytes): 1 KB of alignment
// slack, [S][x stage: NB x 16 KB][S][W stage][cs: 32 KB][2 S mbarriers][a 16-byte word].
// Slot s's mbarriers: full(s), its stage's copies have landed; empty(s), both consumer
// warpgroups have retired its MMAs.
template <int QT, int S, int NB>
struct RsShared {
  using B = RsBand<QT>;
  static constexpr int WST = 8 * (B::CODES + B::QH + B::SC), XT = NB * RS_X_HALF;  // W, x stage bytes
  // Dynamic shared memory: 1 KB of alignment slack, the stages, cs, 2 S mbarriers, flag.
  static constexpr int BYTES = 1024 + S * (XT + WST) + RS_CS + 16 * S + 16;
  static_assert(S % 2 == 0, "a loop body alternates the two fragment sets");
  static_assert(S * WST % 1024 == 0, "cs's boxes start on 1 KB swizzle atoms");
  u8* wr;              // [S][WST]; every part a multiple of 128 bytes (TMA's alignment)
  bf16_t* cs;          // the output staging tile (rs_store)
  u32 xs0, wr0, bar0;  // the x stages, the W stages and the mbarriers as shared addresses
  __device__ __forceinline__ explicit RsShared(u8* smem_raw) {
    // The 128-byte swizzle works on 1 KB atoms: the x stages start on a 1 KB boundary.
    u8* smem = smem_raw + ((1024u - (smem_u32(smem_raw) & 1023u)) & 1023u);
    wr = smem + S * XT;
    cs = reinterpret_cast<bf16_t*>(wr + S * WST);
    xs0 = smem_u32(smem), wr0 = smem_u32(wr), bar0 = smem_u32(wr + S * WST + RS_CS);
  }
  __device__ __forceinline__ u32 full(int s) const { return bar0 + 8 * s; }
  __device__ __forceinline__ u32 empty(int s) const { return bar0 + 8 * (S + s); }
  // The consumers' word for "this block is the split tile's last" (rs_fixup).
  __device__ __forceinline__ u32* flag() const { return reinterpret_cast<u32*>(wr + S * WST + RS_CS + 16 * S); }
  // By one thread, before the block's first barrier.
  __device__ __forceinline__ void init_barriers() const {
    for (int s = 0; s < S; ++s) {
      mbar_init(full(s), 1);
      mbar_init(empty(s), 2);
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
};

// ---- Producer ----------------------------------------------------------------------

// Warpgroup 2's thread 256: the run's stages into the ring, stage rc (counted over the
// run) in slot rc % S once both consumer warpgroups have released its previous use, and
// a bare arrive for each slot of a tile's last lap that the tile leaves unused.
//
// The last token tile reads x through `xtail`, whose box is only tail_rows tall (T's rows
// in that tile, rounded up to 8; 0: no such map): a box mostly past T made TMA zero-fill
// most of it, measured slow (docs/perf/prefill_h200.md@8fe804d, versions table, "dq_rs
// v5 tail box"). The stage's rows past the box keep stale values; each output row
// depends on its own x row only, and rows past T are never stored.
template <int QT, int S, int NB>
__device__ __forceinline__ void rs_producer(const RsShared<QT, S, NB>& sh, const RsTensorMap& xmap,
                                            const RsTensorMap& xtail, const RsTensorMap& wcodes,
                                            const RsTensorMap& whigh, const RsTensorMap& wscale, int b, int pairs,
                                            int n_tiles, int tiles_x, int tail_rows) {
  using B = RsBand<QT>;
  constexpr int WST = RsShared<QT, S, NB>::WST, XT = RsShared<QT, S, NB>::XT;
  RsRun run(RsSched::make(n_tiles, pairs), b, pairs);
  const int last_ty = n_tiles / tiles_x - 1;
  int rc = 0;  // stages issued: ring slot rc % S, its use rc / S
  for (RsWork w; run.next(w);) {
    const RsOrigin<NB> o(w.tile, tiles_x);
    const bool tail = tail_rows > 0 && o.ty == last_ty;
    const RsTensorMap* xm = tail ? &xtail : &xmap;
    // A box always delivers its whole size (zero fill included): a fixed byte count.
    const u32 xbytes = tail ? (u32)tail_rows * 2u * RS_BK : (u32)XT;
    for (int g = 2 * w.p0; g < 2 * w.p1; ++g, ++rc) {
      const int s = rc % S, sst = g >> 1, half = g & 1;
      if (rc >= S) mbar_wait(sh.empty(s), ((rc - S) / S) & 1);
      const u32 dst = sh.wr0 + s * WST;
      mbar_expect_tx(sh.full(s), xbytes + WST);
      tma_2d(sh.xs0 + s * XT, xm, g * RS_BK, o.t0, sh.full(s));
      tma_2d(dst, &wcodes, (sst * 2 * B::CODES + half * B::CODES) / 8, o.n0 / 16, sh.full(s));
      if constexpr (B::QH > 0)
        tma_2d(dst + 8 * B::CODES, &whigh, (sst * 2 * B::QH + half * B::QH) / 8, o.n0 / 16, sh.full(s));
      if constexpr (B::SC > 0)
        tma_2d(dst + 8 * (B::CODES + B::QH), &wscale, sst * B::SC / 8, o.n0 / 16, sh.full(s));
    }
    for (int d = 2 * (w.p1 - w.p0); d % S != 0; ++d, ++rc) {  // the lap's unused slots
      const int s = rc % S;
      if (rc >= S) mbar_wait(sh.empty(s), ((rc - S) / S) & 1);
      mbar_arrive(sh.full(s));
    }
  }
}

// ---- Consumer main loop ------------------------------------------------------------

// A consumer thread: warp `band` (0..7) decodes rows 16 band .. 16 band + 15 of the tile,
// lane (gid, tig) its fragments' rows gid and gid + 8 (rs_frag).
template <int QT>
struct RsLane {
  int tid, band, gid, tig;
  u32 lane_codes;  // RsSmem's 4-bit codes: the thread's 16 bytes in slot 0
  u32 nib;         // 0x000F000F from a register (nib_mask)
  __device__ __forceinline__ RsLane(int tid_, u32 wr0, int kpad) {
    const int lane = tid_ % 32;
    tid = tid_, band = tid_ / 32, gid = lane >> 2, tig = lane & 3;
    lane_codes = wr0 + band * RsBand<QT>::CODES + lane * 16;
    nib = nib_mask(kpad);
  }
};

// Stage st of the tile, in slot s of ring lap `lap`: decode into `a` (the other fragment
// set may still feed the previous stage's MMAs), issue its MMAs, wait for the previous
// stage's, release that stage's slot.
template <int QT, int S, int NB>
__device__ __forceinline__ void rs_stage(const RsShared<QT, S, NB>& sh, const RsLane<QT>& ln, int s, int lap, int st,
                                         u32 (&a)[4][4], float (&acc)[NB][64]) {
  constexpr int WST = RsShared<QT, S, NB>::WST, XT = RsShared<QT, S, NB>::XT;
  mbar_wait(sh.full(s), lap & 1);
  // Slot s holds a stage of parity s: a run starts on a lap, and S is even.
  rs_frag<QT>(RsSmem<QT>(sh.wr + s * WST, ln.lane_codes, s * WST, ln.band, s & 1, ln.gid, ln.tig), ln.nib, a);
  acc_fence_all(acc);
  wgmma_fence(a);
  const u32 xb = sh.xs0 + s * XT;
#pragma unroll
  for (int ks = 0; ks < 4; ++ks)
#pragma unroll
    for (int h = 0; h < NB; ++h) wgmma_rs(acc[h], a[ks], rs_desc(xb + h * RS_X_HALF + 32 * ks));
  wgmma_commit();
  wgmma_wait<1>();
  acc_fence_all(acc);
  if (st >= 1 && ln.tid % 128 == 0) mbar_arrive(sh.empty((s + S - 1) % S));
}

// The tile's nst stages (the block's part of it) into acc.
//
// One loop body is one lap of the ring (S slots, S stages): its stage u sits in slot u,
// so every shared-memory address of the body is a constant offset, and the body ends in
// wait_group 0 (with MMAs in flight across the loop's back edge, ptxas cannot tell the
// two fragment sets apart and serializes every wgmma, C7513; within straight-line code
// it tracks them). A tile's run whose stage count is not a multiple of S leaves the
// last lap's slots from nst % S on unused; the producer and the consumers pass them
// with a bare arrive and wait, so that each slot's barrier phases still count laps.
// (With a run-dependent slot, the addresses took 20 % more instructions per stage.)
// S is the deepest even ring that fits (routes/dq_rs.py::stages: 8, 6 or 4): 8 slots put
// twice the copies of x and W in flight of 4, whose latency the decode does not hide (Q4
// [14336,5120] T=128 45.9 -> 43.4 us: docs/perf/prefill_h200.md@8fe804d, "Where a dq_rs
// stage goes").
template <int QT, int S, int NB>
__device__ __forceinline__ void rs_mainloop(const RsShared<QT, S, NB>& sh, const RsLane<QT>& ln, int nst, int& lap,
                                            float (&acc)[NB][64]) {
  u32 a0[4][4], a1[4][4];  // the two fragment sets
#pragma unroll
  for (int h = 0; h < NB; ++h)
#pragma unroll
    for (int e = 0; e < 64; ++e) acc[h][e] = 0.f;
  for (int st = 0; st < nst; st += S, ++lap) {
#pragma unroll
    for (int u = 0; u < S; u += 2) {
      if (st + u < nst) {
        rs_stage(sh, ln, u, lap, st + u, a0, acc);
        rs_stage(sh, ln, u + 1, lap, st + u + 1, a1, acc);
      }
    }
    wgmma_wait<0>();
    acc_fence_all(acc);
  }
  if (ln.tid % 128 == 0) mbar_arrive(sh.empty((nst - 1) % S));  // the run's last stage
  for (int u = nst % S; u != 0 && u < S; ++u) mbar_wait(sh.full(u), (lap - 1) & 1);  // the last lap's unused slots
  if (ln.tid % 128 == 0)
    for (int u = nst % S; u != 0 && u < S; ++u) mbar_arrive(sh.empty(u));
}

// ---- Split-tile fix-up -------------------------------------------------------------

// Partial z of a split tile whose first block is fb, [float4 e][thread] (a warp's store
// of one e is 512 contiguous bytes): block b's slots in `part` are 2 b for the tile its
// run starts inside (z > 0) and 2 b + 1 for the one it ends inside (z = 0).
template <int NB>
__device__ __forceinline__ float4* rs_part(float4* part, int fb, int z, int tid) {
  return part + (size_t)(2 * (fb + z) + (z == 0 ? 1 : 0)) * (16 * NB * 256) + tid;
}

// The sum in block order, p_0 + p_1 + ... + p_{nz-1}, with this block's own p_z in acc
// (bitwise the same whichever block adds: a + b == b + a exactly): per chunk of 8
// float4, the partials before it summed in a buffer, then the ones after it added to
// the registers. 8 loads in flight at a time: wider buffers beside NB = 2's 128
// accumulators spilled, into the main loop too.
template <int NB>
__device__ __forceinline__ void rs_sum_partials(float (&acc)[NB][64], float4* part, int fb, int z, int nz, int tid) {
  constexpr int CH = 8;
#pragma unroll
  for (int c0 = 0; c0 < 16 * NB; c0 += CH) {
    float* a = &acc[c0 / 16][4 * (c0 % 16)];
    float4 w[CH];
    if (z > 0) {
#pragma unroll
      for (int e = 0; e < CH; ++e) w[e] = __ldcg(rs_part<NB>(part, fb, 0, tid) + (c0 + e) * 256);
      for (int zz = 1; zz < z; ++zz) {  // (rare: a middle block finishing last)
        float4 v[CH];
#pragma unroll
        for (int e = 0; e < CH; ++e) v[e] = __ldcg(rs_part<NB>(part, fb, zz, tid) + (c0 + e) * 256);
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
      for (int e = 0; e < CH; ++e) w[e] = __ldcg(rs_part<NB>(part, fb, zz, tid) + (c0 + e) * 256);
#pragma unroll
      for (int e = 0; e < CH; ++e)
        a[4 * e] += w[e].x, a[4 * e + 1] += w[e].y, a[4 * e + 2] += w[e].z, a[4 * e + 3] += w[e].w;
    }
  }
}

// A tile split between nz blocks (Stream-K's fix-up). The last of them to finish stores
// it, adding the others' FP32 partials to its own in block order: the same bits whichever
// block is last, so results stay bitwise repeatable. The tile's counter in `cnt` (zeroed
// by the host before the call) holds how many of the others have published their
// partial. If all have, this block is the last: it sums theirs into acc and returns
// true. Otherwise it publishes its own and counts it; the count may make it the last
// after all, else it returns false (the tile is another block's to store). No block
// waits for another.
template <int NB>
__device__ __forceinline__ bool rs_fixup(float (&acc)[NB][64], const RsSched& sc, int tile, int pairs, int b, int tid,
                                         float4* part, u32* cnt, u32* flag) {
  const long long i0 = (long long)tile * pairs;
  const int fb = sc.owner(i0), nz = sc.owner(i0 + pairs - 1) - fb + 1, z = b - fb;
  // Ordering as CUTLASS's stream-K barrier: the threads' partial stores, a barrier,
  // then one thread's release (the count); one thread's acquire, a barrier, then the
  // reads, rather than a __threadfence (fence.sc.gpu) in each of the 256 threads.
  asm volatile("bar.sync 1, 256;" ::: "memory");  // every thread has read the last flag
  if (tid == 0) *flag = ld_acquire(&cnt[tile]) == (u32)(nz - 1);
  asm volatile("bar.sync 1, 256;" ::: "memory");
  if (!*flag) {
    float4* mine = rs_part<NB>(part, fb, z, tid);
#pragma unroll
    for (int h = 0; h < NB; ++h)
#pragma unroll
      for (int e = 0; e < 16; ++e)
        mine[(16 * h + e) * 256] = make_float4(acc[h][4 * e], acc[h][4 * e + 1], acc[h][4 * e + 2], acc[h][4 * e + 3]);
    asm volatile("bar.sync 1, 256;" ::: "memory");
    if (tid == 0) *flag = atom_add_acq_rel(&cnt[tile], 1u) == (u32)(nz - 1);
    asm volatile("bar.sync 1, 256;" ::: "memory");
    if (!*flag) return false;
  }
  rs_sum_partials(acc, part, fb, z, nz, tid);
  return true;
}

// ---- Epilogue ----------------------------------------------------------------------

// The tile's output: consumer warpgroup c's rows of each 128-token half, times the
// tensor scale, rounded once to BF16 and stored through cs (rs_store).
template <int QT, int NB>
__device__ __forceinline__ void rs_epilogue(const float (&acc)[NB][64], bf16_t* cs, int tile, int tiles_x, int c,
                                            int tid, float tensor_scale, const RsTensorMap& omap, int otma,
                                            bf16_t* out, int N, int T) {
  const RsOrigin<NB> o(tile, tiles_x);
#pragma unroll
  for (int h = 0; h < NB; ++h) {
    // (rs_store opens with a barrier: the last half's reads of cs are done.)
    rs_store(acc[h], cs, c, tid, QT == QT_NVFP4 ? tensor_scale * NVFP4_DOWN : tensor_scale, &omap, otma != 0,
             out, N, T, o.n0, o.t0 + RS_BT * h);
  }
}

// ---- Kernel ------------------------------------------------------------------------

// S: ring slots; NB: 128-token halves per tile (the decode of a stage then feeds 128 NB
// tokens of MMAs). Arguments: routes/dq_rs.py.
template <int QT, int S, int NB>
__global__ void __launch_bounds__(384, 1)
    dq_rs(const __grid_constant__ RsTensorMap xmap, const __grid_constant__ RsTensorMap xtail,
          const __grid_constant__ RsTensorMap wcodes, const __grid_constant__ RsTensorMap whigh,
          const __grid_constant__ RsTensorMap wscale, const __grid_constant__ RsTensorMap omap, float tensor_scale,
          int N, int kpad, bf16_t* __restrict__ out, int T, float4* __restrict__ part, u32* __restrict__ cnt,
          int tiles_x, int n_tiles, int tail_rows, int otma) {
  extern __shared__ __align__(16) u8 smem_raw[];
  const RsShared<QT, S, NB> sh(smem_raw);
  const int tid = threadIdx.x, wg = tid / 128, b = blockIdx.x;
  const int pairs = kpad / (2 * RS_BK);  // a pair is one 128-k storage stage
  if (tid == 0) sh.init_barriers();
  __syncthreads();

  // Registers are allocated per warpgroup (ptxas gives a 384-thread block 168 each): the
  // producer warpgroup hands its share to the consumers, whose NB x 64 accumulators and
  // two fragment sets need more (24 x 128 + 240 x 256 <= 65536; at 40 / 232 NB = 2
  // spilled in the loop once the persistent schedule's state was live across it). The
  // schedule is computed after the warpgroups part: live across setmaxnreg, its 64-bit
  // values spilled in the producer warpgroup's few registers.
  if (wg == 2) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 24;" ::: "memory");
    if (tid == 256) rs_producer(sh, xmap, xtail, wcodes, whigh, wscale, b, pairs, n_tiles, tiles_x, tail_rows);
    return;
  }
  asm volatile("setmaxnreg.inc.sync.aligned.u32 240;" ::: "memory");
  const RsLane<QT> ln(tid, sh.wr0, kpad);
  float acc[NB][64];
  u32* const flag = sh.flag();
  const RsSched sc = RsSched::make(n_tiles, pairs);
  RsRun run(sc, b, pairs);
  int lap = 0;  // ring laps begun, as the producer fills them
  for (RsWork w; run.next(w);) {  // the tiles as the producer walks them
    rs_mainloop(sh, ln, 2 * (w.p1 - w.p0), lap, acc);
    // A split tile is stored by the last of its blocks to finish.
    if (w.p1 - w.p0 < pairs && !rs_fixup(acc, sc, w.tile, pairs, b, tid, part, cnt, flag)) continue;
    rs_epilogue<QT>(acc, sh.cs, w.tile, tiles_x, wg, tid, tensor_scale, omap, otma, out, N, T);
  }
  // Shared memory stays allocated until the last box store has read it.
  if (otma && tid % 128 == 0) tma_store_read_wait();
}
