// The register-operand kernel for decode-sized groups with FP4 weights (kernel_traits_swapped.cuh):
// D^T = W X^T with the weights decoded into wgmma's A fragments in registers.
//
// Roles as in the decoding kernel (kernel_decode.cuh), whose TMA producer and scale loaders it shares
// (A = the tokens, B = the weights); the consumers run mainloop_swapped.cuh and write each slab of the
// tile transposed (epilogue.cuh: by TMA stores where the slab allows, through shared memory elsewhere).
// Tokens staged as bf16 by the pass before (AScales == staged) need no decoded tiles: the consumers read
// them from the raw stages.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "src/cuda/ptx/global.cuh"
#include "src/cuda/sm90/epilogue.cuh"
#include "src/cuda/sm90/kernel_common.cuh"
#include "src/cuda/sm90/kernel_decode.cuh"
#include "src/cuda/sm90/kernel_traits_swapped.cuh"
#include "src/cuda/sm90/mainloop_swapped.cuh"
#include "src/cuda/sm90/stream_k.cuh"

namespace bsgemm::cuda {

// f16 tokens (Traits::kF16): the powers of two of the tile's tokens in KernelParams::token_factors (the staging pass
// wrote them; the tile's are contiguous).
template <class Traits>
__device__ __forceinline__ const float* tile_token_factors(const KernelParams& p, const core::TileCoord& c, const DeviceGroup* g) {
  return p.token_factors + static_cast<std::int64_t>(read_only(g->a_batch0) + c.l) * p.token_factor_rows + read_only(g->a_row0) +
         static_cast<std::int64_t>(c.m_block) * Traits::kBlockM;
}

// ... brought into L1 before the tile's mainloop by each warp's first lane (at most 256 bytes: two lines), so that
// the epilogue's loads of them (apply_token_factors) do not wait on L2.
template <class Traits>
__device__ __forceinline__ void prefetch_token_factors(const KernelParams& p, const core::TileCoord& c, const DeviceGroup* g) {
  if (threadIdx.x % 32 != 0) return;
  const float* factors = tile_token_factors<Traits>(p, c, g);
#pragma unroll
  for (int line = 0; line < (Traits::kBlockM * 4 + 127) / 128; ++line) ptx::prefetch_global_l1(factors + 32 * line);
}

// Each token's power of two back into its accumulators (column 8 j + 2 q + e of register 4 j + e and 4 j + 2 + e);
// tokens past the group's end take 0 (not stored).
template <class Traits>
__device__ __forceinline__ void apply_token_factors(const KernelParams& p, const SwappedMainloop<Traits>& mainloop,
                                                    const core::TileCoord& c, const DeviceGroup* g, std::int64_t token0,
                                                    float (&acc)[Traits::kSlabs][Traits::kAccumulators]) {
  // The thread's tokens are token0 + 2 q + 8 j + e: one base, offsets 8 j + e, and their count below the end.
  const float* factors = tile_token_factors<Traits>(p, c, g) + mainloop.accumulator_token(0);
  const std::int64_t left = read_only(g->m) - (token0 + mainloop.accumulator_token(0));
#pragma unroll
  for (int i = 0; i < Traits::kAccumulators; ++i) {
    if (i % 4 >= 2) continue;  // registers 4 j + 2 + e share columns with 4 j + e
    const int offset = mainloop.accumulator_token(i) - mainloop.accumulator_token(0);  // 8 j + e
    const float factor = offset < left ? __ldg(factors + offset) : 0.0f;
#pragma unroll
    for (int slab = 0; slab < Traits::kSlabs; ++slab) {
      acc[slab][i] *= factor;
      acc[slab][i + 2] *= factor;
    }
  }
}

// One tile's output: the accumulators' rows are weights (D's columns), their columns tokens (D's rows).
template <class Traits>
__device__ __forceinline__ void store_swapped_tile(const KernelParams& p, typename Traits::SharedStorage& ss,
                                                   const SwappedMainloop<Traits>& mainloop, const core::TileCoord& c,
                                                   const DeviceGroup* g, int consumer,
                                                   float (&acc)[Traits::kSlabs][Traits::kAccumulators]) {
  const std::int64_t token0 = static_cast<std::int64_t>(c.m_block) * Traits::kBlockM;
  if constexpr (Traits::kF16) apply_token_factors<Traits>(p, mainloop, c, g, token0, acc);
  TileOutput output = tile_output(p, g, c.l);
  output.alpha *= SwappedMainloop<Traits>::kAccumulatorScale;  // the weights' 2^-kWeightExponent back
#pragma unroll
  for (int slab = 0; slab < Traits::kSlabs; ++slab) {
    const std::int64_t weight0 = static_cast<std::int64_t>(c.n_block) * Traits::kBlockN + mainloop.slab_row0(slab);
    store_transposed_slab<Traits>(p, output, weight0, token0, acc[slab], &ss.epilogue[consumer][0][0],
                                  epilogue_barrier(consumer));
  }
}

template <class Traits>
__device__ __forceinline__ void multiply_swapped(const KernelParams& p, typename Traits::SharedStorage& ss,
                                                 const StagePipeline<Traits::kStages>& pipe, int consumer) {
  const SwappedMainloop<Traits> mainloop(consumer, p, ss.selector_table[threadIdx.x % 32]);
  PipelineState<Traits::kStages> raw;
  PipelineState<kDecodedStages> decoded;
  core::TileCoord c;
  const DeviceGroup* g;
  float acc[Traits::kSlabs][Traits::kAccumulators];
  // k-blocks [kb_begin, kb_begin + k_blocks) of the current tile into acc.
  const auto accumulate = [&](int kb_begin, int k_blocks, std::int64_t k) {
    bool left_out = false;  // weights the f16 fragments could not hold (mainloop_swapped.cuh's add_tile_in_fp32)
    if constexpr (Traits::kScaleCodeWindows) {
      left_out = mainloop.template accumulate_staged_tile<true>(ss, pipe, raw, kb_begin, k_blocks, acc);
    } else if constexpr (Traits::kTokensStaged) {
      mainloop.template accumulate_staged_tile<false>(ss, pipe, raw, kb_begin, k_blocks, acc);
    } else {
      mainloop.accumulate_tile(ss, pipe, raw, decoded, k_blocks, k, acc);
    }
    if constexpr (Traits::kF16 && Traits::kBScales == ScaleGranularity::mx32) {
      if (left_out) mainloop.add_tile_in_fp32(p, g, c, kb_begin, k_blocks, acc);
    }
  };
  if constexpr (Traits::kStreamK) {
    // The units of StreamKTileWalker's walk: a unit that does not start at its tile's first k-block is a
    // partial for the tile's owner; the owner of a tile it does not finish adds the partials (of CTAs
    // [blockIdx.x + 1, contributors_end), decided before the mainloop) before storing the tile.
    StreamKTileWalker walker;
    core::WorkUnit u;
    for (;;) {
      const core::StreamKSplit split = StreamKTileWalker::split_of(p);
      if (!walker.next(p, split, &u, &c, &g)) break;
      const bool partial = u.kb_begin > 0;
      if constexpr (Traits::kF16) {
        if (!partial) prefetch_token_factors<Traits>(p, c, g);
      }
      const std::int32_t contributors_end =
          !partial && u.kb_end < split.k_blocks
              ? static_cast<std::int32_t>(core::stream_k_contributors_end(split, blockIdx.x, u.tile))
              : static_cast<std::int32_t>(blockIdx.x) + 1;
      accumulate(u.kb_begin, u.kb_end - u.kb_begin, 0);
      if (partial) {
        StreamKPartials<Traits>::publish(p, consumer, acc);
        continue;
      }
      StreamKPartials<Traits>::add(p, contributors_end, consumer, acc);
      store_swapped_tile<Traits>(p, ss, mainloop, c, g, consumer, acc);
    }
  } else {
    TileWalker<Traits::kHeavyFirstWalk, false, Traits::kConsumerSearch> walker(p);
    while (walker.next(p, &c, &g)) {
      if constexpr (Traits::kF16) prefetch_token_factors<Traits>(p, c, g);
      const std::int64_t k = read_only(g->k);
      accumulate(0, static_cast<int>(core::ceil_div(k, kBlockK)), k);
      store_swapped_tile<Traits>(p, ss, mainloop, c, g, consumer, acc);
    }
  }
  finish_warpgroup_stores<Traits>(p);
}

// The table of lifted pairs (Traits::kLiftedScaleTable), written before run_decoding_roles's barrier.
template <class Traits>
__device__ __forceinline__ void fill_lifted_scales(typename Traits::SharedStorage& ss) {
  if constexpr (Traits::kLiftedScaleTable) {
    for (int code = static_cast<int>(threadIdx.x); code < Traits::kLiftedScaleEntries; code += Traits::kThreads) {
      const auto c = static_cast<std::uint32_t>(code);
      if constexpr (Traits::kBScales == ScaleGranularity::mx32) ss.lifted_scales[code] = core::ue8m0_lifted_f16x2_entry(c);
      else ss.lifted_scales[code] = Traits::kF16 ? core::ue4m3_lifted_f16x2_entry(c) : core::ue4m3_lifted_bf16x2_entry(c);
    }
  }
}

template <class Traits>
__global__ void __launch_bounds__(Traits::kThreads, 1) grouped_swapped_kernel(const __grid_constant__ KernelParams p) {
  auto& ss = gemm_shared_storage<typename Traits::SharedStorage>();
  fill_lifted_scales<Traits>(ss);
  run_decoding_roles<Traits>(p, ss, [&](const StagePipeline<Traits::kStages>& pipe, int consumer) {
    multiply_swapped<Traits>(p, ss, pipe, consumer);
  });
}

// The instantiations of one operand combination, by tile (tokens x weights: 32 x 256, 64 x 256, 32 x 384).
template <bool APacked, ScaleGranularity AScales, ScaleGranularity BScales>
struct SwappedCombination {
  template <int Tokens, int Slabs, int Consumers, bool StreamK = false>
  using Traits = SwappedKernelTraits<APacked, AScales, BScales, Tokens, Slabs, Consumers, StreamK>;
  // Staged tokens leave the consumers the weights' decode alone: four warpgroups of one slab (three of two
  // for the 384-weight tile), twice the warps per scheduler to hide its latency.
  static constexpr bool kStaged = AScales == ScaleGranularity::staged || AScales == ScaleGranularity::block128;

