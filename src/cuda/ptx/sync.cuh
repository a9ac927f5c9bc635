// Warpgroup register reallocation, named barriers and proxy fences (PTX ISA 8.0, sm_90 / sm_90a).
#pragma once

#include <cstdint>

namespace bsgemm::ptx {

// setmaxnreg.dec.sync.aligned.u32 N;  the whole warpgroup gives registers back (producers).
template <std::uint32_t Registers>
__device__ __forceinline__ void setmaxnreg_dec() {
  static_assert(Registers >= 24 && Registers <= 256 && Registers % 8 == 0);
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(Registers));
}

// setmaxnreg.inc.sync.aligned.u32 N;  the whole warpgroup takes registers (consumers).
template <std::uint32_t Registers>
__device__ __forceinline__ void setmaxnreg_inc() {
  static_assert(Registers >= 24 && Registers <= 256 && Registers % 8 == 0);
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(Registers));
}

// bar.sync id, threads;  a barrier among `threads` threads (a multiple of 32); id 0 is __syncthreads.
__device__ __forceinline__ void named_barrier_sync(std::uint32_t id, std::uint32_t threads) {
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(threads) : "memory");
}

// fence.proxy.async.shared::cta;  orders this thread's ordinary shared-memory writes before reads of the
// same bytes through the async proxy (wgmma operands, TMA), once a barrier has passed the writes on.
__device__ __forceinline__ void fence_proxy_async_shared() { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }

// fence.acq_rel.cta;  this thread's earlier memory accesses, shared loads still in flight among them, take
// effect before its later ones: ptxas issues an mbarrier arrive without waiting for the warp's outstanding
// LDS (scripts/sass_release_audit.py), so a release that must follow the stage's loads is fenced first.
__device__ __forceinline__ void fence_acq_rel_cta() { asm volatile("fence.acq_rel.cta;" ::: "memory"); }

// bar.arrive id, threads;  counts this warp's arrival at barrier `id` without waiting for the others.
__device__ __forceinline__ void named_barrier_arrive(std::uint32_t id, std::uint32_t threads) {
  asm volatile("bar.arrive %0, %1;" ::"r"(id), "r"(threads) : "memory");
}

// griddepcontrol.launch_dependents;  this CTA no longer holds back the launch of the grid that follows it
// with programmatic dependent launch (that grid still waits for this one's memory with the wait below).
__device__ __forceinline__ void launch_dependents() { asm volatile("griddepcontrol.launch_dependents;" ::: "memory"); }

// griddepcontrol.wait;  until the grids this one depends on have completed and their writes are visible.
// Returns at once when the grid was launched without programmatic dependent launch.
__device__ __forceinline__ void wait_for_prerequisite_grids() { asm volatile("griddepcontrol.wait;" ::: "memory"); }

}  // namespace bsgemm::ptx
