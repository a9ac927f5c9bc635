// mbarrier: shared-memory transaction barriers (PTX ISA 8.0, sm_90).
// Thin wrappers over cuda::ptx (CCCL) where it has the instruction; each cites its PTX form.
#pragma once

#include <cuda/ptx>

#include <cstdint>

namespace bsgemm::ptx {

__device__ __forceinline__ std::uint32_t smem_address(const void* p) {
  return static_cast<std::uint32_t>(__cvta_generic_to_shared(p));
}

// mbarrier.init.shared::cta.b64 [addr], count;
__device__ __forceinline__ void mbarrier_init(std::uint64_t* bar, std::uint32_t count) {
  ::cuda::ptx::mbarrier_init(bar, count);
}

// fence.mbarrier_init.release.cluster;  makes initialised barriers visible to the async proxy (TMA).
__device__ __forceinline__ void fence_mbarrier_init() {
  ::cuda::ptx::fence_mbarrier_init(::cuda::ptx::sem_release, ::cuda::ptx::scope_cluster);
}

// mbarrier.arrive.release.cta.shared::cta.b64 _, [addr];
__device__ __forceinline__ void mbarrier_arrive(std::uint64_t* bar) {
  asm volatile("mbarrier.arrive.release.cta.shared::cta.b64 _, [%0];" ::"r"(smem_address(bar)) : "memory");
}

// mbarrier.arrive.expect_tx.release.cta.shared::cta.b64 _, [addr], tx_count;
__device__ __forceinline__ void mbarrier_arrive_expect_tx(std::uint64_t* bar, std::uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.release.cta.shared::cta.b64 _, [%0], %1;" ::"r"(smem_address(bar)), "r"(bytes)
               : "memory");
}

// mbarrier.try_wait.parity.shared::cta.b64 complete, [addr], parity;  (acquire.cta by default)
// Spins until the phase with the given parity has completed.
__device__ __forceinline__ void mbarrier_wait(std::uint64_t* bar, std::uint32_t parity) {
  while (!::cuda::ptx::mbarrier_try_wait_parity(bar, parity)) {
  }
}

}  // namespace bsgemm::ptx
