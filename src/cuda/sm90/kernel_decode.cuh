// The persistent, warp-specialized grouped GEMM kernel for the recipes with FP4 operands: operands
// decoded on chip to bf16 with their block scales, then BF16 wgmma (kernel_traits_decode.cuh).
//
// Roles as in the FP8 kernel (kernel_fp8.cuh), on the same tile walk, pipeline and epilogue:
//   warp 0 (one lane)  TMA: the stored bytes of A and B (4-bit or 8-bit) into the raw stage ring
//   warps 1-3          scale loaders: the stage's block scales as fp32 (scale_loader.cuh)
//   warpgroups 1-2     decode + wgmma (mainloop_decode.cuh), then the epilogue (epilogue.cuh)
// Weights are read from HBM as 4-bit data: decoding happens only in shared memory.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "src/cuda/ptx/mbarrier.cuh"
#include "src/cuda/ptx/sync.cuh"
#include "src/cuda/ptx/tma.cuh"
#include "src/cuda/sm90/epilogue.cuh"
#include "src/cuda/sm90/kernel_common.cuh"
#include "src/cuda/sm90/kernel_traits_decode.cuh"
#include "src/cuda/sm90/launch.hpp"
#include "src/cuda/sm90/mainloop_decode.cuh"
#include "src/cuda/sm90/pipeline.cuh"
#include "src/cuda/sm90/scale_loader.cuh"
#include "src/cuda/sm90/tile_walker.cuh"

