// The scale loaders' second job with FP4 operands: widen a stage's packed e2m1 tile to e4m3 in shared
// memory, in the layout the FP8 wgmma reads (src/core/fp4_to_fp8.hpp has the exact conversion).
//
// Weights stay 4-bit all the way from HBM into shared memory; only the copy the tensor cores read is
// 8-bit. TMA writes the packed tile plainly, 64 bytes (128 K values) per row; the widened tile is K-major
// with the 128-byte swizzle: 16-byte chunk c of row r lives at r * 128 + ((c ^ (r % 8)) * 16). A lane
// widens 8 packed bytes into one chunk per step, so a quarter-warp writes one whole 128-byte row (no
// bank conflicts) and reads 64 consecutive bytes.
#pragma once

#include <cstdint>

#include "src/core/fp4_to_fp8.hpp"
#include "src/cuda/sm90/kernel_traits.cuh"

namespace bsgemm::cuda {

// Zeroes the bytes of a 16-byte chunk from position `keep` on (0 <= keep < 16); also used for chunks of
// eight bf16 (decode_bf16.cuh).
__device__ __forceinline__ void clear_chunk_tail(uint4* chunk, int keep) {
  std::uint32_t* words = &chunk->x;
#pragma unroll
  for (int q = 0; q < 4; ++q) {
    const int kept = keep - 4 * q;
    if (kept <= 0) words[q] = 0;
    else if (kept < 4) words[q] &= (1u << (8 * kept)) - 1u;
  }
}

// Widens `Rows` packed rows at src into dst. K positions at or beyond k_valid (the tail of the last
// k-block) become zero: a packed row's last byte may carry a padding nibble, which with two FP4 operands
// would meet another padding nibble instead of TMA's zero fill.
template <int Rows>
__device__ __forceinline__ void widen_e2m1_tile(const std::uint8_t* src, std::uint8_t* dst, int k_valid, int lane) {
  constexpr int kChunksPerRow = kBlockK / 16;
#pragma unroll 2
  for (int chunk = lane; chunk < Rows * kChunksPerRow; chunk += 32) {
    const int r = chunk / kChunksPerRow, c = chunk % kChunksPerRow;
    const uint2 packed = *reinterpret_cast<const uint2*>(src + r * (kBlockK / 2) + c * 8);
    uint4 widened;
    core::e2m1x8_to_e4m3x8(packed.x, &widened.x, &widened.y);
    core::e2m1x8_to_e4m3x8(packed.y, &widened.z, &widened.w);
    const int keep = k_valid - 16 * c;
    if (keep < 16) clear_chunk_tail(&widened, keep < 0 ? 0 : keep);
    *reinterpret_cast<uint4*>(dst + r * kBlockK + ((c ^ (r % 8)) * 16)) = widened;
  }
}

}  // namespace bsgemm::cuda
