// Decoding block-scaled FP8 and FP4 elements to bf16 with their block scale applied (design.md section
// 4): e2m1 times a power of two (ue8m0) or a ue4m3 scale is exact in bf16 for every scale, bf16 having
// fp32's exponent range; e4m3 and e5m2 times 2^k are exact down to k = -124 and -117, below which their
// smallest values fall under bf16's subnormal resolution (README, "Accuracy"). The decoded operands then
// go through BF16 wgmma with fp32 accumulation, and no promotion is needed for scales folded in this way.
//
// Eight elements at a time: one 16-byte chunk of a 128-byte-swizzled bf16 row. FP8 goes through the
// hardware's exact fp8x2 -> f16x2 conversion and fp32 (for the scale); FP4 goes to bf16 by byte permutes
// (src/core/fp4_to_fp8.hpp, exact) and is scaled in bf16.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>

#include "bsgemm/formats.hpp"
#include "src/core/fp4_to_fp8.hpp"
#include "src/cuda/sm90/fp4_widen.cuh"

namespace bsgemm::cuda {

__device__ __forceinline__ std::uint32_t bf16x2_bits(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const std::uint32_t*>(&v);
}

// Two FP8 codes (the low 16 bits of `pair`) times scale -> two bf16 in one word.
__device__ __forceinline__ std::uint32_t decode_fp8x2(std::uint32_t pair, bool e5m2, float scale) {
  const __half2_raw h = __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(pair & 0xFFFFu),
                                                   e5m2 ? __NV_E5M2 : __NV_E4M3);
  const float2 f = __half22float2(*reinterpret_cast<const __half2*>(&h));
  return bf16x2_bits(f.x * scale, f.y * scale);
}

// Eight FP8 codes (element i in byte i of {lo, hi}) -> eight bf16 (element i in half-word i).
__device__ __forceinline__ uint4 decode_fp8x8(std::uint32_t lo, std::uint32_t hi, bool e5m2, float scale) {
  return make_uint4(decode_fp8x2(lo, e5m2, scale), decode_fp8x2(lo >> 16, e5m2, scale), decode_fp8x2(hi, e5m2, scale),
                    decode_fp8x2(hi >> 16, e5m2, scale));
}

// The same in the pairs order: word i holds elements i (low half) and i + 4 (high half), the order
// core::e2m1x8_to_bf16_pairs decodes FP4 in with the fewest instructions. Both operands of a wgmma are
// decoded in one order (the sum over K does not depend on the order inside a chunk), so an FP8 operand that
// meets an FP4 one takes this, at one byte permute more per word.
__device__ __forceinline__ uint4 decode_fp8x8_pairs(std::uint32_t lo, std::uint32_t hi, bool e5m2, float scale) {
  std::uint32_t w[4];
#pragma unroll
  for (int i = 0; i < 4; ++i)
    w[i] = decode_fp8x2(core::byte_select(lo, hi, static_cast<std::uint32_t>(i | ((i + 4) << 4))), e5m2, scale);
  return make_uint4(w[0], w[1], w[2], w[3]);
}

// Words of two bf16 each, times scale: one bf16x2 multiply per word. Exact for decoded e2m1 values
// (at most 2 significant bits) times any ue8m0 or ue4m3 scale (at most 4): the product has at most 6 of
// bf16's 8 significant bits, and bf16 shares fp32's exponent range, subnormals included (mul.rn.bf16x2
// has no flush-to-zero), so every product fp32 can hold is held exactly, down to 0.5 x 2^-127; products
// past fp32's range (6 x 2^127) are inf in both. No range check, no fallback: the GPU tier's
// ExtremeScales test runs the ends of the ue8m0 range through every kernel that decodes.
__device__ __forceinline__ std::uint32_t scale_bf16x2(std::uint32_t w, float scale) {
  const __nv_bfloat162 s = __float2bfloat162_rn(scale);  // exact: a power of two or a ue4m3 value
  const __nv_bfloat162 v = __hmul2(*reinterpret_cast<const __nv_bfloat162*>(&w), s);
  return *reinterpret_cast<const std::uint32_t*>(&v);
}

template <int Words>
__device__ __forceinline__ void scale_bf16x2(std::uint32_t (&w)[Words], float scale) {
#pragma unroll
  for (int q = 0; q < Words; ++q) w[q] = scale_bf16x2(w[q], scale);
}

// Eight e2m1 codes (element i in bits 4i .. 4i+3) -> eight bf16 times scale in the pairs order: the codes
// straight to bf16 (src/core/fp4_to_fp8.hpp), then scale_bf16x2.
__device__ __forceinline__ uint4 decode_e2m1x8_pairs(std::uint32_t codes, float scale, std::uint32_t selector_table) {
  std::uint32_t w[4];
  core::e2m1x8_to_bf16_pairs(codes, w, selector_table);
  scale_bf16x2(w, scale);
  return make_uint4(w[0], w[1], w[2], w[3]);
}

// Zeroes the elements at or past `keep` (0-8) of a chunk in the pairs order.
__device__ __forceinline__ void clear_pairs_tail(uint4* chunk, int keep) {
  std::uint32_t* words = &chunk->x;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    if (i >= keep) words[i] = 0;
    else if (i + 4 >= keep) words[i] &= 0xFFFFu;
  }
}

}  // namespace bsgemm::cuda
