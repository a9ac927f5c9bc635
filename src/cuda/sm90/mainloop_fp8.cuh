// The consumers' mainloop for the FP8 recipes: wgmma over the stages of one tile, with the partial sums
// promoted into fp32 registers with the block scales applied.
//
// Hopper's FP8 wgmma accumulates with reduced precision and knows nothing of block scales, so each
// scale block gets a fresh accumulator (scale-d = 0 on its first wgmma) that is then added into the
// fp32 result on the CUDA cores:
//   fp8-block128: one step per stage, 4 wgmma k32, then  result += acc * (sa[row] * sb)   (1 FFMA per
//                 element; sb is one value for all of a warpgroup's columns, which never straddle 128)
//   mxfp8:        four steps per stage, 1 wgmma k32 each, then  result += acc * (sa[row] * sb[col])
// The scales were gathered into shared memory as fp32 by the scale loaders.
//
// A promotion must wait for its wgmma, and a wgmma for the promotion that frees its accumulator. With
// one accumulator the tensor cores idle during every promotion, and with MX scales (a promotion per 32
// of K) that idle time bounds the kernel. So the warpgroup's columns are split into two halves with an
// accumulator each, and the steps roll: while half 0 of step q is promoted, half 1 of step q runs on the
// tensor cores; then half 0 of step q + 1 is issued before half 1 of step q is promoted. A wgmma batch
// is in flight during every promotion but the stage's last, at no register cost (two half
// accumulators are one whole).
#pragma once

#include <cstdint>

#include "src/cuda/ptx/wgmma.cuh"
#include "src/cuda/sm90/kernel_traits.cuh"
#include "src/cuda/sm90/pipeline.cuh"

namespace bsgemm::cuda {

template <class Traits>
struct Fp8Mainloop {
  using Storage = typename Traits::SharedStorage;
  static constexpr int kAcc = Traits::kAccumulators;
  static constexpr int kHalfN = Traits::kWarpgroupN / 2;
  static constexpr int kHalfAcc = kAcc / 2;
  using Mma = ptx::WgmmaFp8<kHalfN, Traits::kA, Traits::kB>;
  static constexpr bool kMx = Traits::kScales == ScaleGranularity::mx32;
  static constexpr int kStepsPerStage = Traits::kScaleSteps;               // promotions per stage
  static constexpr int kWgmmaPerStep = kBlockK / 32 / kStepsPerStage;      // k32 wgmma per promotion
  static_assert(kAcc % 8 == 0, "each half holds whole 8-column groups");

  // Where this thread's accumulator fragment sits inside the warpgroup's 64 x kWarpgroupN block:
  // register i of half h holds row frag_row + 8 * ((i >> 1) & 1), column h * kHalfN + 8 * (i >> 2) +
  // frag_col + (i & 1); result[h * kHalfAcc + i] is the same element, so result has the layout of one
  // whole-width accumulator (what the epilogue expects).
  int wg_m, wg_n, frag_row, frag_col;

  __device__ explicit Fp8Mainloop(int consumer) {
    const int t = threadIdx.x % kThreadsPerWarpgroup;
    wg_m = consumer / Traits::kWarpgroupsAlongN;
    wg_n = consumer % Traits::kWarpgroupsAlongN;
    frag_row = wg_m * 64 + (t / 32) * 16 + (t % 32) / 4;  // tile-local
    frag_col = wg_n * Traits::kWarpgroupN + 2 * (t % 4);  // tile-local
  }

  // Issues the wgmma of one half for step `step` of stage s as one commit group.
  template <int Half>
  __device__ void issue(const Storage& ss, int s, int step, float (&acc)[kHalfAcc]) const {
    const int k_bytes = step * kWgmmaPerStep * 32;
    const std::uint64_t desc_a = ptx::make_smem_desc_sw128(ss.stages[s].a + wg_m * 64 * kBlockK + k_bytes);
    const std::uint64_t desc_b =
        ptx::make_smem_desc_sw128(ss.stages[s].b + (wg_n * Traits::kWarpgroupN + Half * kHalfN) * kBlockK + k_bytes);
    ptx::fence_accumulators(acc);
    ptx::wgmma_fence();
#pragma unroll
    for (int w = 0; w < kWgmmaPerStep; ++w)
      Mma::mma(acc, ptx::advance_desc(desc_a, 32 * w), ptx::advance_desc(desc_b, 32 * w), w > 0 ? 1u : 0u);
    ptx::wgmma_commit();
  }

