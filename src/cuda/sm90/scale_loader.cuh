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

// A scale's raw bits: the fp32 word, or the 8-bit code in the low byte. Loading raw bits and decoding
// later keeps the decode's branches out of the way of the loads, so that all loads of a gather are in
// flight together instead of one global-memory latency per scale.
__device__ __forceinline__ std::uint32_t load_scale_bits(bool is_f32, const std::uint8_t* base, std::int64_t offset) {
  return is_f32 ? __ldg(reinterpret_cast<const std::uint32_t*>(base) + offset) : __ldg(base + offset);
}

__device__ __forceinline__ float decode_scale_bits(DataType t, std::uint32_t bits) {
  if (t == DataType::f32) return __uint_as_float(bits);
  const auto code = static_cast<std::uint8_t>(bits);
  return t == DataType::ue8m0 ? decode_ue8m0(code) : decode_ue4m3(code);
}

// The scales of `Rows` consecutive rows starting at row0, at scale columns col0 .. col0 + Steps - 1:
// load() issues every load of the lane at once, store() decodes and writes dst[step * Rows + row].
// Rows at or beyond valid_rows and columns at or beyond cols give 0 (their A/B data is zero-filled or
// discarded, and 0 keeps garbage out of the sums). Steps is 1 (one scale per stage, fp32 or 8-bit), 4
// or 8 (8-bit codes, the MX and NV recipes): the codes of a row go four to a register, one 32-bit load
// each where the layout keeps four columns together (linear, and the blocked layout's 4-column atoms:
// col0 is a multiple of 4), byte loads otherwise (mn-major, a row end inside the stage, an unaligned
// row). All loads are issued before any is used, which keeps them in flight together without spilling.
template <int Rows, int Steps>
struct ScaleRows {
  static_assert(Rows % 32 == 0 && (Steps == 1 || Steps == 4 || Steps == 8));
  static constexpr int kRowsPerLane = Rows / 32;
  static constexpr int kWords = Steps == 1 ? 1 : Steps / 4;
  std::uint32_t bits[kRowsPerLane][kWords];  // Steps == 1: the raw scale; else four 8-bit codes per word
  std::uint64_t valid = 0;                   // bit i * Steps + s: element (i, s) exists
  static_assert(kRowsPerLane * Steps <= 64);

  __device__ __forceinline__ void load(DataType type, ScaleLayout layout, const std::uint8_t* base, std::int64_t ld,
                                       std::int64_t cols, std::int64_t row0, std::int64_t valid_rows, std::int64_t col0,
                                       int lane) {
    const bool is_f32 = type == DataType::f32;
    valid = 0;
    const std::int64_t step = layout == ScaleLayout::mn_major ? ld : 1;
    const std::int64_t valid_steps = cols - col0;
#pragma unroll
    for (int i = 0; i < kRowsPerLane; ++i) {
      const std::int64_t row = row0 + lane + 32 * i;
      const bool row_ok = row < valid_rows;
#pragma unroll
      for (int w = 0; w < kWords; ++w) bits[i][w] = 0;
      if constexpr (Steps == 1) {
        const std::int64_t at = scale_offset(layout, row, col0, cols, ld);
        if (row_ok && valid_steps > 0) bits[i][0] = load_scale_bits(is_f32, base, at);
        valid |= static_cast<std::uint64_t>(row_ok && valid_steps > 0) << i;
      } else {
#pragma unroll
        for (int w = 0; w < kWords; ++w) {
          const std::int64_t at = scale_offset(layout, row, col0 + 4 * w, cols, ld);
          const std::int64_t left = valid_steps - 4 * w;
          const bool word = step == 1 && left >= 4 && (reinterpret_cast<std::uintptr_t>(base + at) & 3u) == 0;
          if (row_ok && word) {
            bits[i][w] = __ldg(reinterpret_cast<const std::uint32_t*>(base + at));
          } else if (row_ok) {
            std::uint32_t code[4];
#pragma unroll
            for (int s = 0; s < 4; ++s) code[s] = s < left ? __ldg(base + at + s * step) : 0u;
#pragma unroll
            for (int s = 0; s < 4; ++s) bits[i][w] |= code[s] << (8 * s);
          }
        }
#pragma unroll
        for (int s = 0; s < Steps; ++s)
          valid |= static_cast<std::uint64_t>(row_ok && s < valid_steps) << (i * Steps + s);
      }
    }
  }

