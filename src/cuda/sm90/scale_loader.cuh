// The scale loaders: warps 1-3 of the producer warpgroup gather each stage's block scales into shared
// memory as fp32.
//
// Scales are tiny next to A and B, but they come in every layout users store them in (linear, the
// blocked 128x4 atoms, DeepSeek's MN-major), as fp32, ue8m0 or ue4m3, with partial blocks at the K
// edge and rows that end inside a tile. A gather with the same offsets the CPU reference uses
// (scale_offset in recipe.hpp) serves all of them and decodes on the way, so consumers read plain
// fp32. Loader w takes every third stage, so three gathers are in flight while the TMA copies run
// ahead. Before bench/NOTES.md version 8c the loaders, not the tensor cores, set the pace of every kernel:
// hence per-tile row offsets, word loads and branch-free decoding, about 5 instructions per scale.
#pragma once

#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>

#include "bsgemm/formats.hpp"
#include "bsgemm/recipe.hpp"
#include "src/core/tile_scheduler.hpp"
#include "src/cuda/sm90/params.hpp"

namespace bsgemm::cuda {

// A scale's raw bits: the fp32 word, or the 8-bit code in the low byte.
__device__ __forceinline__ std::uint32_t load_scale_bits(bool is_f32, const std::uint8_t* base, std::int64_t offset) {
  return is_f32 ? __ldg(reinterpret_cast<const std::uint32_t*>(base) + offset) : __ldg(base + offset);
}
// The same at a byte address.
__device__ __forceinline__ std::uint32_t load_scale_bits_at(bool is_f32, const std::uint8_t* at) {
  return is_f32 ? __ldg(reinterpret_cast<const std::uint32_t*>(at)) : __ldg(at);
}

// ue8m0 code -> fp32 without branches: 2^(code - 127), code 0 is the fp32 subnormal 2^-127, 0xFF NaN
// (decode_ue8m0 in formats.hpp, which the CPU reference uses).
__device__ __forceinline__ float ue8m0_to_float(std::uint32_t code) {
  std::uint32_t bits = code << 23;
  bits = code == 0 ? 0x00400000u : bits;
  bits = code == 0xFFu ? 0x7FC00000u : bits;
  return __uint_as_float(bits);
}

// Four ue4m3 codes (one per byte) -> fp32, through the hardware's exact e4m3x2 -> f16x2 conversion (the
// sign bit is ignored, as decode_ue4m3 does; every e4m3 value and NaN is representable in f16).
__device__ __forceinline__ void ue4m3x4_to_float(std::uint32_t codes, float* out) {
  codes &= 0x7F7F7F7Fu;
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const __half2_raw h =
        __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>((codes >> (16 * half)) & 0xFFFFu), __NV_E4M3);
    const float2 f = __half22float2(*reinterpret_cast<const __half2*>(&h));
    out[2 * half] = f.x;
    out[2 * half + 1] = f.y;
  }
}

// The scales of `Rows` consecutive rows of one operand at scale columns col0 .. col0 + kSteps - 1 (one
// stage, 128 deep), decoded to fp32 into shared memory. Built for the scale loaders' loop, where it is
// the critical path of the decode-shaped GEMMs:
//   start_tile() computes each of the lane's rows' address once per tile (every layout's offset is a term
//     of the row plus a term of the column, scale_offset in recipe.hpp);
//   load() issues all the lane's global loads of a stage at once: one 32-bit load per four 8-bit codes
//     where the layout keeps them together (linear with ld a multiple of 4, blocked 128x4) and the stage
//     is not the K tail, byte loads otherwise (mn-major, the tail, unaligned scales);
//   store() decodes (the code's type is the granularity's: ue8m0 for mx32, ue4m3 for nv16; f32 or
//     ue8m0 at run time for block128) and writes dst[step * pitch + row].
// A loader may also fetch several consecutive stages at once into its own Values (load_chunk, then
// store(values, ...) per stage): with the linear layout one 8- or 16-byte load per row then brings what
// took one load per row and stage. In the linear layout a row's codes of a stage are 4 or 8 bytes of
// their own, so a warp's load of one stage touches 32 rows' sectors for 128 or 256 bytes; the TMA copies
// of the tiles ask the memory system for whole lines, and these gathers, one sector per row and stage,
// cost the decode-shaped GEMMs 3-15% against the blocked 128x4 layout's 512-byte atoms (bench/NOTES.md
// version 16b).
// Rows past the group's end read its last row instead (finite values; the products they scale belong
// to rows the epilogue discards, and TMA zero-fills what lies past the tensor). Columns past the K end
// give 0, which keeps the zero-filled K tail at 0.
template <int Rows, ScaleGranularity G>
struct ScaleRows {
  static constexpr int kSteps = scale_steps(G);
  static_assert(Rows % 32 == 0 && (kSteps == 1 || kSteps == 4 || kSteps == 8));
  static constexpr int kRowsPerLane = Rows / 32;
  static constexpr int kWords = kSteps == 1 ? 1 : kSteps / 4;
  struct Values {
    std::uint32_t bits[kRowsPerLane][kWords];  // kSteps == 1: the raw scale; else four 8-bit codes per word
    int valid_steps;  // of the loaded stage: columns before the K end, 0 .. kSteps (kSteps > 1 only)
  };
  Values loaded;  // load(col0) and store(dst, ...)
  // Each of the lane's rows' first scale (scale_row_offset, in bytes): no base pointer next to them, which
  // keeps fp8-block128's producers of the 128 x 192 tile within their 56 registers.
  const std::uint8_t* row_at[kRowsPerLane];
  std::int64_t ld, cols;
  ScaleLayout layout;
  DataType type;
  bool words;    // 32-bit loads are allowed (layout and alignment)
  bool vectors;  // load_chunk's vector loads are allowed (linear layout, row starts aligned to the vector)

