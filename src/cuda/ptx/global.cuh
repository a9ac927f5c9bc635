// Plain global-memory accesses where the compiler cannot see the state space (a pointer read from a group
// description is generic, so it would emit generic ST.E).
#pragma once

#include <cstdint>

namespace bsgemm::ptx {

// st.global.b32 [address], value;
__device__ __forceinline__ void store_global_u32(void* address, std::uint32_t value) {
  asm volatile("st.global.b32 [%0], %1;" ::"l"(reinterpret_cast<std::uint64_t>(address)), "r"(value) : "memory");
}

}  // namespace bsgemm::ptx
