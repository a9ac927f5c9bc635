// The scale loaders: warps 1-3 of the producer warpgroup gather each stage's block scales into shared
// memory as fp32.
//
// Scales are tiny next to A and B, but they come in every layout users store them in (linear, the
// blocked 128x4 atoms, DeepSeek's MN-major), as fp32, ue8m0 or ue4m3, with partial blocks at the K
// edge and rows that end inside a tile. A gather with the same scale_offset() the CPU reference uses
// serves all of them with one code path and decodes on the way, so consumers read plain fp32. Loader
// w takes every third stage, so three gathers are in flight while the TMA copies run ahead.
#pragma once

#include <cstdint>

#include "bsgemm/formats.hpp"
#include "bsgemm/recipe.hpp"
#include "src/core/tile_scheduler.hpp"
#include "src/cuda/sm90/params.hpp"

namespace bsgemm::cuda {

// Scale element `offset` of a scale tensor of type t, as fp32.
__device__ __forceinline__ float load_scale(DataType t, const std::uint8_t* base, std::int64_t offset) {
  if (t == DataType::f32) return __ldg(reinterpret_cast<const float*>(base) + offset);
  const std::uint8_t code = __ldg(base + offset);
  return t == DataType::ue8m0 ? decode_ue8m0(code) : decode_ue4m3(code);
}

// Scales of `Rows` consecutive rows starting at row0, at scale columns col0 .. col0 + Steps - 1,
// into dst[step * Rows + row]; rows at or beyond valid_rows and columns at or beyond cols give 0 (their
// A/B data is zero-filled or discarded, and 0 keeps garbage out of the sums). A row's offset is
// computed once: its Steps columns are then `step` elements apart (col0 is a multiple of Steps, so in
// the blocked layout they share one 4-column atom). All loads of a chunk are issued before its stores
// so that their latencies overlap.
template <int Rows, int Steps>
__device__ __forceinline__ void gather_scale_rows(float* dst, DataType type, ScaleLayout layout, const std::uint8_t* base,
                                                  std::int64_t ld, std::int64_t cols, std::int64_t row0,
                                                  std::int64_t valid_rows, std::int64_t col0, int lane) {
  static_assert(Rows % 32 == 0 && (Steps == 1 || Steps == 4));
  constexpr int kRowsPerLane = Rows / 32;
  constexpr int kChunk = kRowsPerLane < 4 ? kRowsPerLane : 4;
  const std::int64_t step = layout == ScaleLayout::mn_major ? ld : 1;
  const std::int64_t valid_steps = cols - col0;
  // One chunk at a time: its loads overlap each other, and the chunk's registers are reused.
#pragma unroll 1
  for (int chunk = 0; chunk < kRowsPerLane; chunk += kChunk) {
    float v[kChunk][Steps];
#pragma unroll
    for (int i = 0; i < kChunk; ++i) {
      const std::int64_t row = row0 + lane + 32 * (chunk + i);
      const std::int64_t at = scale_offset(layout, row, col0, cols, ld);
#pragma unroll
      for (int s = 0; s < Steps; ++s)
        v[i][s] = (row < valid_rows && s < valid_steps) ? load_scale(type, base, at + s * step) : 0.0f;
    }
#pragma unroll
    for (int i = 0; i < kChunk; ++i)
#pragma unroll
      for (int s = 0; s < Steps; ++s) dst[s * Rows + lane + 32 * (chunk + i)] = v[i][s];
  }
}

__device__ __forceinline__ const std::uint8_t* batch_base(const void* scales, DataType type, std::int64_t batch_stride,
                                                          std::int32_t l) {
  const std::int64_t bytes = type == DataType::f32 ? 4 : 1;
  return static_cast<const std::uint8_t*>(scales) + l * batch_stride * bytes;
}

// Fills one stage's scales for k-block `kb` (K range [128 kb, 128 kb + 128)) of tile `c` of group g.
template <class Traits>
__device__ __forceinline__ void gather_stage_scales(const KernelParams& p, const DeviceGroup& g, const core::TileCoord& c,
                                                    int kb, float* sfa, float* sfb, int lane) {
  const std::uint8_t* a_base = batch_base(g.sfa, p.sfa_type, g.sfa_batch_stride, c.l);
  const std::uint8_t* b_base = batch_base(g.sfb, p.sfb_type, g.sfb_batch_stride, c.l);
  const std::int64_t m0 = static_cast<std::int64_t>(c.m_block) * Traits::kBlockM;
  const std::int64_t n0 = static_cast<std::int64_t>(c.n_block) * Traits::kBlockN;
  if constexpr (Traits::kScales == ScaleGranularity::mx32) {
    const std::int64_t cols = core::ceil_div(g.k, 32);
    gather_scale_rows<Traits::kBlockM, Traits::kScaleSteps>(sfa, p.sfa_type, p.sfa_layout, a_base, g.sfa_ld, cols, m0, g.m,
                                                            4 * kb, lane);
    gather_scale_rows<Traits::kBlockN, Traits::kScaleSteps>(sfb, p.sfb_type, p.sfb_layout, b_base, g.sfb_ld, cols, n0, g.n,
                                                            4 * kb, lane);
  } else {
    const std::int64_t cols = core::ceil_div(g.k, 128);
    gather_scale_rows<Traits::kBlockM, 1>(sfa, p.sfa_type, p.sfa_layout, a_base, g.sfa_ld, cols, m0, g.m, kb, lane);
    // B: one scale per 128 columns. Blocks past N repeat the last one: their columns are discarded.
    const std::int64_t n_blocks = core::ceil_div(g.n, 128);
    if (lane < Traits::kSfbPerStage) {
      std::int64_t nb = n0 / 128 + lane;
      if (nb >= n_blocks) nb = n_blocks - 1;
      sfb[lane] = load_scale(p.sfb_type, b_base, scale_offset(p.sfb_layout, nb, kb, cols, g.sfb_ld));
    }
  }
}

}  // namespace bsgemm::cuda
