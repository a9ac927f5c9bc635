// The persistent, warp-specialized grouped GEMM kernel for the FP8 recipes (fp8-block128, mxfp8).
//
// One CTA per SM walks the tiles of all groups (tile_walker.cuh). Per CTA:
//   warp 0 (one lane)  TMA: A and B tiles of each k-block into the stage ring (pipeline.cuh)
//   warps 1-3          scale loaders: the stage's block scales as fp32 (scale_loader.cuh), and with FP4
//                      operands the packed tiles widened to e4m3 (fp4_widen.cuh)
//   warpgroups 1-2     wgmma + promotion (mainloop_fp8.cuh), then the epilogue (epilogue.cuh)
// The producers run ahead into the next tile while the consumers finish the epilogue of this one.
// Pointer-array groups use per-group tensor maps written by the prepare kernel; the MoE forms use the
// two maps in the kernel parameters, whose batch coordinate selects the expert.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "src/cuda/ptx/mbarrier.cuh"
#include "src/cuda/ptx/sync.cuh"
#include "src/cuda/ptx/tma.cuh"
#include "src/cuda/sm90/epilogue.cuh"
#include "src/cuda/sm90/kernel_common.cuh"
#include "src/cuda/sm90/fp4_widen.cuh"
#include "src/cuda/sm90/kernel_traits.cuh"
#include "src/cuda/sm90/launch.hpp"
#include "src/cuda/sm90/mainloop_fp8.cuh"
#include "src/cuda/sm90/pipeline.cuh"
#include "src/cuda/sm90/scale_loader.cuh"
#include "src/cuda/sm90/tile_walker.cuh"

