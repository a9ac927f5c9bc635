// Block-scale codes to fp32 by bit placement, for the kernels that read the codes as they were stored
// (brought by TMA) instead of as fp32 decoded by the scale loaders. Plain __host__ __device__ code, so that
// tests/cpu/test_formats.cpp checks every code against the scalar decoders of formats.hpp.
#pragma once

#include <cstdint>

#include "bsgemm/config.hpp"
#include "bsgemm/formats.hpp"

namespace bsgemm::core {

// The codes of a one-byte scale, ue4m3 and ue8m0 alike: a table of lifted pairs (mainloop_swapped.cuh) holds them all.
inline constexpr int kScaleCodes = 256;

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

// The register-operand kernel's weight scales lifted (mainloop_swapped.cuh): the weights' codes decode to
// e2m1 x 2^-126 in bf16 (e2m1 x 2^-14 in f16, core::e2m1x8_to_tiny_f16_pairs, for the f16 operands of fp8-block128
// tokens staged as f16), and one multiply by a pair of equal halves applies the scale times a lift: 2^119 (bf16) or
// 2^7 (f16) for nv16, 2^122 or 2^10 for mx32, so that the weights reach wgmma as their values times 2^-7 (nv16) or
// 2^-4 (mx32).
inline constexpr float kUe4m3Lift = 0x1p119f;
inline constexpr float kUe8m0Lift = 0x1p122f;
inline constexpr float kUe4m3F16Lift = 0x1p7f;

// ue4m3: the staged-token tiles look each code's pair up in a table of all 256 in shared memory (kernel_swapped.cuh's
// fill_lifted_scales) instead of testing the code and building the pair from its bits: exact for every code,
// subnormal ones, NaN and the ignored sign bit included, since a ue4m3 value has 4 significant bits and both lifts
// keep it inside the format's normal range (448 x 2^7 = 57344 in f16), and so is every product: e2m1 x ue4m3 has at
// most 5 significant bits (in f16, e2m1 x ue4m3 x 2^-7 lies between 2^-17 and 21, on f16's grid).
BSGEMM_HD inline std::uint32_t ue4m3_lifted_bf16x2_entry(std::uint32_t code) {
  return static_cast<std::uint32_t>(encode_bf16(ue4m3_code_to_float(code) * kUe4m3Lift)) * 0x00010001u;
}
BSGEMM_HD inline std::uint32_t ue4m3_lifted_f16x2_entry(std::uint32_t code) {
  return static_cast<std::uint32_t>(encode_f16(ue4m3_code_to_float(code) * kUe4m3F16Lift)) * 0x00010001u;
}

// ue8m0, from the code by one integer multiply-add where the pair is exact (the code's exponent field moved up by
// the lift): in bf16 codes up to 132 (scales up to 32: 2^(e - 127) x 2^122 has the exponent field e + 122); above,
// the kernel multiplies in fp32 first.
inline constexpr float kUe8m0LiftedScaleLimit = 32.0f;  // 32 x 2^122 = 2^127, bf16's largest power of two
BSGEMM_HD inline bool ue8m0_lifts_exactly(std::uint32_t code) { return code <= 132u; }
BSGEMM_HD inline std::uint32_t ue8m0_lifted_bf16x2(std::uint32_t code) { return code * 0x00800080u + 0x3D003D00u; }

// In f16, whose range is narrow, the lifted scale 2^(e - 117) is a normal f16 for codes 103 .. 132 and the product
// e2m1 x 2^(e - 131) is exact for codes 108 .. 144 (down to f16's smallest subnormal, 2^-24): codes 108 .. 132,
// scales 2^-19 .. 32, as realistic weights' are. The kernel adds the products of a warp's weights with any other code
// in fp32 instead (mainloop_swapped.cuh).
inline constexpr std::uint32_t kUe8m0F16Lowest = 108, kUe8m0F16Highest = 132;
BSGEMM_HD inline bool ue8m0_lifts_exactly_f16(std::uint32_t code) {
  return code - kUe8m0F16Lowest <= kUe8m0F16Highest - kUe8m0F16Lowest;
}
// For a code ue8m0_lifts_exactly_f16 accepts: the exponent field code - 127 + 10 + 15 in both halves.
BSGEMM_HD inline std::uint32_t ue8m0_lifted_f16x2(std::uint32_t code) { return (code - 102u) * 0x04000400u; }
// The f16 operands' table entry of an mx32 code: its lifted pair inside the window, 0 (never a lifted pair) outside it,
// so that one lookup gives both the pair and the window's answer.
BSGEMM_HD inline std::uint32_t ue8m0_lifted_f16x2_entry(std::uint32_t code) {
  return ue8m0_lifts_exactly_f16(code) ? ue8m0_lifted_f16x2(code) : 0u;
}

}  // namespace bsgemm::core
