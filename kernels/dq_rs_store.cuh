// dq_rs's output staging and store (kernels/dq_rs.cu, rs_epilogue): a consumer
// warpgroup's accumulators, scaled and rounded once to BF16, through shared memory to out.
#include "common.cuh"
#include "dq_rs_tile.cuh"
#include "dq_rs_sm90.cuh"
// (bf16_pair)
#include "dq_rs_decode.cuh"

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
// The staging writes a warp's 16 rows x 128 tokens as pairs packed by one cvt and 8
// stmatrix.x4.trans a thread. A scalar 2-byte store, a software rounding (f2bf) and an
// address per value made the staging, not the global stores, most of the output's cost:
// 18 % of the kernel's instructions at [14336,5120] T = 1024
// (docs/perf/prefill_h200.md@8fe804d, versions table, 9f09a85).
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
