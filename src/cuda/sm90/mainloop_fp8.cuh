// The consumers' mainloop step for the FP8 recipes: wgmma over one 128-deep stage, then promotion of
// the partial sums into fp32 registers with the block scales applied.
//
// Hopper's FP8 wgmma accumulates with reduced precision and knows nothing of block scales, so each
// scale block gets a fresh accumulator (scale-d = 0 on its first wgmma) that is then added into the
// fp32 result on the CUDA cores:
//   fp8-block128: 4 wgmma k32 per stage (fewer where K ends inside it but in the 128 x 192 tile, whose
//                 consumers spilled with the choice), then  result += acc * (sa[row] * sb)  (1 FFMA per element;
//                 sb is B's scale of the column's 128-column block, one value for all of a warpgroup's
//                 columns except in the 128 x 192 tile, whose columns may straddle two blocks; the scale
//                 loaders store the products)
//   mxfp8:        per k32:  1 wgmma, then      result += acc * (sa[row] * sb[col])  (FMUL + FFMA)
// The scales were gathered into shared memory as fp32 by the scale loaders. Each batch of wgmma is
// issued in turn with the other consumer warpgroup (issue_turns.cuh), so that one warpgroup's promotion
// runs while the other's batch keeps the tensor cores busy.
#pragma once

#include <cstdint>

#include "src/cuda/ptx/wgmma.cuh"
#include "src/cuda/sm90/issue_turns.cuh"
#include "src/cuda/sm90/kernel_traits.cuh"

namespace bsgemm::cuda {

template <class Traits>
struct Fp8Mainloop {
  using Storage = typename Traits::SharedStorage;
  using Mma = ptx::WgmmaFp8<Traits::kWarpgroupN, Traits::kA, Traits::kB>;
  static constexpr int kAcc = Traits::kAccumulators;

  // Where this thread's accumulator fragment sits inside the warpgroup's 64 x kWarpgroupN block:
  // register i holds row frag_row + 8 * ((i >> 1) & 1), column 8 * (i >> 2) + frag_col + (i & 1).
  int wg_m, wg_n, frag_row, frag_col;

  __device__ explicit Fp8Mainloop(int consumer) {
    const int t = threadIdx.x % kThreadsPerWarpgroup;
    wg_m = consumer / Traits::kWarpgroupsAlongN;
    wg_n = consumer % Traits::kWarpgroupsAlongN;
    frag_row = wg_m * 64 + (t / 32) * 16 + (t % 32) / 4;  // tile-local
    frag_col = wg_n * Traits::kWarpgroupN + 2 * (t % 4);  // tile-local
  }

  // fp8-block128: of this warpgroup's 8-column fragment chunks in tile column block n_block, how many lie
  // in the tile's first 128-column block of B (all of them but in the 128 x 192 tile, whose odd tiles
  // start 64 columns into a block).
  __device__ int first_block_chunks(int n_block) const {
    if constexpr (Traits::kWarpgroupN == 192)
      return (128 - (n_block * Traits::kBlockN) % 128) / 8;
    else
      return kAcc / 4;
  }

