// The order in which the two consumer warpgroups issue their wgmma batches: strictly alternating.
//
// Each batch is followed by a wait and the promotion on the CUDA cores. Left alone, both warpgroups
// issue at about the same moment, the tensor cores interleave the two batches, both finish together,
// and both then promote while the tensor cores idle. Taking turns queues one warpgroup's batch behind
// the other's: while warpgroup 0 waits for its batch and promotes, warpgroup 1's batch runs, and the
// next batch of warpgroup 0 is issued before that one ends. Two named barriers carry the turn
// (bar.sync by the warpgroup whose turn it is, bar.arrive by the other). Both warpgroups walk the same
// tiles and k-blocks, so they issue the same number of batches.
#pragma once

#include <cstdint>

#include "src/cuda/ptx/sync.cuh"
#include "src/cuda/sm90/kernel_traits.cuh"

namespace bsgemm::cuda {

struct IssueTurns {
  int consumer;  // 0 or 1

  static constexpr std::uint32_t kThreads = 2 * kThreadsPerWarpgroup;

  __device__ static std::uint32_t barrier_of(int c) {
    return static_cast<std::uint32_t>(NamedBarrier::issue_turn_consumer0) + static_cast<std::uint32_t>(c);
  }

  // Before the first batch: warpgroup 0 goes first.
  __device__ void start() const {
    if (consumer == 1) ptx::named_barrier_arrive(barrier_of(0), kThreads);
  }
  // Blocks until the other warpgroup has issued its previous batch.
  __device__ void wait_turn() const { ptx::named_barrier_sync(barrier_of(consumer), kThreads); }
  // After this warpgroup's batch is issued and committed.
  __device__ void pass_turn() const { ptx::named_barrier_arrive(barrier_of(consumer ^ 1), kThreads); }
  // After the last batch: warpgroup 0 takes the turn warpgroup 1 passed last, so no arrival is left over.
  __device__ void finish() const {
    if (consumer == 0) ptx::named_barrier_sync(barrier_of(0), kThreads);
  }
};

}  // namespace bsgemm::cuda
