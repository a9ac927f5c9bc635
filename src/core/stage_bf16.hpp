// The staging pass's arithmetic (KernelPath::staged, src/cuda/sm90/stage_bf16.cu): one 8-element chunk of
// FP8 or FP4 codes (never wider than a scale block) times its block scale, as bf16 pairs. __host__ __device__ so that
// tests/cpu/test_formats.cpp checks the element order and the exactness on the CPU; on the device the FP8
// codes go through the hardware's exact FP8 -> f16 conversion, on the host through formats.hpp's decoders.
#pragma once

#include <cstdint>

#include "bsgemm/config.hpp"
#include "bsgemm/formats.hpp"
#include "src/core/fp4_to_fp8.hpp"
#if defined(__CUDACC__)
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#endif

namespace bsgemm::core {

// Two FP8 codes (the low two bytes, the lower first) times `scale`, as a bf16 pair (the lower half first),
// rounded to nearest even: exact wherever the product is a normal bf16, since an FP8 value has at most 4
// significant bits and a scale (2^k or a ue4m3 value) at most 4.
BSGEMM_HD inline std::uint32_t stage_pair(std::uint32_t codes, bool e5m2, float scale) {
#if defined(__CUDA_ARCH__)
  const __half2_raw h = __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(codes & 0xFFFFu),
                                                   e5m2 ? __NV_E5M2 : __NV_E4M3);
  const float2 f = __half22float2(*reinterpret_cast<const __half2*>(&h));
  const __nv_bfloat162 b = __floats2bfloat162_rn(f.x * scale, f.y * scale);
  return *reinterpret_cast<const std::uint32_t*>(&b);
#else
  const auto decode = [e5m2](std::uint32_t c) {
    return e5m2 ? decode_e5m2(static_cast<std::uint8_t>(c)) : decode_e4m3(static_cast<std::uint8_t>(c));
  };
  return static_cast<std::uint32_t>(encode_bf16(decode(codes & 0xFFu) * scale)) |
         static_cast<std::uint32_t>(encode_bf16(decode((codes >> 8) & 0xFFu) * scale)) << 16;
#endif
}

// A chunk of 8 FP8 codes (four per word, in K order) times `scale`: element e lands in half e % 2 of
// pairs[e / 2], so that the four words are the chunk's 16 bytes of bf16 in K order.
BSGEMM_HD inline void stage_chunk(const std::uint32_t (&codes)[2], bool e5m2, float scale, std::uint32_t (&pairs)[4]) {
  for (int w = 0; w < 2; ++w) {
    pairs[2 * w] = stage_pair(codes[w], e5m2, scale);
    pairs[2 * w + 1] = stage_pair(codes[w] >> 16, e5m2, scale);
  }
}

// stage_chunk in the pairs order: pairs[i] holds elements i (low half) and i + 4 (high half), the order the
// register-operand kernel's FP4 decode produces (src/cuda/sm90/decode_bf16.cuh).
BSGEMM_HD inline void stage_chunk_pairs(const std::uint32_t (&codes)[2], bool e5m2, float scale, std::uint32_t (&pairs)[4]) {
  const std::uint32_t reordered[2] = {byte_select(codes[0], codes[1], 0x5140u), byte_select(codes[0], codes[1], 0x7362u)};
  stage_chunk(reordered, e5m2, scale, pairs);
}

// The register-operand kernel's K order (src/cuda/sm90/kernel_traits_swapped.cuh): within each 64-deep slice,
// the element at position 16 p + 8 b + 4 h + i (p < 4, b < 2, h < 2, i < 4) is what wgmma reads at slot
// 8 (4 b + i) + 2 p + h of the tokens' bf16 row. Tokens staged for that kernel are written in slot order, so
// that TMA brings them into shared memory exactly as wgmma's B operand reads them.
inline constexpr int kWeightsOrderSlice = 64;
BSGEMM_HD constexpr int weights_order_slot(int position) {
  const int p = position / 16, b = (position / 8) % 2, h = (position / 4) % 2, i = position % 4;
  return 8 * (4 * b + i) + 2 * p + h;
}

