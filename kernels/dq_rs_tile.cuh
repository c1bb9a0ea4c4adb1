// dq_rs's tile and stage geometry (kernels/dq_rs.cu), shared by every phase.
#include "common.cuh"

constexpr int RS_BK = 64;                    // k per stage
constexpr int RS_BM = 128;                   // weight rows per tile: 2 consumer warpgroups x m64
constexpr int RS_BT = 128;                   // tokens per wgmma (m64n128k16) and per x box half
constexpr int RS_X_HALF = RS_BT * RS_BK * 2;  // 16 KB: one 128-token half of an x stage
constexpr int RS_ATOM = 1024;                // 8 swizzled 128-byte rows: the x tile's SBO
constexpr int RS_CS = RS_BT * RS_BM * 2;      // the output staging tile (cs), bytes

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
