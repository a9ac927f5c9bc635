// The register-operand kernel's exchange of a split tile's fp32 accumulators (core::StreamKSplit): a CTA whose
// unit of the tile does not start at its first k-block publishes its accumulators as a partial, and the tile's
// owner (the unit that starts there) adds every partial of the tile before its epilogue, in CTA order, so that
// the sum does not depend on timing. A CTA has one partial slot (KernelParams::partials) and one flag
// (KernelParams::partial_flags, zeroed by the staging pass before every call that splits): each CTA makes at most one
// partial a call, the first unit of its share, so an owner never waits on a CTA that waits on it.
#pragma once

#include <cstdint>

#include "src/core/tile_scheduler.hpp"
#include "src/cuda/ptx/global.cuh"
#include "src/cuda/ptx/sync.cuh"
#include "src/cuda/sm90/kernel_traits.cuh"
#include "src/cuda/sm90/params.hpp"

namespace bsgemm::cuda {

template <class Traits>
struct StreamKPartials {
  static constexpr int kSlabs = Traits::kSlabs;
  static constexpr int kAcc = Traits::kAccumulators;
  static constexpr std::uint32_t kConsumerThreads = Traits::kConsumers * kThreadsPerWarpgroup;

  // Where consumer thread t's accumulator i of slab `slab` lies in a partial: by thread, so that a warp's
  // accesses are 128 consecutive bytes.
  __device__ static int index(int consumer, int slab, int i, int t) {
    return ((consumer * kSlabs + slab) * kAcc + i) * kThreadsPerWarpgroup + t;
  }
  __device__ static void sync_consumers() {
    ptx::named_barrier_sync(static_cast<std::uint32_t>(NamedBarrier::stream_k_consumers), kConsumerThreads);
  }

  // This thread's first element of CTA cta's slot; its kSlabs x kAcc elements lie at constant offsets from it.
  __device__ static float* thread_slot(const KernelParams& p, std::uint32_t cta, int consumer) {
    return p.partials + static_cast<std::size_t>(cta) * kStreamKPartialFloats +
           index(consumer, 0, 0, static_cast<int>(threadIdx.x % kThreadsPerWarpgroup));
  }

  // This CTA's partial of its unit: every consumer thread's accumulators into the CTA's slot (through L2, which the
  // owner reads), then the flag, released once all of them are written.
  __device__ static void publish(const KernelParams& p, int consumer, const float (&acc)[kSlabs][kAcc]) {
    float* slot = thread_slot(p, blockIdx.x, consumer);
#pragma unroll
    for (int slab = 0; slab < kSlabs; ++slab)
#pragma unroll
      for (int i = 0; i < kAcc; ++i) __stcg(slot + index(0, slab, i, 0), acc[slab][i]);
    sync_consumers();
    // Every consumer thread releases the flag (the same value), after the barrier that ordered all the partial's
    // stores before it: a store by one thread in a branch made ptxas give up the mainloop's uniform registers
    // (as a bulk commit did, bench/NOTES.md version 39) and spilled the consumers 272-292 bytes.
    ptx::store_release_gpu_u32(&p.partial_flags[blockIdx.x], 1u);
  }

  // A tile's owner: waits for the flags of its contributors, CTAs [blockIdx.x + 1, contributors_end)
  // (core::stream_k_contributors_end; none for a whole tile), then adds their partials into acc, in CTA order.
  __device__ static void add(const KernelParams& p, std::int32_t contributors_end, int consumer, float (&acc)[kSlabs][kAcc]) {
    const int first = static_cast<int>(blockIdx.x) + 1;
    if (first >= contributors_end) return;  // uniform: the whole CTA owns a whole tile
    const int t = threadIdx.x % kThreadsPerWarpgroup;
    if (consumer == 0 && t == 0) {
      for (int c = first; c < contributors_end; ++c)
        while (ptx::load_acquire_gpu_u32(&p.partial_flags[c]) == 0u) {
        }
    }
    sync_consumers();
    for (int c = first; c < contributors_end; ++c) {
      const float* slot = thread_slot(p, static_cast<std::uint32_t>(c), consumer);
#pragma unroll
      for (int slab = 0; slab < kSlabs; ++slab)
#pragma unroll
        for (int i = 0; i < kAcc; ++i) acc[slab][i] += __ldcg(slot + index(0, slab, i, 0));
    }
  }
};

}  // namespace bsgemm::cuda