namespace bsgemm::cuda {

template <class Traits>
using Fp8Pipeline = StagePipeline<Traits::kStages>;

template <class Traits>
__device__ __forceinline__ void produce_tiles(const KernelParams& p, typename Traits::SharedStorage& ss,
                                              const Fp8Pipeline<Traits>& pipe) {
  for_each_producer_stage<Traits, Traits::kElementBytes>(p, [&](const TileSource& t, int kb,
                                                                const PipelineState<Traits::kStages>& state) {
    pipe.producer_acquire(state);
    if constexpr (Traits::kAnyPacked) {
      // Packed maps count K in bytes: a k-block is 64 of them.
      pipe.raw_expect_bytes(state, Traits::kRawBytes);
      if constexpr (Traits::kAPacked)
        ptx::tma_load_3d(ss.raw[state.index].a(), t.a_map, kb * kBlockK / 2, t.a_row, t.a_batch, pipe.raw_barrier(state));
      if constexpr (Traits::kBPacked)
        ptx::tma_load_3d(ss.raw[state.index].b(), t.b_map, kb * kBlockK / 2, t.b_row, t.b_batch, pipe.raw_barrier(state));
    }
    pipe.producer_expect_bytes(state, Traits::kStageBytes);
    if constexpr (!Traits::kAPacked)
      ptx::tma_load_3d(ss.stages[state.index].a, t.a_map, kb * kBlockK, t.a_row, t.a_batch, pipe.full_barrier(state));
    if constexpr (!Traits::kBPacked)
      ptx::tma_load_3d(ss.stages[state.index].b, t.b_map, kb * kBlockK, t.b_row, t.b_batch, pipe.full_barrier(state));
  });
}

template <class Traits>
__device__ __forceinline__ void load_scales(const KernelParams& p, typename Traits::SharedStorage& ss,
                                            const Fp8Pipeline<Traits>& pipe, int loader) {
  const int lane = threadIdx.x % 32;
  StageScaleGather<Traits> scales;
  const auto on_tile = [&](const DeviceGroup& g, const core::TileCoord& c) { scales.start_tile(p, g, c, lane); };
  for_each_loader_stage<Traits::kStages, Traits::kHeavyFirstWalk>(p, loader, on_tile, [&](const DeviceGroup& g, const core::TileCoord&, int kb,
                                                                 const PipelineState<Traits::kStages>& state) {
    scales.load(p, kb, lane);
    pipe.producer_acquire(state);
    scales.store(p, &ss.sfa[state.index][0][0], &ss.sfb[state.index][0], kb, lane);
    if constexpr (Traits::kAnyPacked) {
      const int k_valid = static_cast<int>(g.k - static_cast<std::int64_t>(kb) * kBlockK);
      pipe.raw_wait(state);
      if constexpr (Traits::kAPacked)
        widen_e2m1_tile<Traits::kBlockM>(ss.raw[state.index].a(), ss.stages[state.index].a, k_valid, lane);
      if constexpr (Traits::kBPacked)
        widen_e2m1_tile<Traits::kBlockN>(ss.raw[state.index].b(), ss.stages[state.index].b, k_valid, lane);
      // The consumers' wgmma reads the widened tiles through the async proxy.
      ptx::fence_proxy_async_shared();
    }
    pipe.producer_commit(state);
  });
}

template <class Traits>
__device__ __forceinline__ void consume_tiles(const KernelParams& p, typename Traits::SharedStorage& ss,
                                              const Fp8Pipeline<Traits>& pipe, int consumer) {
  const Fp8Mainloop<Traits> mainloop(consumer);
  const IssueTurns turns{consumer};
  const int lane = threadIdx.x % 32;
  PipelineState<Traits::kStages> state;
  TileWalker<Traits::kHeavyFirstWalk, Traits::kKeepWalkGroup, Traits::kConsumerSearch> walker(p);
  core::TileCoord c;
  const DeviceGroup* g;
  float acc[Traits::kAccumulators];
  float result[Traits::kAccumulators];
  OutputMapAcquire acquire_output_map;
#pragma unroll
  for (int i = 0; i < Traits::kAccumulators; ++i) acc[i] = 0.0f;
  turns.start();
  while (walker.next(p, &c, &g)) {
#pragma unroll
    for (int i = 0; i < Traits::kAccumulators; ++i) result[i] = 0.0f;
    const std::int64_t k = read_only(g->k);
    const int k_blocks = static_cast<int>(core::ceil_div(k * Traits::kElementBytes, kBlockK));
    const int first_block_chunks = mainloop.first_block_chunks(c.n_block);
    for (int kb = 0; kb < k_blocks; ++kb) {
      pipe.consumer_wait(state);
      mainloop.accumulate_stage(ss, state.index, turns, k - static_cast<std::int64_t>(kb) * kBlockK, first_block_chunks,
                                acc, result);
      // The wgmma reads have completed and the scales were read into registers: release the stage. fp8-block128
      // reads its scales before the batch and uses them after it, and ptxas places the promotion after the arrive
      // with those loads unwaited for (bench/NOTES.md session 44), so a fence orders them before the release.
      if constexpr (Traits::kScales == ScaleGranularity::block128 && !Traits::kStaged) ptx::fence_acq_rel_cta();
      __syncwarp();
      if (lane == 0) pipe.consumer_release(state);
      state.advance();
    }
    const std::int64_t row0 = static_cast<std::int64_t>(c.m_block) * Traits::kBlockM + mainloop.wg_m * 64;
    const std::int64_t col0 = static_cast<std::int64_t>(c.n_block) * Traits::kBlockN + mainloop.wg_n * Traits::kWarpgroupN;
    const TileOutput out = tile_output<!Traits::kStaged>(p, g, c.l);
    if constexpr (!Traits::kStaged) acquire_output_map(out);
    store_warpgroup_tile<Traits>(p, out, row0, col0, result, reinterpret_cast<float*>(ss.epilogue[consumer]),
                                 static_cast<std::uint32_t>(NamedBarrier::epilogue_consumer0) + consumer);
  }
  finish_warpgroup_stores<Traits>(p);
  turns.finish();
}

template <class Traits>
__global__ void __launch_bounds__(kKernelThreads, 1) grouped_fp8_kernel(const __grid_constant__ KernelParams p) {
  auto& ss = gemm_shared_storage<typename Traits::SharedStorage>();
  const Fp8Pipeline<Traits> pipe{ss.full, ss.empty, Traits::kAnyPacked ? ss.raw_full : nullptr};
  if (threadIdx.x == 0) {
    pipe.init(1 + Traits::kScaleLoaderArrivals /* TMA thread + the scale-loader warp, if any */, 2 * 4 /* consumer warps */);
    prefetch_kernel_maps(p);
  }
  __syncthreads();
  if (!wait_for_valid_records(p)) return;

  run_roles<Traits::kProducerRegisters, Traits::kConsumerRegs>(
      [&] { produce_tiles<Traits>(p, ss, pipe); },
      [&](int loader) {
        if constexpr (!Traits::kStaged) load_scales<Traits>(p, ss, pipe, loader);
      },
      [&](int consumer) { consume_tiles<Traits>(p, ss, pipe, consumer); });
}

// visit_tile, plus fp8-block128's 128 x 192 tile and the staged path's 128 x 256 where TraitsOf is theirs
// (launch.hpp).
template <template <int, int> class TraitsOf, class F>
bool visit_fp8_tile(int block_m, int block_n, F&& f) {
  using Narrow = TraitsOf<128, 128>;
  if constexpr (Narrow::kScales == ScaleGranularity::block128 && !Narrow::kAnyPacked)
    if (block128_wide_tile(block_m, block_n)) return f(TraitsOf<128, 192>{}), true;
  if constexpr (Narrow::kStaged)
    if (staged_wide_tile(block_m, block_n)) return f(TraitsOf<128, 256>{}), true;
  return visit_tile<TraitsOf>(block_m, block_n, f);
}

// The instantiation of TraitsOf<BlockM, BlockN> for the choice's tile (one of launch.hpp's kTiles, or the
// wide fp8-block128 tile): its launch, and its pipeline depth (for describe_plan).
template <template <int, int> class TraitsOf>
cudaError_t launch_for_tile(const KernelChoice& choice, const KernelParams& params, int grid, cudaStream_t stream) {
  cudaError_t e = cudaErrorInvalidValue;
  visit_fp8_tile<TraitsOf>(choice.block_m, choice.block_n, [&](auto traits) {
    using Traits = decltype(traits);
    e = launch_persistent<Traits>(grouped_fp8_kernel<Traits>, params, grid, stream);
  });
  return e;
}

template <template <int, int> class TraitsOf>
int stages_for_tile(int block_m, int block_n) {
  int stages = 0;
  visit_fp8_tile<TraitsOf>(block_m, block_n, [&](auto traits) { stages = decltype(traits)::kStages; });
  return stages;
}

}  // namespace bsgemm::cuda