  // result (half `Half`) += acc * scales of step `step` of stage s.
  template <int Half>
  __device__ void promote(const Storage& ss, int s, int step, const float (&acc)[kHalfAcc], float (&result)[kAcc]) const {
    float* out = result + Half * kHalfAcc;
    if constexpr (!kMx) {
      const float sb = ss.sfb[s][(wg_n * Traits::kWarpgroupN) / 128];
      const float scale_top = ss.sfa[s][0][frag_row] * sb;
      const float scale_bottom = ss.sfa[s][0][frag_row + 8] * sb;
#pragma unroll
      for (int i = 0; i < kHalfAcc; ++i) out[i] = fmaf(acc[i], (i & 2) ? scale_bottom : scale_top, out[i]);
    } else {
      const float sa_top = ss.sfa[s][step][frag_row];
      const float sa_bottom = ss.sfa[s][step][frag_row + 8];
      const float* sfb = &ss.sfb[s][step * Traits::kBlockN + frag_col + Half * kHalfN];
#pragma unroll
      for (int j = 0; j < kHalfAcc / 4; ++j) {
        const float2 sb = *reinterpret_cast<const float2*>(sfb + 8 * j);
        out[4 * j + 0] = fmaf(acc[4 * j + 0], sa_top * sb.x, out[4 * j + 0]);
        out[4 * j + 1] = fmaf(acc[4 * j + 1], sa_top * sb.y, out[4 * j + 1]);
        out[4 * j + 2] = fmaf(acc[4 * j + 2], sa_bottom * sb.x, out[4 * j + 2]);
        out[4 * j + 3] = fmaf(acc[4 * j + 3], sa_bottom * sb.y, out[4 * j + 3]);
      }
    }
  }

  // Accumulates one tile of `k_blocks` stages into result (zeroed here), consuming the stages from
  // `state` on and releasing each once its wgmma and scale reads are done; state ends past the tile.
  template <int Stages>
  __device__ void accumulate_tile(const Storage& ss, const StagePipeline<Stages>& pipe, PipelineState<Stages>& state,
                                  int k_blocks, float (&result)[kAcc]) const {
    const bool release_lane = threadIdx.x % 32 == 0;
    float acc0[kHalfAcc], acc1[kHalfAcc];
#pragma unroll
    for (int i = 0; i < kAcc; ++i) result[i] = 0.0f;
#pragma unroll
    for (int i = 0; i < kHalfAcc; ++i) acc0[i] = acc1[i] = 0.0f;
    // ptxas follows which accumulator is in flight only within a loop iteration (a wgmma still running
    // across the back edge while the other half is read makes it serialize every wgmma), so an
    // iteration is one stage, its steps unrolled, and it ends with nothing in flight.
    for (int kb = 0; kb < k_blocks; ++kb) {
      pipe.consumer_wait(state);
      issue<0>(ss, state.index, 0, acc0);
      issue<1>(ss, state.index, 0, acc1);
#pragma unroll
      for (int step = 0; step < kStepsPerStage; ++step) {
        ptx::wgmma_wait<1>();  // half 0 of this step is done; half 1 is in flight
        ptx::fence_accumulators(acc0);
        promote<0>(ss, state.index, step, acc0, result);
        if (step + 1 < kStepsPerStage) {
          issue<0>(ss, state.index, step + 1, acc0);
          ptx::wgmma_wait<1>();
        } else {
          ptx::wgmma_wait<0>();
        }
        ptx::fence_accumulators(acc1);
        promote<1>(ss, state.index, step, acc1, result);
        if (step + 1 < kStepsPerStage) issue<1>(ss, state.index, step + 1, acc1);
      }
      // The stage's wgmma are done and its scales are in registers: release it.
      __syncwarp();
      if (release_lane) pipe.consumer_release(state);
      state.advance();
    }
  }
};

}  // namespace bsgemm::cuda