// The same order for the f16 operands (fp8-block128 tokens staged as f16, whose weights decode through
// e2m1x8_to_tiny_f16_pairs): the element at position 16 p + 8 b + e (p < 4, b < 2, e < 8) of a slice sits in word
// f16_pairs_word(e), half f16_pairs_half(e) of its code word's four, which feed wgmma step 2 b + word / 2 at
// fragment elements 2 (word % 2) + half: slot 32 b + 8 word + 2 p + half of the tokens' f16 row.
BSGEMM_HD constexpr int weights_order_slot_f16(int position) {
  const int p = position / 16, b = (position / 8) % 2, e = position % 8;
  return 32 * b + 8 * f16_pairs_word(e) + 2 * p + f16_pairs_half(e);
}

// fp8-block128 tokens staged as f16 (KernelPath::staged's register-operand kernel): a token row's fp32 block
// scales do not fit f16 or bf16 with its e4m3 values exactly (a 24-bit scale times a 4-bit value), so the pass
// rounds each product x s to f16 (relative error at most 2^-11, f16's unit roundoff; the accumulation stays fp32)
// after dividing the row by a power of two 2^E that brings its largest |x s| into [2^8, 2^9): f16's range
// (2^-24 .. 65504) then holds every product but those 2^-32 or less of the row's largest, whose absolute error
// (at most 2^-25 x 2^E) is below 2^-33 of the row's largest value. The kernel multiplies each token's outputs by
// 2^E. E from the fp32 bits of the row's largest |x s| (computed as x times s in fp32): 0 for a row of zeros, an
// infinity or a NaN (which then stage as such), and at least -126 so that 2^E and 2^-E are fp32 values (rows
// whose largest product lies below 2^-118 stage below 2^8).
BSGEMM_HD inline int block128_token_exponent(std::uint32_t largest_bits) {
  if (largest_bits == 0 || largest_bits >= 0x7F800000u) return 0;
  const int floor_log2 = static_cast<int>(largest_bits >> 23) - 127;  // -127 for fp32 subnormals: clamped below
  const int e = floor_log2 - 8;
  return e < -126 ? -126 : e;
}
// The staging pass knows a bound on a row's largest |x s| before its codes, 448 (e4m3's largest magnitude) times the
// row's largest |s|, and the largest value itself only after them. It stages each row with the bound's exponent
// (block128_token_exponent of the bound's bits), unless that lies more than kBlock128BoundSlack binades above the
// largest value's own (or below it, where the bound is not finite): then with the largest value's, staging the row
// again. The row's largest value then lies in [2^(8 - kBlock128BoundSlack), 2^9) after the division, so the products
// that f16 holds as subnormals (below 2^-14 after the division: 2^-(22 - kBlock128BoundSlack) of the row's largest
// value or less) keep an absolute error of at most 2^-25 x 2^E, below 2^-(33 - kBlock128BoundSlack) of the row's
// largest value, and every other product its relative 2^-11. A block that a quantizer scaled by
// amax / 448 reaches its bound exactly, one scaled by a power of two at or above amax / 448 (ue8m0 scales) within a
// binade: such rows are staged once. Rows of zeros, or holding a NaN (whose outputs are all NaN), keep the bound's.
inline constexpr int kBlock128BoundSlack = 4;
BSGEMM_HD inline int block128_row_exponent(int bound_e, std::uint32_t largest_bits) {
  if (largest_bits == 0 || largest_bits >= 0x7F800000u) return bound_e;
  const int e = block128_token_exponent(largest_bits);
  return e > bound_e || e < bound_e - kBlock128BoundSlack ? e : bound_e;
}
// 2^e for e in -126 .. 127.
BSGEMM_HD inline float power_of_two(int e) { return detail::bits_to_float(static_cast<std::uint32_t>(e + 127) << 23); }

// A token block's scale for staging: s x 2^-E, where s x 2^-E is not an fp32 value only for blocks of zeros (any
// nonzero x of the block has |x s| <= 2^(E + 9)), which stage as zeros at the largest finite scale instead of
// 0 x infinity. Infinite and NaN scales stay as they are.
BSGEMM_HD inline float block128_staging_scale(float scale, int e) {
  const float staged = scale * power_of_two(-e);
  const bool overflowed = (detail::float_to_bits(staged) & 0x7FFFFFFFu) == 0x7F800000u &&
                          (detail::float_to_bits(scale) & 0x7FFFFFFFu) != 0x7F800000u;
  return overflowed ? (staged > 0 ? 3.4028234663852886e38f : -3.4028234663852886e38f) : staged;
}

