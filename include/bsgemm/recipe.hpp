// Recipes (element format + scale format + block size) and scale-factor layouts.
//
// A recipe describes one operand. For row r of an operand (r < M for A, r < N for B) and K index
// k, the decoded value is  decode(element[r, k]) * decode(scale[scale_row(r), k / block_k]).
// For fp8-block128, B has one scale per (128 of N, 128 of K), so scale_row(n) = n / 128; every
// other recipe has one scale per row: scale_row(r) = r.
#pragma once

#include <cstdint>
#include <string_view>

#include "bsgemm/config.hpp"
#include "bsgemm/formats.hpp"

namespace bsgemm {

enum class Recipe : std::uint8_t { mxfp8, mxfp4, nvfp4, fp8_block128 };

// How a [scale_rows, scale_cols] matrix of scale factors is stored (per batch).
enum class ScaleLayout : std::uint8_t {
  linear,         // row-major: offset = row * ld + col               (ld >= scale_cols)
  blocked_128x4,  // Blackwell / cuBLAS / CUTLASS "32x4x4" 512-byte atoms of 128 rows x 4 columns
  mn_major,       // DeepSeek: column-major, offset = col * ld + row   (ld >= scale_rows)
};

enum class Operand : std::uint8_t { a, b };

// What one operand holds. Build it with make_operand_type(), which fills the recipe's defaults.
struct OperandType {
  Recipe recipe = Recipe::nvfp4;
  DataType element = DataType::e2m1;
  DataType scale = DataType::ue4m3;
  ScaleLayout scale_layout = ScaleLayout::linear;
};

const char* to_string(Recipe r);
const char* to_string(ScaleLayout l);
bool parse(std::string_view text, Recipe* out);       // "mxfp8", "mxfp4", "nvfp4", "fp8-block128"
bool parse(std::string_view text, ScaleLayout* out);  // "linear", "blocked128x4", "mn-major"

BSGEMM_HD constexpr int block_k(Recipe r) {
  switch (r) {
    case Recipe::nvfp4: return 16;
    case Recipe::fp8_block128: return 128;
    default: return 32;
  }
}

BSGEMM_HD constexpr DataType default_element(Recipe r) {
  return (r == Recipe::mxfp4 || r == Recipe::nvfp4) ? DataType::e2m1 : DataType::e4m3;
}

BSGEMM_HD constexpr DataType default_scale(Recipe r) {
  switch (r) {
    case Recipe::nvfp4: return DataType::ue4m3;
    case Recipe::fp8_block128: return DataType::f32;
    default: return DataType::ue8m0;
  }
}

// The recipe with its default element and scale types unless given.
constexpr OperandType make_operand_type(Recipe r, ScaleLayout layout = ScaleLayout::linear) {
  return OperandType{r, default_element(r), default_scale(r), layout};
}

// The element and scale types each recipe holds (the rule every back end and the quantizers apply),
// and the same as text for messages.
BSGEMM_HD constexpr bool element_allowed(Recipe r, DataType t) {
  switch (r) {
    case Recipe::mxfp8: return t == DataType::e4m3 || t == DataType::e5m2;
    case Recipe::mxfp4:
    case Recipe::nvfp4: return t == DataType::e2m1;
    case Recipe::fp8_block128: return t == DataType::e4m3;
  }
  return false;
}

constexpr const char* allowed_elements(Recipe r) {
  switch (r) {
    case Recipe::mxfp8: return "e4m3 or e5m2";
    case Recipe::mxfp4:
    case Recipe::nvfp4: return "e2m1";
    case Recipe::fp8_block128: return "e4m3";
  }
  return "";
}

BSGEMM_HD constexpr bool scale_allowed(Recipe r, DataType t) {
  switch (r) {
    case Recipe::mxfp8:
    case Recipe::mxfp4: return t == DataType::ue8m0;
    case Recipe::nvfp4: return t == DataType::ue4m3;
    case Recipe::fp8_block128: return t == DataType::f32 || t == DataType::ue8m0;
  }
  return false;
}

constexpr const char* allowed_scales(Recipe r) {
  switch (r) {
    case Recipe::mxfp8:
    case Recipe::mxfp4: return "ue8m0";
    case Recipe::nvfp4: return "ue4m3";
    case Recipe::fp8_block128: return "f32 or ue8m0";
  }
  return "";
}

// Rows of the scale matrix of an operand with `rows` rows (M for A, N for B).
BSGEMM_HD constexpr std::int64_t scale_rows(Recipe r, Operand which, std::int64_t rows) {
  return (r == Recipe::fp8_block128 && which == Operand::b) ? (rows + 127) / 128 : rows;
}

// Columns of the scale matrix: one per block of K; the last block may be partial.
BSGEMM_HD constexpr std::int64_t scale_cols(Recipe r, std::int64_t k) {
  // block_k is 16, 32 or 128: constant divisors (shifts) where dividing by block_k(r) would take a 64-bit
  // division, a long subroutine on the GPU (the prepare kernel's checks call this).
  switch (block_k(r)) {
    case 16: return (k + 15) / 16;
    case 32: return (k + 31) / 32;
    default: return (k + 127) / 128;
  }
}

BSGEMM_HD constexpr std::int64_t round_up(std::int64_t x, std::int64_t to) { return (x + to - 1) / to * to; }

// Offset, in elements, of scale (row, col) inside one batch of a scale matrix: a term of the row plus
// a term of the column in every layout, which lets a kernel compute each row's term once per tile.
// `cols` is the matrix's column count (needed by the blocked layout); `ld` is the leading
// dimension of the linear and mn-major layouts and is ignored by the blocked one.
BSGEMM_HD constexpr std::int64_t scale_row_offset(ScaleLayout layout, std::int64_t row, std::int64_t cols, std::int64_t ld) {
  switch (layout) {
    case ScaleLayout::linear: return row * ld;
    case ScaleLayout::mn_major: return row;
    case ScaleLayout::blocked_128x4: return (row / 128) * (round_up(cols, 4) / 4) * 512 + (row % 32) * 16 + ((row % 128) / 32) * 4;
  }
  return 0;
}

BSGEMM_HD constexpr std::int64_t scale_col_offset(ScaleLayout layout, std::int64_t col, std::int64_t ld) {
  switch (layout) {
    case ScaleLayout::linear: return col;
    case ScaleLayout::mn_major: return col * ld;
    case ScaleLayout::blocked_128x4: return (col / 4) * 512 + col % 4;
  }
  return 0;
}

// scale_col_offset as (col / 4) * group_stride + (col % 4) * col_step, both fixed per layout and ld: what a
// loop over columns multiplies by instead of taking the layout's switch each column.
struct ScaleColumnSteps {
  std::int64_t group_stride, col_step;
};
BSGEMM_HD constexpr ScaleColumnSteps scale_col_steps(ScaleLayout layout, std::int64_t ld) {
  // linear: 4 and 1; mn_major: 4 ld and ld; blocked_128x4: a 512-byte atom and 1.
  const std::int64_t col_step = layout == ScaleLayout::mn_major ? ld : 1;
  return {layout == ScaleLayout::blocked_128x4 ? 512 : 4 * col_step, col_step};
}

BSGEMM_HD constexpr std::int64_t scale_offset(ScaleLayout layout, std::int64_t row, std::int64_t col,
                                              std::int64_t cols, std::int64_t ld) {
  return scale_row_offset(layout, row, cols, ld) + scale_col_offset(layout, col, ld);
}

// (lines - 1) * ld + line_length: the elements that `lines` lines of `line_length` elements, `ld`
// apart, span. Defaults are filled in before validation looks at a stride, so this is computed for
// absurd strides too: an ld whose span would overflow int64 gives INT64_MAX and a negative ld counts
// as 0, keeping the arithmetic defined. Validation rejects such an ld before the extent is used.
BSGEMM_HD constexpr std::int64_t strided_extent(std::int64_t lines, std::int64_t ld, std::int64_t line_length) {
  constexpr std::int64_t kMax = 0x7FFFFFFFFFFFFFFF;
  const std::int64_t step = ld < 0 ? 0 : ld;
  if (lines > 1 && step > (kMax - line_length) / (lines - 1)) return kMax;
  return (lines - 1) * step + line_length;
}

// lines * ld (lines >= 0): whole lines, with the same guards as strided_extent.
BSGEMM_HD constexpr std::int64_t strided_lines(std::int64_t lines, std::int64_t ld) {
  constexpr std::int64_t kMax = 0x7FFFFFFFFFFFFFFF;
  const std::int64_t step = ld < 0 ? 0 : ld;
  if (lines > 0 && step > kMax / lines) return kMax;
  return lines * step;
}

// Elements one batch of a [rows, cols] scale matrix spans (the minimum batch stride).
BSGEMM_HD constexpr std::int64_t scale_extent(ScaleLayout layout, std::int64_t rows, std::int64_t cols, std::int64_t ld) {
  if (rows <= 0 || cols <= 0) return 0;
  switch (layout) {
    case ScaleLayout::linear: return strided_extent(rows, ld, cols);
    case ScaleLayout::mn_major: return strided_extent(cols, ld, rows);
    case ScaleLayout::blocked_128x4: return round_up(rows, 128) * round_up(cols, 4);
  }
  return 0;
}

// The dense leading dimension of a layout (what `ld = 0` means in the problem description).
BSGEMM_HD constexpr std::int64_t default_scale_ld(ScaleLayout layout, std::int64_t rows, std::int64_t cols) {
  switch (layout) {
    case ScaleLayout::linear: return cols;
    case ScaleLayout::mn_major: return rows;
    case ScaleLayout::blocked_128x4: return 0;
  }
  return 0;
}

}  // namespace bsgemm