  // k_left: K from the stage's start; the 32-deep steps past K are skipped (the last stage of a K such as 32
  // holds one). first_block_chunks: from first_block_chunks() (fp8-block128).
  __device__ void accumulate_stage(const Storage& ss, int s, const IssueTurns& turns, std::int64_t k_left,
                                   int first_block_chunks, float (&acc)[kAcc], float (&result)[kAcc]) const {
    const std::uint64_t desc_a = ptx::make_smem_desc_sw128(ss.stages[s].a + wg_m * 64 * kBlockK);
    const std::uint64_t desc_b = ptx::make_smem_desc_sw128(ss.stages[s].b + wg_n * Traits::kWarpgroupN * kBlockK);
    if constexpr (Traits::kStaged) {
      // bf16 operands with their scales folded in (stage_bf16.cu): four k16 wgmma per stage (32 bytes of
      // each 128-byte row apiece, the same descriptor steps as FP8's k32) accumulate straight into the
      // result in fp32 over the whole K, so nothing is promoted.
      turns.wait_turn();
      ptx::fence_accumulators(result);
      ptx::wgmma_fence();
#pragma unroll
      for (int k = 0; k < kBlockK / 32; ++k)
        ptx::WgmmaBf16<Traits::kWarpgroupN>::mma(result, ptx::advance_desc(desc_a, 32 * k),
                                                 ptx::advance_desc(desc_b, 32 * k), 1u);
      ptx::wgmma_commit();
      turns.pass_turn();
      ptx::wgmma_wait<0>();
      ptx::fence_accumulators(result);
    } else if constexpr (Traits::kScales == ScaleGranularity::block128) {
      // The scales (A's times B's, scale_loader.cuh) are read before the wgmma and used after them:
      // shared-memory reads queue behind the tensor cores' operand traffic, and their latency hides
      // under the batch.
      const int block = (wg_n * Traits::kWarpgroupN) / 128;
      const float scale_top = ss.sfa[s][block][frag_row];
      const float scale_bottom = ss.sfa[s][block][frag_row + 8];
      // The next block's products, for the 128 x 192 tile's chunks past the boundary.
      float next_top = 0.0f, next_bottom = 0.0f;
      if constexpr (Traits::kWarpgroupN == 192) {
        next_top = ss.sfa[s][1][frag_row];
        next_bottom = ss.sfa[s][1][frag_row + 8];
      }
      // Both warpgroups skip the same steps (a uniform branch per step); the 192-wide tile issues all four.
      const int steps =
          k_left >= kBlockK || Traits::kWarpgroupN == 192 ? kBlockK / 32 : static_cast<int>((k_left + 31) / 32);
      turns.wait_turn();
      ptx::fence_accumulators(acc);
      ptx::wgmma_fence();
#pragma unroll
      for (int k = 0; k < kBlockK / 32; ++k)
        if (k < steps) Mma::mma(acc, ptx::advance_desc(desc_a, 32 * k), ptx::advance_desc(desc_b, 32 * k), k > 0 ? 1u : 0u);
      ptx::wgmma_commit();
      turns.pass_turn();
      ptx::wgmma_wait<0>();
      ptx::fence_accumulators(acc);
      // The boundary is a tile property (64 or 128 columns in), so each case gets its own unrolled loop.
      if constexpr (Traits::kWarpgroupN != 192)
        promote_block128<kAcc / 4>(acc, result, scale_top, scale_bottom, next_top, next_bottom);
      else if (first_block_chunks == 16)
        promote_block128<16>(acc, result, scale_top, scale_bottom, next_top, next_bottom);
      else
        promote_block128<8>(acc, result, scale_top, scale_bottom, next_top, next_bottom);
    } else {
      // Both warpgroups skip the same steps, so their turns stay paired (issue_turns.cuh).
      const int steps = k_left >= kBlockK ? Traits::kScaleSteps : static_cast<int>((k_left + 31) / 32);
      // Not unrolled: the four steps' descriptors and scale addresses would otherwise all be live at once.
#pragma unroll 1
      for (int k = 0; k < steps; ++k) {
        turns.wait_turn();
        ptx::fence_accumulators(acc);
        ptx::wgmma_fence();
        Mma::mma(acc, ptx::advance_desc(desc_a, 32 * k), ptx::advance_desc(desc_b, 32 * k), 0u);
        ptx::wgmma_commit();
        turns.pass_turn();
        ptx::wgmma_wait<0>();
        ptx::fence_accumulators(acc);
        const float sa_top = ss.sfa[s][k][frag_row];
        const float sa_bottom = ss.sfa[s][k][frag_row + 8];
        const float* sfb = &ss.sfb[s][k * Traits::kBlockN + frag_col];
#pragma unroll
        for (int j = 0; j < kAcc / 4; ++j) {
          const float2 sb = *reinterpret_cast<const float2*>(sfb + 8 * j);
          result[4 * j + 0] = fmaf(acc[4 * j + 0], sa_top * sb.x, result[4 * j + 0]);
          result[4 * j + 1] = fmaf(acc[4 * j + 1], sa_top * sb.y, result[4 * j + 1]);
          result[4 * j + 2] = fmaf(acc[4 * j + 2], sa_bottom * sb.x, result[4 * j + 2]);
          result[4 * j + 3] = fmaf(acc[4 * j + 3], sa_bottom * sb.y, result[4 * j + 3]);
        }
      }
    }
  }

  // result += acc * scale, the scale of chunk j (fragment columns 8 j .. 8 j + 7) being the first block's
  // product for j < FirstChunks and the next block's after.
  template <int FirstChunks>
  __device__ static void promote_block128(const float (&acc)[kAcc], float (&result)[kAcc], float first_top,
                                          float first_bottom, float next_top, float next_bottom) {
#pragma unroll
    for (int i = 0; i < kAcc; ++i) {
      const bool next = (i >> 2) >= FirstChunks;
      const float scale = (i & 2) ? (next ? next_bottom : first_bottom) : (next ? next_top : first_top);
      result[i] = fmaf(acc[i], scale, result[i]);
    }
  }
};

}  // namespace bsgemm::cuda
