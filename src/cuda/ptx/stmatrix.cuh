// Matrix stores from registers to shared memory (PTX ISA 7.8, sm_90).
#pragma once

#include <cstdint>

namespace bsgemm::ptx {

// stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [p], {r0, r1, r2, r3};
// Four 8x8 matrices of 16-bit elements, register i of every lane holding matrix i in the mma fragment
// layout (lane l: row l / 4, columns 2 (l % 4) and + 1). .trans stores each matrix transposed: its column c
// becomes the 16 contiguous bytes at the address lane 8 i + c gives for matrix i.
__device__ __forceinline__ void stmatrix_x4_trans(void* row_address, std::uint32_t r0, std::uint32_t r1, std::uint32_t r2,
                                                  std::uint32_t r3) {
  const auto address = static_cast<std::uint32_t>(__cvta_generic_to_shared(row_address));
  asm volatile("stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%0], {%1, %2, %3, %4};" ::"r"(address), "r"(r0), "r"(r1),
               "r"(r2), "r"(r3)
               : "memory");
}

}  // namespace bsgemm::ptx