  // f(traits) with the instantiation of tile block_m x block_n (a value of its traits type), the stream-K one
  // where stream_k (KernelChoice::stream_k: staged-token tiles 256 weights wide); false when there is none.
  template <class F>
  static bool with_tile(int block_m, int block_n, bool stream_k, F&& f) {
    if constexpr (kStaged) {
      const auto wide = [&](auto whole, auto split) { return stream_k ? f(split) : f(whole), true; };
      if (block_m == 16 && block_n == 256) return wide(Traits<16, 1, 4>{}, Traits<16, 1, 4, true>{});
      if (block_m == 32 && block_n == 256) return wide(Traits<32, 1, 4>{}, Traits<32, 1, 4, true>{});
      if (block_m == 64 && block_n == 256) return wide(Traits<64, 1, 4>{}, Traits<64, 1, 4, true>{});
      // Not for fp8-block128 tokens (f16 operands), whose weights decode from their scale codes only, which the
      // 384-weight tile's consumers do not hold (kernel_traits_swapped.cuh's kScaleCodeWindows).
      if constexpr (AScales != ScaleGranularity::block128) {
        if (block_m == 32 && block_n == 384) return f(Traits<32, 2, 3>{}), true;
      }
    } else {
      if (block_m == 32 && block_n == 256) return f(Traits<32, 2, 2>{}), true;
      if (block_m == 64 && block_n == 256) return f(Traits<64, 2, 2>{}), true;
      if (block_m == 32 && block_n == 384) return f(Traits<32, 3, 2>{}), true;
    }
    return false;
  }
  static cudaError_t launch(const KernelChoice& choice, const KernelParams& params, int grid, cudaStream_t stream) {
    cudaError_t e = cudaErrorInvalidValue;
    with_tile(choice.block_m, choice.block_n, choice.stream_k, [&](auto traits) {
      using T = decltype(traits);
      e = launch_persistent<T>(grouped_swapped_kernel<T>, params, grid, stream);
    });
    return e;
  }
  static int consumers(int block_m, int block_n) {
    int consumers = 0;
    with_tile(block_m, block_n, false, [&](auto traits) { consumers = decltype(traits)::kConsumers; });
    return consumers;
  }
  static int stages(int block_m, int block_n) {
    int stages = 0;
    with_tile(block_m, block_n, false, [&](auto traits) { stages = decltype(traits)::kStages; });
    return stages;
  }
  static bool matches(const KernelChoice& c) {
    return c.swapped && c.a_packed == APacked && c.a_scales == AScales && c.b_packed && c.b_scales == BScales;
  }
};

}  // namespace bsgemm::cuda