namespace bsgemm::cuda {

template <class Traits>
inline constexpr int kWeightBoxRows = Traits::kBlockN / Traits::kBLoads;

// The TMA boxes of B in stage kb of tile t: box(i, map, c0, c1) (batch t.b_batch) for the weights' boxes
// i < Traits::kBLoads of kWeightBoxRows rows each, then, where TMA brings them, box kBLoads for B's scale codes: the
// window that holds the stage's kStepsB codes, by the tile's rows (kernel_traits_swapped.cuh's kScaleCodeWindows).
template <class Traits, class Box>
__device__ __forceinline__ void for_each_weight_box(const KernelParams& p, const TileSource& t, int kb, Box&& box) {
#pragma unroll
  for (int i = 0; i < Traits::kBLoads; ++i)
    box(i, t.b_map, kb * Traits::kRowBytesB, t.b_row + i * kWeightBoxRows<Traits>);
  if constexpr (Traits::kScaleCodeWindows) {
    if (p.sfb_by_tma) {
      box(Traits::kBLoads, &p.sfb_map, kb * Traits::kStepsB - scale_code_window_col(kb, Traits::kStepsB), t.b_row);
    }
  }
}

template <class Traits>
__device__ __forceinline__ void produce_raw_tiles(const KernelParams& p, typename Traits::SharedStorage& ss,
                                                  const StagePipeline<Traits::kStages>& pipe) {
  for_each_producer_stage<Traits>(p, [&](const TileSource& t, int kb, const PipelineState<Traits::kStages>& state) {
    pipe.producer_acquire(state);
    std::uint32_t bytes = Traits::kStageBytes;
    if constexpr (Traits::kScaleCodeWindows) {
      if (p.sfb_by_tma) bytes += Traits::kScaleCodeBoxBytes;
    }
    pipe.producer_expect_bytes(state, bytes);
    // The maps count K in stored bytes; staged tokens come as two 128-byte-wide swizzled boxes.
    if constexpr (Traits::kTokensStaged) {
#pragma unroll
      for (int half = 0; half < 2; ++half)
        ptx::tma_load_3d(ss.raw[state.index].a + half * Traits::kTokenHalfBytes, t.a_map,
                         kb * Traits::kRowBytesA + half * 128, t.a_row, t.a_batch, pipe.full_barrier(state));
    } else {
      ptx::tma_load_3d(ss.raw[state.index].a, t.a_map, kb * Traits::kRowBytesA, t.a_row, t.a_batch, pipe.full_barrier(state));
    }
    for_each_weight_box<Traits>(p, t, kb, [&](int box, const CUtensorMap* map, std::int32_t c0, std::int32_t c1) {
      std::uint8_t* dst = box < Traits::kBLoads ? ss.raw[state.index].b + box * kWeightBoxRows<Traits> * Traits::kRowBytesB
                                                : reinterpret_cast<std::uint8_t*>(&ss.sfb[state.index][0][0]);
      ptx::tma_load_3d(dst, map, c0, c1, t.b_batch, pipe.full_barrier(state));
    });
  });
}

// Before griddepcontrol.wait, where the staging pass runs just before this kernel and the host wrote the records
// (KernelParams::records_on_host): the weights and their TMA-borne scale codes of the CTA's first stages into L2,
// while the pass ends (the tokens are its output and wait). One thread; the first tile only.
// Where Traits::kPrefetchFirstWeights (kernel_traits_swapped.cuh).
template <class Traits>
__device__ __forceinline__ void prefetch_first_weights(const KernelParams& p) {
  TileWalker<Traits::kHeavyFirstWalk> walker(p);
  core::TileCoord c;
  const DeviceGroup* g;
  if (!walker.next(p, &c, &g)) return;
  std::int32_t acquired_group = -1;
  const TileSource t = tile_source<Traits::kBlockM, Traits::kBlockN>(p, *g, c, walker.group, &acquired_group);
  const int stages = t.k_blocks < Traits::kStages ? t.k_blocks : Traits::kStages;
  for (int kb = 0; kb < stages; ++kb)
    for_each_weight_box<Traits>(p, t, kb, [&](int, const CUtensorMap* map, std::int32_t c0, std::int32_t c1) {
      ptx::tma_prefetch_3d(map, c0, c1, t.b_batch);
    });
}

// Whether B's scale codes come by TMA with the stages (kernel_traits_swapped.cuh) instead of from the loaders.
template <class Traits>
__device__ __forceinline__ bool scale_codes_by_tma(const KernelParams& p) {
  if constexpr (Traits::kScaleCodeWindows) return p.sfb_by_tma;
  return false;
}

// Whether the scale loaders take part in the raw stages at all: not where TMA brings B's codes and A has no
// scales to load (the full barriers then wait for the TMA thread alone).
template <class Traits>
__device__ __forceinline__ bool scale_loaders_run(const KernelParams& p) {
  return Traits::kLoadsAScales || !scale_codes_by_tma<Traits>(p);
}

// The decoding kernels' scale loaders (the TMA producer brings the raw tiles): A's and B's scales of
// each stage, as fp32 by row and step (sfa[stage][step][row], sfb[stage][step][col]), fetched a chunk of
// consecutive stages at a time (for_each_loader_chunk): Traits::kScaleChunk stages, 16 bytes of codes per
// row of B (four mx32 stages or two nv16 ones) where two of them fit the loaders' registers, else 8.
// Staged tokens carry their scales already (B's only: fp8-block128 ones too, folded into their f16,
// kernel_traits_swapped.cuh); B's come by TMA instead where
// scale_codes_by_tma says so, and go into the stage's window of codes as they are stored where the traits
// say so (kScaleCodeWindows).
template <class Traits>
__device__ __forceinline__ void load_decode_scales(const KernelParams& p, typename Traits::SharedStorage& ss,
                                                   const StagePipeline<Traits::kStages>& pipe, int loader) {
  if (!scale_loaders_run<Traits>(p)) return;
  const bool b_by_loaders = !scale_codes_by_tma<Traits>(p);
  const int lane = threadIdx.x % 32;
  constexpr int kChunk = Traits::kScaleChunk;
  // Staged tokens load no A scales (a and a_values go unused there).
  using RowsA = ScaleRows<Traits::kScaleRowsA, Traits::kAScales>;
  using RowsB = ScaleRows<Traits::kBlockN, Traits::kBScales>;
  RowsA a;
  RowsB b;
  typename RowsA::Values a_values[kChunk];
  typename RowsB::Values b_values[kChunk];
  const auto on_tile = [&](const DeviceGroup& g, const core::TileCoord& c) {
    const std::int64_t m0 = static_cast<std::int64_t>(c.m_block) * Traits::kBlockM;
    const std::int64_t n0 = static_cast<std::int64_t>(c.n_block) * Traits::kBlockN;
    if constexpr (Traits::kLoadsAScales)
      a.start_tile(p.sfa_type, p.sfa_layout, batch_base(g.sfa, p.sfa_type, g.sfa_batch_stride, c.l), g.sfa_ld,
                   core::ceil_div(g.k, kBlockK / Traits::kStepsA), m0, g.m, lane);
    if (b_by_loaders)
      b.start_tile(p.sfb_type, p.sfb_layout, batch_base(g.sfb, p.sfb_type, g.sfb_batch_stride, c.l), g.sfb_ld,
                   core::ceil_div(g.k, kBlockK / Traits::kStepsB), n0, g.n, lane);
  };
  for_each_loader_chunk<Traits::kStages, kChunk, Traits::kHeavyFirstWalk, Traits::kStreamK>(
      p, loader, on_tile,
      [&](const DeviceGroup&, const core::TileCoord&, int kb0, int stages, PipelineState<Traits::kStages> state) {
        // Global loads first: their latency hides under the wait for the first stage.
        if constexpr (Traits::kLoadsAScales) a.load_chunk(static_cast<std::int64_t>(Traits::kStepsA) * kb0, stages, a_values);
        if (b_by_loaders) b.load_chunk(static_cast<std::int64_t>(Traits::kStepsB) * kb0, stages, b_values);
#pragma unroll
        for (int s = 0; s < kChunk; ++s) {
          if (s >= stages) break;
          pipe.producer_acquire(state);
          if constexpr (Traits::kLoadsAScales) a.store(a_values[s], &ss.sfa[state.index][0][0], lane);
          if (b_by_loaders) {
            if constexpr (Traits::kScaleCodeWindows)
              b.store_codes(b_values[s], reinterpret_cast<std::uint8_t*>(&ss.sfb[state.index][0][0]), lane,
                            scale_code_window_col(kb0 + s, Traits::kStepsB));
            else
              b.store(b_values[s], &ss.sfb[state.index][0][0], lane);
          }
          pipe.producer_commit(state);
          state.advance();
        }
      });
}

template <class Traits>
__device__ __forceinline__ void decode_and_multiply(const KernelParams& p, typename Traits::SharedStorage& ss,
                                                    const StagePipeline<Traits::kStages>& pipe, int consumer) {
  const DecodeMainloop<Traits> mainloop(consumer, p, ss.selector_table[threadIdx.x % 32]);
  PipelineState<Traits::kStages> raw;
  PipelineState<kDecodedStages> decoded;
  TileWalker<Traits::kHeavyFirstWalk, Traits::kKeepWalkGroup, Traits::kConsumerSearch> walker(p);
  core::TileCoord c;
  const DeviceGroup* g;
  float acc[Traits::kAccumulators];
  float out[Traits::kAccumulators];
  OutputMapAcquire acquire_output_map;
  while (walker.next(p, &c, &g)) {
    const std::int64_t k = read_only(g->k);
    mainloop.accumulate_tile(ss, pipe, raw, decoded, k, acc, out);
    const std::int64_t row0 = static_cast<std::int64_t>(c.m_block) * Traits::kBlockM + mainloop.wg_m * 64;
    const std::int64_t col0 = static_cast<std::int64_t>(c.n_block) * Traits::kBlockN + mainloop.wg_n * Traits::kWarpgroupN;
    const TileOutput output = tile_output<true>(p, g, c.l);
    acquire_output_map(output);
    store_warpgroup_tile<Traits>(p, output, row0, col0, out, &ss.epilogue[consumer][0][0],
                                 static_cast<std::uint32_t>(NamedBarrier::epilogue_consumer0) + consumer);
  }
  finish_warpgroup_stores<Traits>(p);
}

// What both decoding kernels (this one and kernel_swapped.cuh) run: the raw-stage pipeline and the decoded
// tiles' barriers, then wait_for_valid_records, then the roles, with consume(pipe, consumer) on the consumers.
// The setup reads only the kernel's parameters, so it runs before the wait, under the kernel before.
template <class Traits, class Consume>
__device__ __forceinline__ void run_decoding_roles(const KernelParams& p, typename Traits::SharedStorage& ss,
                                                   Consume&& consume) {
  const StagePipeline<Traits::kStages> pipe{ss.full, ss.empty, nullptr};
  if (threadIdx.x == 0) {
    pipe.init(scale_loaders_run<Traits>(p) ? 1 + 32 /* TMA thread + one scale-loader warp */ : 1,
              Traits::kConsumers * 4 /* consumer warps */);
    if constexpr (!Traits::kTokensStaged) {
      for (int d = 0; d < kDecodedStages; ++d) {
        ptx::mbarrier_init(&ss.decoded_full[d], 2 * 4);
        ptx::mbarrier_init(&ss.decoded_empty[d], 2 * 4);
      }
    }
    ptx::fence_mbarrier_init();
    prefetch_kernel_maps(p);
  }
  if (threadIdx.x < 32) ss.selector_table[threadIdx.x] = core::kBf16SelectorsLow;  // read after the barrier
  __syncthreads();
  if constexpr (Traits::kPrefetchFirstWeights) {
    if (threadIdx.x == 0 && p.records_on_host) prefetch_first_weights<Traits>(p);
  }
  if (!wait_for_valid_records(p)) return;

  run_roles<Traits::kProducerRegisters, Traits::kConsumerRegs>([&] { produce_raw_tiles<Traits>(p, ss, pipe); },
                                        [&](int loader) { load_decode_scales<Traits>(p, ss, pipe, loader); },
                                        [&](int consumer) { consume(pipe, consumer); });
}

template <class Traits>
__global__ void __launch_bounds__(kKernelThreads, 1) grouped_decode_kernel(const __grid_constant__ KernelParams p) {
  auto& ss = gemm_shared_storage<typename Traits::SharedStorage>();
  run_decoding_roles<Traits>(p, ss, [&](const StagePipeline<Traits::kStages>& pipe, int consumer) {
    decode_and_multiply<Traits>(p, ss, pipe, consumer);
  });
}

// The instantiations of one operand combination, by tile (launch.hpp's kTiles).
template <bool APacked, ScaleGranularity AScales, bool BPacked, ScaleGranularity BScales>
struct DecodeCombination {
  template <int BlockM, int BlockN>
  using Traits = DecodeKernelTraits<APacked, AScales, BPacked, BScales, BlockM, BlockN>;