// Two e4m3 codes (the low two bytes, the lower first) times `scale`, as an f16 pair rounded to nearest even.
BSGEMM_HD inline std::uint32_t stage_pair_f16(std::uint32_t codes, float scale) {
#if defined(__CUDA_ARCH__)
  const __half2_raw h = __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(codes & 0xFFFFu), __NV_E4M3);
  const float2 f = __half22float2(*reinterpret_cast<const __half2*>(&h));
  const __half2 r = __floats2half2_rn(f.x * scale, f.y * scale);
  return *reinterpret_cast<const std::uint32_t*>(&r);
#else
  return static_cast<std::uint32_t>(encode_f16(decode_e4m3(static_cast<std::uint8_t>(codes)) * scale)) |
         static_cast<std::uint32_t>(encode_f16(decode_e4m3(static_cast<std::uint8_t>(codes >> 8)) * scale)) << 16;
#endif
}

// A chunk of 8 e4m3 codes (four per word, in K order) times its staging scale, as f16 in the f16 pairs order:
// element e in word f16_pairs_word(e), half f16_pairs_half(e), i.e. words (0, 2), (4, 6), (1, 3), (5, 7).
BSGEMM_HD inline void stage_block128_f16_chunk(const std::uint32_t (&codes)[2], float scale, std::uint32_t (&pairs)[4]) {
  for (int w = 0; w < 2; ++w) {
    const std::uint32_t spread = byte_select(codes[w], 0u, 0x3120u);  // elements 4 w + {0, 2, 1, 3}
    pairs[w] = stage_pair_f16(spread, scale);
    pairs[2 + w] = stage_pair_f16(spread >> 16, scale);
  }
}

// A chunk of 8 e2m1 codes (one word, the low nibble first) as e4m3 codes in stage_chunk's order (exact:
// every e2m1 value is an e4m3 value).
BSGEMM_HD inline void widen_fp4_chunk(std::uint32_t packed, std::uint32_t (&codes)[2]) {
  e2m1x8_to_e4m3x8(packed, &codes[0], &codes[1]);
}

// a times b, two bf16 each (the lower half first), rounded to nearest even, subnormals kept (mul.rn.bf16x2;
// the host rounds the fp32 product, exact for any two bf16 values whose product is a normal fp32).
BSGEMM_HD inline std::uint32_t bf16x2_multiply(std::uint32_t a, std::uint32_t b) {
#if defined(__CUDA_ARCH__)
  const __nv_bfloat162 product =
      __hmul2_rn(*reinterpret_cast<const __nv_bfloat162*>(&a), *reinterpret_cast<const __nv_bfloat162*>(&b));
  return *reinterpret_cast<const std::uint32_t*>(&product);
#else
  const auto half = [](std::uint32_t w, int h) { return decode_bf16(static_cast<std::uint16_t>(w >> (16 * h))); };
  return static_cast<std::uint32_t>(encode_bf16(half(a, 0) * half(b, 0))) |
         static_cast<std::uint32_t>(encode_bf16(half(a, 1) * half(b, 1))) << 16;
#endif
}

// The same for f16 (mul.rn.f16x2, which keeps f16 subnormals; the host rounds the fp32 product, exact for any
// two f16 values), and an fp32 value as a pair of equal f16 halves, rounded to nearest even.
BSGEMM_HD inline std::uint32_t f16x2_multiply(std::uint32_t a, std::uint32_t b) {
#if defined(__CUDA_ARCH__)
  const __half2 product = __hmul2_rn(*reinterpret_cast<const __half2*>(&a), *reinterpret_cast<const __half2*>(&b));
  return *reinterpret_cast<const std::uint32_t*>(&product);
#else
  const auto half = [](std::uint32_t w, int h) { return decode_f16(static_cast<std::uint16_t>(w >> (16 * h))); };
  return static_cast<std::uint32_t>(encode_f16(half(a, 0) * half(b, 0))) |
         static_cast<std::uint32_t>(encode_f16(half(a, 1) * half(b, 1))) << 16;
#endif
}
BSGEMM_HD inline std::uint32_t f16x2_of(float x) {
#if defined(__CUDA_ARCH__)
  const __half2 h = __float2half2_rn(x);
  return *reinterpret_cast<const std::uint32_t*>(&h);
#else
  return static_cast<std::uint32_t>(encode_f16(x)) * 0x00010001u;
#endif
}