  // valid_rows: the rows the group has (the tile scheduler only visits tiles with row0 < valid_rows).
  __device__ __forceinline__ void start_tile(DataType scale_type, ScaleLayout scale_layout, const std::uint8_t* scales,
                                             std::int64_t scale_ld, std::int64_t scale_cols, std::int64_t row0,
                                             std::int64_t valid_rows, int lane) {
    ld = scale_ld;
    cols = scale_cols;
    layout = scale_layout;
    type = scale_type;
    words = kSteps > 1 && (reinterpret_cast<std::uintptr_t>(scales) & 3u) == 0 &&
            (layout == ScaleLayout::blocked_128x4 || (layout == ScaleLayout::linear && (ld & 3) == 0));
    vectors = layout == ScaleLayout::linear && (reinterpret_cast<std::uintptr_t>(scales) & 15u) == 0 && (ld & 15) == 0;
#pragma unroll
    for (int i = 0; i < kRowsPerLane; ++i) {
      const std::int64_t row = row0 + lane + 32 * i;
      row_at[i] = scales + (scale_row_offset(layout, row < valid_rows ? row : valid_rows - 1, cols, ld) << element_shift());
    }
  }

  // log2 of a scale's bytes: fp32 scales (fp8-block128) take 4, the codes 1.
  __device__ __forceinline__ int element_shift() const {
    return G == ScaleGranularity::block128 && type == DataType::f32 ? 2 : 0;
  }

  // col0: the stage's first scale column. With one scale per 128 of K (fp8-block128) that column exists for
  // every stage a kernel loads, so no step is past the K end.
  __device__ __forceinline__ void load(std::int64_t col0) { load(col0, loaded); }
  __device__ __forceinline__ void load(std::int64_t col0, Values& v) const {
    auto& bits = v.bits;
    int& valid_steps = v.valid_steps;
    if constexpr (kSteps == 1) {
      const bool is_f32 = type == DataType::f32;
      const std::int64_t col = scale_col_offset(layout, col0, ld) << element_shift();
#pragma unroll
      for (int i = 0; i < kRowsPerLane; ++i) bits[i][0] = load_scale_bits_at(is_f32, row_at[i] + col);
      return;
    }
    const std::int64_t left = cols - col0;
    valid_steps = left < 0 ? 0 : left > kSteps ? kSteps : static_cast<int>(left);
    if (words && valid_steps == kSteps) {
#pragma unroll
      for (int w = 0; w < kWords; ++w) {
        const std::int64_t col = scale_col_offset(layout, col0 + 4 * w, ld);
#pragma unroll
        for (int i = 0; i < kRowsPerLane; ++i) bits[i][w] = __ldg(reinterpret_cast<const std::uint32_t*>(row_at[i] + col));
      }
    } else {
      // Each code merged into its word as it comes, so that a lane's codes of a stage never wait in
      // registers one by one (the loaders hold a chunk of stages' words).
#pragma unroll
      for (int i = 0; i < kRowsPerLane; ++i)
#pragma unroll
        for (int w = 0; w < kWords; ++w) bits[i][w] = 0;
#pragma unroll
      for (int s = 0; s < kSteps; ++s) {
        if (s >= valid_steps) break;
        const std::int64_t col = scale_col_offset(layout, col0 + s, ld);
#pragma unroll
        for (int i = 0; i < kRowsPerLane; ++i)
          bits[i][s / 4] |= static_cast<std::uint32_t>(__ldg(row_at[i] + col)) << (8 * (s % 4));
      }
    }
  }

