// The sm_80 instructions the mma.sync routes (dec_q, dq_mma) copy and load with: cp.async
// and ldmatrix, one inline-asm statement each. Every GPU from sm_80 up has them (the
// users' sm_120 too); wgmma and TMA (dq_rs_sm90.cuh) it does not.
#pragma once
#include "common.cuh"

// cp.async (sm_80+): global -> shared without a register round trip.
// 16 bytes, of which the first `bytes` come from g and the rest are zero-filled.
__device__ __forceinline__ void cp_async16(u32 s, const void* g, int bytes = 16) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(s), "l"(g), "r"(bytes));
}
// 16 bytes, whole: no source size and no predicate.
__device__ __forceinline__ void cp_async16_all(u32 s, const void* g) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(s), "l"(g));
}
// The same, whole, where p holds; a predicated instruction, not a branch (a branch around
// each copy costs the loop a reconvergence and ptxas's pad before each LDGSTS).
__device__ __forceinline__ void cp_async16_if(u32 s, const void* g, bool p) {
  asm volatile(
      "{\n .reg .pred p;\n setp.ne.b32 p, %2, 0;\n @p cp.async.cg.shared.global [%0], [%1], 16;\n}\n" ::"r"(s),
      "l"(g), "r"((int)p));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;"); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(N));
}
// Four 8x8 BF16 matrices from shared memory (sm_75+): lane l gives the address of row l & 7
// of matrix l >> 3, and thread (gid, tig) receives row gid's elements 2 tig, 2 tig + 1 of
// each. With x's token rows as the rows, that is mma.m16n8k16's B fragment of 8 tokens.
__device__ __forceinline__ void ldsm_x4(u32 addr, u32& d0, u32& d1, u32& d2, u32& d3) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(d0), "=r"(d1), "=r"(d2), "=r"(d3)
               : "r"(addr));
}
