// Block-scale codes to fp32 by bit placement, for the kernels that read the codes as they were stored
// (brought by TMA) instead of as fp32 decoded by the scale loaders. Plain __host__ __device__ code, so that
// tests/cpu/test_formats.cpp checks every code against the scalar decoders of formats.hpp.
#pragma once

#include <cstdint>

#include "bsgemm/config.hpp"
#include "bsgemm/formats.hpp"

namespace bsgemm::core {

// ue4m3 (the NVFP4 block scale: e4m3 with the sign bit ignored) -> fp32, exactly as decode_ue4m3. The
// code's exponent and mantissa fields, placed at fp32's lowest exponent bits and top mantissa bits, are an
// fp32 of the code's value times 2^-120, normal codes as normal fp32 values and subnormal codes (exponent
// field 0) as fp32 subnormals, so one multiply by 2^120 gives the value: a shift, a multiply and the NaN
// code's select, where the hardware conversion (e4m3x2 -> f16x2, then f16 -> f32) takes three conversions
// and masks. It relies on fp32 subnormals being kept (no flush-to-zero: the build does not ask for it).
BSGEMM_HD inline float ue4m3_code_to_float(std::uint32_t code) {
  code &= 0x7Fu;
  const float placed = detail::bits_to_float(code << 20) * 0x1p120f;
  return code == 0x7Fu ? detail::bits_to_float(0x7FC00000u) : placed;
}

// The register-operand kernel's weight scales lifted into bf16 (mainloop_swapped.cuh: the weights' codes
// decode to e2m1 x 2^-126, and one bf16 multiply applies the scale times 2^119 for nv16, 2^122 for mx32) as a
// pair of equal bf16 halves, straight from the scale's code by one integer multiply-add, where that bf16 is
// exact: the code's fields are the bf16's own fields moved up by the lift.
//   ue4m3: normal codes (exponent field 1-15, not NaN): 2^(e - 7) (1 + m / 8) x 2^119 has the bf16 exponent
//          field e + 239 and mantissa m, i.e. bits (code << 4) + (239 << 7).
//   ue8m0: codes up to 132 (scales up to 32): 2^(e - 127) x 2^122 has the exponent field e + 122.
// Elsewhere (ue4m3 subnormals and NaN, ue8m0 scales above 32) the kernel multiplies in fp32 first. The ue4m3
// test is on the code as stored: one with its (ignored) sign bit set takes the fp32 path too, so that the test is
// one compare and the pair needs no mask (the register-operand kernel runs both for every code it reads: nvfp4
// weights' decode rows measured 1.7-2.6% faster than with the mask and two compares, bench/NOTES.md version 53).
inline constexpr float kUe4m3Lift = 0x1p119f;
inline constexpr float kUe8m0Lift = 0x1p122f;

BSGEMM_HD inline bool ue4m3_lifts_exactly(std::uint32_t code) { return code - 0x08u < 0x77u; }  // 0x08 .. 0x7E
// For a code ue4m3_lifts_exactly accepts.
BSGEMM_HD inline std::uint32_t ue4m3_lifted_bf16x2(std::uint32_t code) { return code * 0x00100010u + 0x77807780u; }

// The largest ue8m0 scale that lifts: 32 x 2^122 = 2^127, bf16's largest power of two (code 132).
inline constexpr float kUe8m0LiftedScaleLimit = 32.0f;
BSGEMM_HD inline bool ue8m0_lifts_exactly(std::uint32_t code) { return code <= 132u; }
BSGEMM_HD inline std::uint32_t ue8m0_lifted_bf16x2(std::uint32_t code) { return code * 0x00800080u + 0x3D003D00u; }

// The same for the register-operand kernel's f16 operands (fp8-block128 tokens staged as f16): the weights'
// codes decode to e2m1 x 2^-14 (core::e2m1x8_to_tiny_f16_pairs), and one f16 multiply applies the scale times
// 2^7 for nv16, 2^10 for mx32, so that the weights reach wgmma as their values times 2^-7 and 2^-4, as with bf16.
//   ue4m3: normal codes (ue4m3_lifts_exactly): 2^(e - 7) (1 + m / 8) x 2^7 has the f16 exponent field e + 15 and
//          mantissa m << 7, i.e. bits (code << 7) + (15 << 10), at most 57344 = 448 x 2^7. Every ue4m3 scale
//          (subnormal ones through fp32, kUe4m3F16Lift) gives an exact product: e2m1 x ue4m3 x 2^-7 has at most 5
//          significant bits between 2^-17 and 21, all on f16's grid.
//   ue8m0: f16's range is narrow. The lifted scale 2^(e - 117) is a normal f16 for codes 103 .. 132 and the
//          product e2m1 x 2^(e - 131) is exact for codes 108 .. 144 (down to f16's smallest subnormal, 2^-24):
//          codes 108 .. 132, scales 2^-19 .. 32, as realistic weights' are. The kernel adds the products of a
//          warp's weights with any other code in fp32 instead (mainloop_swapped.cuh).
inline constexpr float kUe4m3F16Lift = 0x1p7f;
BSGEMM_HD inline std::uint32_t ue4m3_lifted_f16x2(std::uint32_t code) { return code * 0x00800080u + 0x3C003C00u; }

inline constexpr std::uint32_t kUe8m0F16Lowest = 108, kUe8m0F16Highest = 132;
BSGEMM_HD inline bool ue8m0_lifts_exactly_f16(std::uint32_t code) {
  return code - kUe8m0F16Lowest <= kUe8m0F16Highest - kUe8m0F16Lowest;
}
// For a code ue8m0_lifts_exactly_f16 accepts: the exponent field code - 127 + 10 + 15 in both halves.
BSGEMM_HD inline std::uint32_t ue8m0_lifted_f16x2(std::uint32_t code) { return (code - 102u) * 0x04000400u; }

}  // namespace bsgemm::core