  // The stages col0 / kSteps .. + stages - 1 (stages <= Chunk) into v[0 .. stages - 1]: one 8- or 16-byte
  // load per row for a whole chunk of the linear layout inside K, else stage by stage as load() does.
  template <int Chunk>
  __device__ __forceinline__ void load_chunk(std::int64_t col0, int stages, Values (&v)[Chunk]) const {
    constexpr int kBytes = Chunk * kSteps;  // one 8-bit code per step
    // The 384-row tile (12 rows per lane) with nv16 codes keeps the stage-by-stage loads: its vectors'
    // registers would spill.
    if constexpr (kSteps > 1 && (kBytes == 8 || kBytes == 16) && (kRowsPerLane <= 8 || kWords == 1)) {
      if (vectors && stages == Chunk && cols - col0 >= kBytes) {
#pragma unroll
        for (int i = 0; i < kRowsPerLane; ++i) {
          std::uint32_t w[kBytes / 4];
          if constexpr (kBytes == 16) {
            const uint4 q = __ldg(reinterpret_cast<const uint4*>(row_at[i] + col0));
            w[0] = q.x, w[1] = q.y, w[2] = q.z, w[3] = q.w;
          } else {
            const uint2 q = __ldg(reinterpret_cast<const uint2*>(row_at[i] + col0));
            w[0] = q.x, w[1] = q.y;
          }
#pragma unroll
          for (int s = 0; s < Chunk; ++s)
#pragma unroll
            for (int word = 0; word < kWords; ++word) v[s].bits[i][word] = w[s * kWords + word];
        }
#pragma unroll
        for (int s = 0; s < Chunk; ++s) v[s].valid_steps = kSteps;
        return;
      }
    }
#pragma unroll
    for (int s = 0; s < Chunk; ++s)
      if (s < stages) load(col0 + static_cast<std::int64_t>(s) * kSteps, v[s]);
  }

  // factor multiplies every stored scale (fp8-block128 folds B's scale into A's here); pitch: the floats
  // between steps in dst (a part of a longer row of scales).
  __device__ __forceinline__ void store(float* dst, int lane, float factor = 1.0f, int pitch = Rows) const {
    store(loaded, dst, lane, factor, pitch);
  }
  __device__ __forceinline__ void store(const Values& v, float* dst, int lane, float factor = 1.0f,
                                        int pitch = Rows) const {
    const auto& bits = v.bits;
    const int valid_steps = v.valid_steps;
#pragma unroll
    for (int i = 0; i < kRowsPerLane; ++i) {
      float value[kSteps];
      if constexpr (G == ScaleGranularity::block128) {
        value[0] = type == DataType::f32 ? __uint_as_float(bits[i][0]) : ue8m0_to_float(bits[i][0] & 0xFFu);
      } else if constexpr (G == ScaleGranularity::mx32) {
#pragma unroll
        for (int s = 0; s < kSteps; ++s) value[s] = ue8m0_to_float((bits[i][s / 4] >> (8 * (s % 4))) & 0xFFu);
      } else {
#pragma unroll
        for (int w = 0; w < kWords; ++w) ue4m3x4_to_float(bits[i][w], &value[4 * w]);
      }
#pragma unroll
      for (int s = 0; s < kSteps; ++s)
        dst[s * pitch + lane + 32 * i] = kSteps == 1 || s < valid_steps ? value[s] * factor : 0.0f;
    }
  }

  // The stage's codes as stored, not decoded, for the register-operand kernel's code windows
  // (kernel_traits_swapped.cuh): row r's codes at window + r * kScaleCodeWindow + window_col, one 4- or 8-byte
  // store a row, as the stage's TMA box of codes would have put them. Codes past the K end are 0 (load() leaves
  // them so), as the box's fill past the tensor (their weights are zero-filled too).
  __device__ __forceinline__ void store_codes(const Values& v, std::uint8_t* window, int lane, int window_col) const {
    static_assert(kSteps == 4 * kWords, "a stage's codes are whole words (nv16, mx32)");
#pragma unroll
    for (int i = 0; i < kRowsPerLane; ++i) {
      std::uint8_t* row = window + (lane + 32 * i) * kScaleCodeWindow + window_col;
      if constexpr (kWords == 2) *reinterpret_cast<uint2*>(row) = make_uint2(v.bits[i][0], v.bits[i][1]);
      else *reinterpret_cast<std::uint32_t*>(row) = v.bits[i][0];
    }
  }
};