// An nvfp4 chunk straight from its codes: 8 e2m1 codes (one word, the low nibble first) times their ue4m3
// scale, in the pairs order, bit for bit what widen_fp4_chunk and stage_chunk_pairs make of them with the
// decoded scale, without the e4m3 widening and the f16 and fp32 detour. The codes go through the
// register-operand kernel's byte-table decode (e2m1x8_to_bf16_pairs, exact), then one bf16x2 multiply a
// pair by the scale, exact as the widened path is: e2m1 values have at most 2 significant bits and ue4m3
// ones 4, and every nonzero product (2^-10 .. 2688) is a normal bf16. The scale's bf16 comes from its code
// by integer arithmetic: the code's 7 low bits << 4 are the bf16 of its value times 2^-120 for every finite
// code, subnormal ones included (below their smallest exponent ue4m3 and bf16 both go on in steps of the
// same size, so the shift maps subnormal onto subnormal), and one exact multiply by 2^120 lifts it to the
// normal bf16 of the value (mul.rn.bf16x2 keeps subnormal inputs). Zeros take their sign from the same IEEE
// rule in both paths (a -0 value, or a negative one times a zero scale, gives -0). The NaN scale code (0x7F,
// the sign ignored) becomes the NaN 0x7FFF, so every product is 0x7FFF whether the hardware returns its
// canonical NaN or passes the NaN operand on, as the widened path's NaN is (fp32 arithmetic returns
// 0x7FFFFFFF, which rounds to 0x7FFF); on the host both paths give encode_bf16's 0x7FC0.
inline constexpr std::uint32_t kBf16TwoTo120 = 0x7B80u;

BSGEMM_HD inline void stage_nv16_fp4_chunk_pairs(std::uint32_t packed, std::uint32_t scale_code, std::uint32_t (&pairs)[4]) {
  e2m1x8_to_bf16_pairs(packed, pairs);
  const std::uint32_t lowered = (scale_code * 0x00100010u) & 0x07F007F0u;  // the code's 7 low bits << 4, twice
  const std::uint32_t scale = lowered == 0x07F007F0u ? 0x7FFF7FFFu : bf16x2_multiply(lowered, kBf16TwoTo120 * 0x00010001u);
  for (int i = 0; i < 4; ++i) pairs[i] = bf16x2_multiply(pairs[i], scale);
}

// An mxfp4 chunk straight from its codes, likewise: a ue8m0 code is the bf16 of its value by bit placement
// (2^(code - 127) has the bf16 exponent field `code`: bits code << 7; code 0's 2^-127 is the subnormal 0x0040;
// the NaN code 255 becomes 0x7FFF as above), and e2m1 x 2^k is exact in bf16 wherever it is finite (at most 2
// significant bits, the smallest nonzero product 2^-128 being a bf16 subnormal), so one bf16x2 multiply a pair
// gives what widen_fp4_chunk and stage_chunk_pairs make of the codes with the decoded scale, bit for bit,
// overflow to infinity included; where the widened path takes 57 instructions a chunk, this takes some 25.
BSGEMM_HD inline void stage_mx32_fp4_chunk_pairs(std::uint32_t packed, std::uint32_t scale_code, std::uint32_t (&pairs)[4]) {
  e2m1x8_to_bf16_pairs(packed, pairs);
  const std::uint32_t bits = scale_code == 0 ? 0x0040u : scale_code == 0xFFu ? 0x7FFFu : scale_code << 7;
  const std::uint32_t scale = bits * 0x00010001u;
  for (int i = 0; i < 4; ++i) pairs[i] = bf16x2_multiply(pairs[i], scale);
}

}  // namespace bsgemm::core
