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

}  // namespace bsgemm::core
