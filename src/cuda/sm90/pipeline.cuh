// The ring of shared-memory stages between the producers (TMA + scale loaders) and the consumers.
//
// Stage s has a `full` barrier (producers -> consumers: the TMA transaction bytes plus one arrival per
// scale-loader lane) and an `empty` barrier (consumers -> producers: one arrival per consumer warp).
// With FP4 operands a third barrier per stage, `raw_full`, tells the scale loaders that TMA has landed
// the packed tiles they widen into the stage (one arrival: the TMA thread's, plus the bytes).
// Every role walks the same sequence of (tile, k-block) steps; step q uses stage q % Stages in phase
// (q / Stages) & 1. The parity arithmetic lives here and nowhere else.
#pragma once

#include <cstdint>

#include "src/cuda/ptx/mbarrier.cuh"

namespace bsgemm::cuda {

template <int Stages>
struct PipelineState {
  int index = 0;
  std::uint32_t phase = 0;

  __device__ void advance() {
    if (++index == Stages) {
      index = 0;
      phase ^= 1u;
    }
  }

  // Skips `steps` stages (a scale loader takes every few stages).
  __device__ void advance(int steps) {
    index += steps;
    while (index >= Stages) {
      index -= Stages;
      phase ^= 1u;
    }
  }

  // The same for any number of stages (a whole tile's k-blocks) without a loop per ring.
  __device__ void skip(int steps) {
    index += steps;
    const int wraps = index / Stages;
    index -= wraps * Stages;
    phase ^= static_cast<std::uint32_t>(wraps & 1);
  }
};

template <int Stages>
struct StagePipeline {
  std::uint64_t* full;
  std::uint64_t* empty;
  std::uint64_t* raw_full;  // null without FP4 operands

  // One thread, before the block-wide barrier that publishes the barriers.
  __device__ void init(std::uint32_t producer_arrivals, std::uint32_t consumer_arrivals) const {
    for (int s = 0; s < Stages; ++s) {
      ptx::mbarrier_init(&full[s], producer_arrivals);
      ptx::mbarrier_init(&empty[s], consumer_arrivals);
      if (raw_full != nullptr) ptx::mbarrier_init(&raw_full[s], 1);
    }
    ptx::fence_mbarrier_init();
  }

  // Producers: wait until the consumers released the stage (a fresh barrier counts as released).
  __device__ void producer_acquire(const PipelineState<Stages>& s) const { ptx::mbarrier_wait(&empty[s.index], s.phase ^ 1u); }
  // The TMA producer: its arrival, announcing the bytes the copies into the stage will deliver.
  __device__ void producer_expect_bytes(const PipelineState<Stages>& s, std::uint32_t bytes) const {
    ptx::mbarrier_arrive_expect_tx(&full[s.index], bytes);
  }
  // A producer that wrote the stage with ordinary stores: its arrival (release orders the stores).
  __device__ void producer_commit(const PipelineState<Stages>& s) const { ptx::mbarrier_arrive(&full[s.index]); }
  __device__ std::uint64_t* full_barrier(const PipelineState<Stages>& s) const { return &full[s.index]; }
  // FP4 operands: the TMA producer's arrival on raw_full with the packed tiles' bytes; the scale
  // loaders' wait for them.
  __device__ void raw_expect_bytes(const PipelineState<Stages>& s, std::uint32_t bytes) const {
    ptx::mbarrier_arrive_expect_tx(&raw_full[s.index], bytes);
  }
  __device__ std::uint64_t* raw_barrier(const PipelineState<Stages>& s) const { return &raw_full[s.index]; }
  __device__ void raw_wait(const PipelineState<Stages>& s) const { ptx::mbarrier_wait(&raw_full[s.index], s.phase); }

  // Consumers: wait until the stage is filled; release it when done reading.
  __device__ void consumer_wait(const PipelineState<Stages>& s) const { ptx::mbarrier_wait(&full[s.index], s.phase); }
  __device__ void consumer_release(const PipelineState<Stages>& s) const { ptx::mbarrier_arrive(&empty[s.index]); }
};

}  // namespace bsgemm::cuda