__device__ __forceinline__ const std::uint8_t* batch_base(const void* scales, DataType type, std::int64_t batch_stride,
                                                          std::int32_t l) {
  const std::int64_t bytes = type == DataType::f32 ? 4 : 1;
  return static_cast<const std::uint8_t*>(scales) + l * batch_stride * bytes;
}

// The FP8 kernel's scales of one stage (k-block `kb`, K range [128 kb, 128 kb + 128)) of a tile, in
// two halves: load() issues the global loads (before the loader waits for the stage to be free, so that
// their latency hides under that wait), store() decodes them into the stage.
//   mxfp8:        sfa[step][row] = A's scale of row, sfb[step * BlockN + col] = B's scale of col
//   fp8-block128: sfa[j][row] = A's scale of row times B's scale of the tile's 128-column block j, so
//                 that the consumers apply one product per row (no multiply on their critical path)
template <class Traits>
struct StageScaleGather {
  static constexpr bool kMx = Traits::kScales == ScaleGranularity::mx32;
  // 256 rows of B in flight next to A's would not fit the producer warps' registers: B after A.
  static constexpr bool kDeferB = kMx && Traits::kBlockN > 128;
  ScaleRows<Traits::kBlockM, Traits::kScales> a;
  ScaleRows<Traits::kBlockN, Traits::kScales> b;  // mxfp8
  // fp8-block128: lane j < kSfaSlots holds the scale of the tile's 128-column block j of B.
  std::uint32_t b_bits = 0;
  const std::uint8_t* b_base;
  std::int64_t b_offset;  // scale_row_offset of lane's block (the last one for blocks past N)
  std::int64_t b_ld;

  __device__ __forceinline__ void start_tile(const KernelParams& p, const DeviceGroup& g, const core::TileCoord& c,
                                             int lane) {
    const std::uint8_t* a_base = batch_base(g.sfa, p.sfa_type, g.sfa_batch_stride, c.l);
    b_base = batch_base(g.sfb, p.sfb_type, g.sfb_batch_stride, c.l);
    const std::int64_t m0 = static_cast<std::int64_t>(c.m_block) * Traits::kBlockM;
    const std::int64_t n0 = static_cast<std::int64_t>(c.n_block) * Traits::kBlockN;
    const std::int64_t cols = core::ceil_div(g.k, kMx ? 32 : 128);
    a.start_tile(p.sfa_type, p.sfa_layout, a_base, g.sfa_ld, cols, m0, g.m, lane);
    if constexpr (kMx) {
      b.start_tile(p.sfb_type, p.sfb_layout, b_base, g.sfb_ld, cols, n0, g.n, lane);
    } else {
      // Blocks past N repeat the last one: their columns are discarded.
      const std::int64_t n_blocks = core::ceil_div(g.n, 128);
      std::int64_t nb = n0 / 128 + (lane < Traits::kSfaSlots ? lane : 0);
      if (nb >= n_blocks) nb = n_blocks - 1;
      b_ld = g.sfb_ld;
      b_offset = scale_row_offset(p.sfb_layout, nb, cols, g.sfb_ld);
    }
  }

  __device__ __forceinline__ void load(const KernelParams& p, int kb, int lane) {
    a.load(static_cast<std::int64_t>(Traits::kScaleSteps) * kb);
    if constexpr (kMx) {
      if constexpr (!kDeferB) b.load(static_cast<std::int64_t>(Traits::kScaleSteps) * kb);
    } else if (lane < Traits::kSfaSlots) {
      b_bits = load_scale_bits(p.sfb_type == DataType::f32, b_base, b_offset + scale_col_offset(p.sfb_layout, kb, b_ld));
    }
  }

  __device__ __forceinline__ void store(const KernelParams& p, float* sfa, float* sfb, int kb, int lane) {
    if constexpr (kMx) {
      a.store(sfa, lane);
      if constexpr (kDeferB) b.load(static_cast<std::int64_t>(Traits::kScaleSteps) * kb);
      b.store(sfb, lane);
    } else {
      const std::uint32_t bits = b_bits;
      const float sb = p.sfb_type == DataType::f32 ? __uint_as_float(bits) : ue8m0_to_float(bits & 0xFFu);
#pragma unroll
      for (int j = 0; j < Traits::kSfaSlots; ++j) a.store(sfa + j * Traits::kBlockM, lane, __shfl_sync(0xFFFFFFFFu, sb, j));
    }
  }
};

}  // namespace bsgemm::cuda
