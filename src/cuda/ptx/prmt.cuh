// PRMT in its default mode, without __byte_perm's masking of the selector (PTX ISA, prmt).
#pragma once

#include <cstdint>

namespace bsgemm::ptx {

// prmt.b32 d, lo, hi, selector;  byte i of d is byte (nibble i of selector) of {hi:lo} for nibbles 0-7.
// __byte_perm computes the same but clears bit 3 of every nibble first, an extra LOP3 when the selector
// is computed; callers whose selectors never set it (core::byte_select's contract) skip that.
__device__ __forceinline__ std::uint32_t byte_permute(std::uint32_t lo, std::uint32_t hi, std::uint32_t selector) {
  std::uint32_t d;
  asm("prmt.b32 %0, %1, %2, %3;" : "=r"(d) : "r"(lo), "r"(hi), "r"(selector));
  return d;
}

}  // namespace bsgemm::ptx