  static cudaError_t launch(const KernelChoice& choice, const KernelParams& params, int grid, cudaStream_t stream) {
    cudaError_t e = cudaErrorInvalidValue;
    visit_tile<Traits>(choice.block_m, choice.block_n, [&](auto traits) {
      using T = decltype(traits);
      if constexpr (T::kFits) e = launch_persistent<T>(grouped_decode_kernel<T>, params, grid, stream);
    });
    return e;
  }
  static int stages(int m, int n) {
    int stages = 0;
    visit_tile<Traits>(m, n, [&](auto traits) { stages = decltype(traits)::kFits ? decltype(traits)::kStages : 0; });
    return stages;
  }
  static bool matches(const KernelChoice& c) {
    return c.a_packed == APacked && c.a_scales == AScales && c.b_packed == BPacked && c.b_scales == BScales;
  }
};

// The first of Combinations that matches the choice: its launch (false when none matches).
template <class... Combinations>
bool launch_first_match(const KernelChoice& choice, const KernelParams& params, int grid, cudaStream_t stream,
                        cudaError_t* result) {
  bool found = false;
  const auto try_one = [&](auto combination) {
    using C = decltype(combination);
    if (found || !C::matches(choice)) return;
    found = true;
    *result = C::launch(choice, params, grid, stream);
  };
  (try_one(Combinations{}), ...);
  return found;
}

// ... and a count of its instantiation for the choice's tile, value(combination) (0 when none matches).
template <class... Combinations, class Value>
int value_of_first_match(const KernelChoice& choice, Value&& value) {
  int result = 0;
  const auto try_one = [&](auto combination) {
    if (result == 0 && decltype(combination)::matches(choice)) result = value(combination);
  };
  (try_one(Combinations{}), ...);
  return result;
}

// The pipeline depth of the first of Combinations that matches the choice (0 when none matches).
template <class... Combinations>
int stages_of_first_match(const KernelChoice& choice) {
  return value_of_first_match<Combinations...>(
      choice, [&](auto combination) { return decltype(combination)::stages(choice.block_m, choice.block_n); });
}

}  // namespace bsgemm::cuda
