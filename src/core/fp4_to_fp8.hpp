// e2m1 -> e4m3, eight at a time, exactly (design.md section 4): every e2m1 value (+-{0, 0.5, 1, 1.5, 2,
// 3, 4, 6}) is an e4m3 value, so Hopper's FP8 tensor cores can multiply FP4 data once it is widened on
// chip. One 32-bit word holds eight e2m1 codes (element i in bits 4i..4i+3, the low nibble first, as
// FP4 tensors are stored); two words come out, element i in byte i.
//
// A byte permute (PRMT, __byte_perm) looks each magnitude up in an 8-byte table and a second one picks
// the sign byte, so a word costs about ten integer instructions. Plain __host__ __device__ code, so that
// tests/cpu/test_formats.cpp checks it on the CPU against the scalar codecs.
#pragma once

#include <cstdint>

#include "bsgemm/config.hpp"

namespace bsgemm::core {

// The byte-select form of PRMT: byte i of the result is byte (selector nibble i & 7) of {hi:lo}.
BSGEMM_HD inline std::uint32_t byte_select(std::uint32_t lo, std::uint32_t hi, std::uint32_t selector) {
#if defined(__CUDA_ARCH__)
  return __byte_perm(lo, hi, selector);
#else
  const std::uint64_t table = (static_cast<std::uint64_t>(hi) << 32) | lo;
  std::uint32_t r = 0;
  for (int i = 0; i < 4; ++i) r |= static_cast<std::uint32_t>((table >> (8 * ((selector >> (4 * i)) & 7u))) & 0xFFu) << (8 * i);
  return r;
#endif
}

// e4m3 codes of the e2m1 magnitudes 0, 0.5, 1, 1.5 (low word) and 2, 3, 4, 6 (high word).
inline constexpr std::uint32_t kE4m3OfE2m1Low = 0x3C383000u;
inline constexpr std::uint32_t kE4m3OfE2m1High = 0x4C484440u;

// Four e2m1 codes (the low 16 bits) -> four e4m3 codes.
BSGEMM_HD inline std::uint32_t e2m1x4_to_e4m3x4(std::uint32_t codes) {
  const std::uint32_t magnitude = byte_select(kE4m3OfE2m1Low, kE4m3OfE2m1High, codes & 0x7777u);
  const std::uint32_t sign = byte_select(0x00008000u, 0u, (codes >> 3) & 0x1111u);
  return magnitude | sign;
}

BSGEMM_HD inline void e2m1x8_to_e4m3x8(std::uint32_t codes, std::uint32_t* low, std::uint32_t* high) {
  *low = e2m1x4_to_e4m3x4(codes & 0xFFFFu);
  *high = e2m1x4_to_e4m3x4(codes >> 16);
}

}  // namespace bsgemm::core
