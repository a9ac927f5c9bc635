// Global-memory accesses the compiler would not emit by itself: plain stores where it cannot see the state space
// (a pointer read from a group description is generic, so it would emit generic ST.E), the release and
// acquire of the stream-K partials' flags (PTX ISA, memory consistency model), and prefetches into L1.
#pragma once

#include <cstdint>

namespace bsgemm::ptx {

// st.release.gpu.global.b32 [address], value;  this thread's earlier writes (and those a CTA barrier ordered
// before it) are visible at GPU scope to whoever acquires the value.
__device__ __forceinline__ void store_release_gpu_u32(void* address, std::uint32_t value) {
  asm volatile("st.release.gpu.global.b32 [%0], %1;" ::"l"(reinterpret_cast<std::uint64_t>(address)), "r"(value) : "memory");
}

// ld.acquire.gpu.global.b32 value, [address];  the value, and the writes released with it visible to this
// thread's later reads.
__device__ __forceinline__ std::uint32_t load_acquire_gpu_u32(const void* address) {
  std::uint32_t value;
  asm volatile("ld.acquire.gpu.global.b32 %0, [%1];" : "=r"(value) : "l"(reinterpret_cast<std::uint64_t>(address)) : "memory");
  return value;
}

// prefetch.global.L1 [address];  brings the line that holds address into this SM's L1.
__device__ __forceinline__ void prefetch_global_l1(const void* address) {
  asm volatile("prefetch.global.L1 [%0];" ::"l"(reinterpret_cast<std::uint64_t>(address)));
}

// st.global.b32 [address], value;
__device__ __forceinline__ void store_global_u32(void* address, std::uint32_t value) {
  asm volatile("st.global.b32 [%0], %1;" ::"l"(reinterpret_cast<std::uint64_t>(address)), "r"(value) : "memory");
}

}  // namespace bsgemm::ptx
