// e2m1 -> e4m3 (eight at a time), e2m1 -> bf16 (eight at a time, as pairs four apart, as such or times
// 2^-126) and e2m1 -> f16 times 2^-14 (eight at a time, in pairs of their own order), exactly.
//
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
#if defined(__CUDACC__)
#include "src/cuda/ptx/prmt.cuh"
#endif

namespace bsgemm::core {

// The byte-select form of PRMT: byte i of the result is byte (selector nibble i) of {hi:lo}. The four
// low nibbles of the selector must be 0-7 (PRMT's default mode reads bit 3 as a sign-replicate flag).
BSGEMM_HD inline std::uint32_t byte_select(std::uint32_t lo, std::uint32_t hi, std::uint32_t selector) {
#if defined(__CUDA_ARCH__)
  return ptx::byte_permute(lo, hi, selector);
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

// e2m1 -> bf16, eight at a time, exactly, as pairs four apart: word i holds elements i (low half) and
// i + 4 (high half), the order both decoding kernels feed their wgmma in (the order of K inside a scale
// block is free as long as both operands follow it). The bf16 bits of the magnitudes 0, 0.5, 1, 1.5, 2, 3,
// 4, 6 are 0x0000, 0x3F00, 0x3F80, 0x3FC0, 0x4000, 0x4040, 0x4080, 0x40C0. Both elements of a word then
// take their sign from the same shift of the codes, and the eight bf16 magnitudes use only five distinct
// bytes (0x00, 0x3F, 0x40, 0x80, 0xC0), few enough for a byte table whose low word is zero (PRMT with RZ, no
// table register to keep):
// one permute turns four codes into four selector bytes (low byte's entry, high byte's entry), one gathers
// elements i and i + 4's selectors, one looks their four bytes up.
inline constexpr std::uint32_t kBf16BytesHigh = 0xC080403Fu;  // entries 4-7: 0x3F, 0x40, 0x80, 0xC0 (0-3: 0)
// Per magnitude 0..7, the entries of its low and high byte: (high << 4) | low.
inline constexpr std::uint32_t kBf16SelectorsLow = 0x47464000u;   // 0, 0.5, 1, 1.5
inline constexpr std::uint32_t kBf16SelectorsHigh = 0x57565550u;  // 2, 3, 4, 6

// `low_table` is kBf16SelectorsLow; a kernel may pass it in a register it keeps (ptxas otherwise moves the
// constant from a uniform register before every lookup, since PRMT takes only one immediate).
BSGEMM_HD inline void e2m1x8_to_bf16_pairs(std::uint32_t codes, std::uint32_t (&words)[4],
                                           std::uint32_t low_table = kBf16SelectorsLow) {
  const std::uint32_t magnitude = codes & 0x77777777u;
  const std::uint32_t selectors_low = byte_select(low_table, kBf16SelectorsHigh, magnitude);
  const std::uint32_t selectors_high = byte_select(low_table, kBf16SelectorsHigh, magnitude >> 16);
  for (int i = 0; i < 4; ++i) {
    const std::uint32_t pair = byte_select(selectors_low, selectors_high, static_cast<std::uint32_t>(i | ((4 + i) << 4)));
    const std::uint32_t bytes = byte_select(0u, kBf16BytesHigh, pair);
    // The signs of elements i and i + 4 (bits 4i + 3 and 4i + 19) to bits 15 and 31.
    words[i] = bytes | ((codes << (12 - 4 * i)) & 0x80008000u);
  }
}

// e2m1 -> bf16 times 2^-126, eight at a time, exactly, in the same pairs order: each code's three magnitude
// bits land at bf16 bits 6..8 (the exponent's two low bits and the mantissa's top bit) and its sign at bit
// 15, so the bf16 value is the e2m1 value times 2^-126 (code 1, 0.5, becomes the subnormal 2^-127; bf16
// arithmetic keeps subnormals, PTX's mul.bf16x2). One multiply by the scale times 2^126 (or by a scale
// lifted part of the way, with the rest applied to the accumulators) then gives the scaled value: no table,
// about three integer instructions per pair instead of five, for a weight decode bound by issue slots.
// One multiply-add spreads the pair's nibble to two places at once: x 2^(6-4j) puts its magnitude at 6..8,
// x 2^(12-4j) its sign at 15, and the two copies cannot overlap (bits 6..9 and 12..15, then the same 16
// higher for element i + 4); a mask keeps those four bits of each half.
inline constexpr int kTinyBf16Exponent = 126;

BSGEMM_HD inline void e2m1x8_to_tiny_bf16_pairs(std::uint32_t codes, std::uint32_t (&words)[4]) {
  const std::uint32_t high_pairs = codes >> 8;  // elements 2, 3 and 6, 7 at the positions of 0, 1 and 4, 5
  for (int i = 0; i < 4; ++i) {
    const std::uint32_t source = i < 2 ? codes : high_pairs;
    const int shift = 4 * (i % 2);  // element i's nibble sits at bits shift .. shift + 3 of source
    const std::uint32_t nibbles = source & (0x000F000Fu << shift);
    const std::uint32_t spread = nibbles * ((1u << (6 - shift)) + (1u << (12 - shift)));
    words[i] = spread & 0x81C081C0u;
  }
}

// e2m1 -> f16 times 2^-14, eight at a time, exactly, in the f16 pairs order: word 0 holds elements 0 (low
// half) and 2 (high half), word 1 elements 4 and 6, word 2 elements 1 and 3, word 3 elements 5 and 7
// (f16_pairs_word / f16_pairs_half). A code's magnitude bits go to f16 bits 9..11 (the exponent's two low bits
// and the mantissa's top bit) and its sign to bit 15, so the f16 is the e2m1 value times 2^-14 (code 1, 0.5,
// becomes the subnormal 2^-15; f16 arithmetic keeps subnormals). Only the high byte of each f16 is nonzero:
// (sign << 7) | (magnitude << 1). Those bytes come four at a time from the code word's bytes, whose high
// nibbles (odd elements) need a shift of 3 and whose low nibbles (even elements) shifts of 1 and 4, and one
// byte permute a word places two of them over zero low bytes: 11 integer instructions a word of codes, two
// fewer than the bf16 placement above, whose sign and magnitude bits are six apart in a pair's spread and
// here only three (too close for one multiply to place both).
inline constexpr int kTinyF16Exponent = 14;

BSGEMM_HD constexpr int f16_pairs_word(int element) { return 2 * (element % 2) + element / 4; }
BSGEMM_HD constexpr int f16_pairs_half(int element) { return (element / 2) % 2; }

BSGEMM_HD inline void e2m1x8_to_tiny_f16_pairs(std::uint32_t codes, std::uint32_t (&words)[4]) {
  // Byte j of odd: element 2 j + 1's high byte; of even: element 2 j's.
  const std::uint32_t odd = (codes & 0x80808080u) | ((codes >> 3) & 0x0E0E0E0Eu);
  const std::uint32_t even = ((codes << 4) & 0x80808080u) | ((codes << 1) & 0x0E0E0E0Eu);
  // Selector nibble 4 picks a byte of the zero word: the low bytes.
  words[0] = byte_select(even, 0u, 0x1404u);
  words[1] = byte_select(even, 0u, 0x3424u);
  words[2] = byte_select(odd, 0u, 0x1404u);
  words[3] = byte_select(odd, 0u, 0x3424u);
}

}  // namespace bsgemm::core