  // factor multiplies every stored scale (fp8-block128 folds B's scale into A's here); pitch: the floats
  // between steps in dst (a part of a longer row of scales).
  __device__ __forceinline__ void store(DataType type, float* dst, int lane, float factor = 1.0f, int pitch = Rows) const {
#pragma unroll
    for (int i = 0; i < kRowsPerLane; ++i)
#pragma unroll
      for (int s = 0; s < Steps; ++s) {
        const std::uint32_t raw = Steps == 1 ? bits[i][0] : (bits[i][s / 4] >> (8 * (s % 4))) & 0xFFu;
        dst[s * pitch + lane + 32 * i] = ((valid >> (i * Steps + s)) & 1u) ? decode_scale_bits(type, raw) * factor : 0.0f;
      }
  }
};

__device__ __forceinline__ const std::uint8_t* batch_base(const void* scales, DataType type, std::int64_t batch_stride,
                                                          std::int32_t l) {
  const std::int64_t bytes = type == DataType::f32 ? 4 : 1;
  return static_cast<const std::uint8_t*>(scales) + l * batch_stride * bytes;
}

// One stage's scales for k-block `kb` (K range [128 kb, 128 kb + 128)) of tile `c` of group g, in two
// halves: load() issues the global loads (before the loader waits for the stage to be free, so that
// their latency hides under that wait), store() decodes them into the stage.
//   mxfp8:        sfa[step][row] = A's scale of row, sfb[step * BlockN + col] = B's scale of col
//   fp8-block128: sfa[j][row] = A's scale of row times B's scale of the tile's 128-column block j, so
//                 that the consumers apply one product per row (no multiply on their critical path)
template <class Traits>
struct StageScaleGather {
  static constexpr bool kMx = Traits::kScales == ScaleGranularity::mx32;
  // 256 rows of B in flight next to A's would not fit the producer warps' registers: B after A.
  static constexpr bool kDeferB = kMx && Traits::kBlockN > 128;
  ScaleRows<Traits::kBlockM, Traits::kScaleSteps> a;
  ScaleRows<Traits::kBlockN, Traits::kScaleSteps> b;  // mxfp8
  std::uint32_t b_bits = 0;                           // fp8-block128: lane j < kSfaSlots holds block j's
  const DeviceGroup* g;
  const std::uint8_t* b_base;
  std::int64_t n0, cols;
  int kb;

  __device__ __forceinline__ void load(const KernelParams& p, const DeviceGroup& group, const core::TileCoord& c,
                                       int k_block, int lane) {
    g = &group;
    kb = k_block;
    const std::uint8_t* a_base = batch_base(g->sfa, p.sfa_type, g->sfa_batch_stride, c.l);
    b_base = batch_base(g->sfb, p.sfb_type, g->sfb_batch_stride, c.l);
    const std::int64_t m0 = static_cast<std::int64_t>(c.m_block) * Traits::kBlockM;
    n0 = static_cast<std::int64_t>(c.n_block) * Traits::kBlockN;
    if constexpr (kMx) {
      cols = core::ceil_div(g->k, 32);
      a.load(p.sfa_type, p.sfa_layout, a_base, g->sfa_ld, cols, m0, g->m, 4 * kb, lane);
      if constexpr (!kDeferB) b.load(p.sfb_type, p.sfb_layout, b_base, g->sfb_ld, cols, n0, g->n, 4 * kb, lane);
    } else {
      cols = core::ceil_div(g->k, 128);
      a.load(p.sfa_type, p.sfa_layout, a_base, g->sfa_ld, cols, m0, g->m, kb, lane);
      // B: one scale per 128 columns. Blocks past N repeat the last one: their columns are discarded.
      const std::int64_t n_blocks = core::ceil_div(g->n, 128);
      if (lane < Traits::kSfaSlots) {
        std::int64_t nb = n0 / 128 + lane;
        if (nb >= n_blocks) nb = n_blocks - 1;
        b_bits = load_scale_bits(p.sfb_type == DataType::f32, b_base, scale_offset(p.sfb_layout, nb, kb, cols, g->sfb_ld));
      }
    }
  }

  __device__ __forceinline__ void store(const KernelParams& p, float* sfa, float* sfb, int lane) {
    if constexpr (kMx) {
      a.store(p.sfa_type, sfa, lane);
      if constexpr (kDeferB) b.load(p.sfb_type, p.sfb_layout, b_base, g->sfb_ld, cols, n0, g->n, 4 * kb, lane);
      b.store(p.sfb_type, sfb, lane);
    } else {
      const float sb = decode_scale_bits(p.sfb_type, b_bits);
#pragma unroll
      for (int j = 0; j < Traits::kSfaSlots; ++j)
        a.store(p.sfa_type, sfa + j * Traits::kBlockM, lane, __shfl_sync(0xFFFFFFFFu, sb, j));
    }
  }
};

}  // namespace bsgemm::cuda
