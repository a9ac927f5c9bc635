// Scale-factor layouts (include/bsgemm/recipe.hpp): the blocked 128x4 formula of design.md checked
// by hand and against torchao's to_blocked construction, the linear and mn-major offsets, extents
// and dense leading dimensions, each recipe's scale matrix shape, and the quantizers' agreement:
// the same matrix quantized into every scale layout and data major dequantizes identically.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "bsgemm/quantize.hpp"
#include "bsgemm/recipe.hpp"

namespace bsgemm {
namespace {

// ---- offsets ------------------------------------------------------------------------------------

TEST(Layouts, Blocked128x4ByHand) {
  // 6 scale columns pad to 8: two 512-byte atoms per 128 rows. Offsets worked out from
  // design.md's formula (m/128)*(Kb'/4)*512 + (kb/4)*512 + (m%32)*16 + ((m%128)/32)*4 + kb%4.
  const struct {
    std::int64_t row, col, cols, offset;
  } cases[] = {
      {0, 0, 6, 0},
      {0, 1, 6, 1},
      {0, 3, 6, 3},
      {1, 0, 6, 16},
      {31, 0, 6, 496},
      {32, 0, 6, 4},
      {33, 2, 6, 16 + 4 + 2},
      {127, 3, 6, 496 + 12 + 3},
      {0, 4, 6, 512},
      {5, 5, 6, 512 + 80 + 1},
      {128, 0, 6, 1024},
      {130, 5, 6, 1024 + 512 + 32 + 1},
      {200, 7, 6, 1024 + 512 + 128 + 8 + 3},
      {255, 5, 6, 1024 + 512 + 496 + 12 + 1},
      {256, 0, 6, 2048},
      // 9 columns pad to 12: three atoms per 128 rows.
      {130, 8, 9, 1536 + 1024 + 32},
      {64, 5, 9, 512 + 8 + 1},
      {300, 2, 9, 3072 + 192 + 4 + 2},
      // 4 columns: no padding, one atom per 128 rows.
      {129, 3, 4, 512 + 16 + 3},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(scale_offset(ScaleLayout::blocked_128x4, c.row, c.col, c.cols, 0), c.offset)
        << "row " << c.row << ", col " << c.col << ", cols " << c.cols;
    // The blocked layout ignores ld.
    EXPECT_EQ(scale_offset(ScaleLayout::blocked_128x4, c.row, c.col, c.cols, 999), c.offset);
  }
}

// torchao's to_blocked, as tensor operations on a padded [R, C] matrix: view (R/128, 128, C/4, 4),
// permute to (R/128, C/4, 128, 4), reshape each 128 x 4 block to (4, 32, 4), swap the first two
// axes to (32, 4, 4) and flatten. Returns, for each flat position, the (row, col) it holds.
std::vector<std::pair<std::int64_t, std::int64_t>> torchao_to_blocked(std::int64_t rows, std::int64_t cols) {
  std::vector<std::pair<std::int64_t, std::int64_t>> flat;
  for (std::int64_t row_block = 0; row_block < rows / 128; ++row_block)
    for (std::int64_t col_block = 0; col_block < cols / 4; ++col_block)
      for (std::int64_t b = 0; b < 32; ++b)     // the (32) axis, first after the swap
        for (std::int64_t a = 0; a < 4; ++a)    // the (4) axis that held row / 32
          for (std::int64_t c = 0; c < 4; ++c)  // the column inside the block
            flat.emplace_back(row_block * 128 + a * 32 + b, col_block * 4 + c);
  return flat;
}

TEST(Layouts, Blocked128x4MatchesTorchaoAndIsABijection) {
  const std::pair<std::int64_t, std::int64_t> shapes[] = {{1, 1}, {127, 3}, {128, 4}, {130, 6}, {300, 9}, {256, 17}};
  for (const auto& [rows, cols] : shapes) {
    const std::int64_t padded_rows = round_up(rows, 128), padded_cols = round_up(cols, 4);
    const std::int64_t extent = scale_extent(ScaleLayout::blocked_128x4, rows, cols, 0);
    ASSERT_EQ(extent, padded_rows * padded_cols);
    const auto flat = torchao_to_blocked(padded_rows, padded_cols);
    ASSERT_EQ(static_cast<std::int64_t>(flat.size()), extent);
    for (std::int64_t position = 0; position < extent; ++position) {
      const auto [row, col] = flat[position];
      ASSERT_EQ(scale_offset(ScaleLayout::blocked_128x4, row, col, cols, 0), position)
          << rows << "x" << cols << ": row " << row << ", col " << col;
    }
    // Every (row, col) of the padded matrix lands on a distinct offset in [0, extent).
    std::vector<int> hits(static_cast<std::size_t>(extent), 0);
    for (std::int64_t row = 0; row < padded_rows; ++row) {
      for (std::int64_t col = 0; col < padded_cols; ++col) {
        const std::int64_t offset = scale_offset(ScaleLayout::blocked_128x4, row, col, cols, 0);
        ASSERT_TRUE(offset >= 0 && offset < extent) << row << ", " << col;
        ++hits[static_cast<std::size_t>(offset)];
      }
    }
    for (std::int64_t i = 0; i < extent; ++i) ASSERT_EQ(hits[static_cast<std::size_t>(i)], 1) << "offset " << i;
  }
}

// scale_col_steps is scale_col_offset split into a step per 4-column group and a step per column.
TEST(Layouts, ColumnStepsAreTheColumnOffsets) {
  for (const ScaleLayout layout : {ScaleLayout::linear, ScaleLayout::mn_major, ScaleLayout::blocked_128x4})
    for (const std::int64_t ld : {1, 7, 448})
      for (std::int64_t col = 0; col < 300; ++col) {
        const ScaleColumnSteps steps = scale_col_steps(layout, ld);
        EXPECT_EQ((col / 4) * steps.group_stride + (col % 4) * steps.col_step, scale_col_offset(layout, col, ld))
            << static_cast<int>(layout) << " ld " << ld << " col " << col;
      }
}

TEST(Layouts, LinearAndMnMajor) {
  EXPECT_EQ(scale_offset(ScaleLayout::linear, 3, 2, 5, 7), 3 * 7 + 2);
  EXPECT_EQ(scale_offset(ScaleLayout::linear, 0, 4, 5, 5), 4);
  EXPECT_EQ(scale_offset(ScaleLayout::mn_major, 3, 2, 5, 10), 2 * 10 + 3);
  EXPECT_EQ(scale_offset(ScaleLayout::mn_major, 9, 0, 5, 10), 9);

  EXPECT_EQ(scale_extent(ScaleLayout::linear, 4, 5, 7), 3 * 7 + 5);
  EXPECT_EQ(scale_extent(ScaleLayout::linear, 4, 5, 5), 20);
  EXPECT_EQ(scale_extent(ScaleLayout::mn_major, 4, 5, 6), 4 * 6 + 4);
  EXPECT_EQ(scale_extent(ScaleLayout::mn_major, 4, 5, 4), 20);
  EXPECT_EQ(scale_extent(ScaleLayout::blocked_128x4, 130, 5, 0), 256 * 8);
  EXPECT_EQ(scale_extent(ScaleLayout::blocked_128x4, 128, 4, 0), 512);
  for (const ScaleLayout layout : {ScaleLayout::linear, ScaleLayout::mn_major, ScaleLayout::blocked_128x4}) {
    EXPECT_EQ(scale_extent(layout, 0, 5, 5), 0);
    EXPECT_EQ(scale_extent(layout, 4, 0, 5), 0);
  }

  EXPECT_EQ(default_scale_ld(ScaleLayout::linear, 4, 5), 5);
  EXPECT_EQ(default_scale_ld(ScaleLayout::mn_major, 4, 5), 4);
  EXPECT_EQ(default_scale_ld(ScaleLayout::blocked_128x4, 4, 5), 0);
  // Dense linear and mn-major layouts cover [0, rows * cols) exactly once.
  for (const ScaleLayout layout : {ScaleLayout::linear, ScaleLayout::mn_major}) {
    const std::int64_t rows = 7, cols = 3, ld = default_scale_ld(layout, rows, cols);
    std::vector<int> hits(rows * cols, 0);
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t c = 0; c < cols; ++c) ++hits[static_cast<std::size_t>(scale_offset(layout, r, c, cols, ld))];
    for (const int h : hits) EXPECT_EQ(h, 1);
  }
}

TEST(Layouts, ScaleMatrixShapes) {
  EXPECT_EQ(block_k(Recipe::mxfp8), 32);
  EXPECT_EQ(block_k(Recipe::mxfp4), 32);
  EXPECT_EQ(block_k(Recipe::nvfp4), 16);
  EXPECT_EQ(block_k(Recipe::fp8_block128), 128);

  const struct {
    Recipe recipe;
    std::int64_t k, cols;
  } columns[] = {
      {Recipe::mxfp8, 1, 1},
      {Recipe::mxfp8, 32, 1},
      {Recipe::mxfp8, 33, 2},
      {Recipe::mxfp8, 7168, 224},
      {Recipe::mxfp4, 2880, 90},
      {Recipe::mxfp4, 2881, 91},
      {Recipe::nvfp4, 16, 1},
      {Recipe::nvfp4, 17, 2},
      {Recipe::nvfp4, 4096, 256},
      {Recipe::fp8_block128, 128, 1},
      {Recipe::fp8_block128, 129, 2},
      {Recipe::fp8_block128, 7168, 56},
      {Recipe::fp8_block128, 2880, 23},  // gpt-oss: 22.5 blocks, the last one half full
  };
  for (const auto& c : columns) EXPECT_EQ(scale_cols(c.recipe, c.k), c.cols) << to_string(c.recipe) << " k " << c.k;

  for (const Recipe r : {Recipe::mxfp8, Recipe::mxfp4, Recipe::nvfp4, Recipe::fp8_block128}) {
    EXPECT_EQ(scale_rows(r, Operand::a, 1), 1);
    EXPECT_EQ(scale_rows(r, Operand::a, 200), 200);
  }
  for (const Recipe r : {Recipe::mxfp8, Recipe::mxfp4, Recipe::nvfp4}) EXPECT_EQ(scale_rows(r, Operand::b, 200), 200);
  // fp8-block128 B: one scale row per 128 rows of N.
  EXPECT_EQ(scale_rows(Recipe::fp8_block128, Operand::b, 1), 1);
  EXPECT_EQ(scale_rows(Recipe::fp8_block128, Operand::b, 128), 1);
  EXPECT_EQ(scale_rows(Recipe::fp8_block128, Operand::b, 129), 2);
  EXPECT_EQ(scale_rows(Recipe::fp8_block128, Operand::b, 4096), 32);

  EXPECT_EQ(round_up(0, 4), 0);
  EXPECT_EQ(round_up(5, 4), 8);
  EXPECT_EQ(round_up(128, 128), 128);
  EXPECT_EQ(round_up(129, 128), 256);
}

TEST(Layouts, RecipeDefaults) {
  const OperandType nv = make_operand_type(Recipe::nvfp4);
  EXPECT_EQ(nv.element, DataType::e2m1);
  EXPECT_EQ(nv.scale, DataType::ue4m3);
  EXPECT_EQ(nv.scale_layout, ScaleLayout::linear);
  const OperandType mx = make_operand_type(Recipe::mxfp8, ScaleLayout::blocked_128x4);
  EXPECT_EQ(mx.element, DataType::e4m3);
  EXPECT_EQ(mx.scale, DataType::ue8m0);
  EXPECT_EQ(mx.scale_layout, ScaleLayout::blocked_128x4);
  EXPECT_EQ(make_operand_type(Recipe::mxfp4).scale, DataType::ue8m0);
  EXPECT_EQ(make_operand_type(Recipe::fp8_block128).element, DataType::e4m3);
  EXPECT_EQ(make_operand_type(Recipe::fp8_block128).scale, DataType::f32);
}

// ---- quantizing into every layout ---------------------------------------------------------------

struct LayoutCase {
  ScaleLayout layout;
  std::int64_t extra_scale_ld;  // added to the dense leading dimension (0: pass scale_ld = 0)
};

struct MajorCase {
  bool k_major;
  std::int64_t extra_ld;  // added to the dense leading dimension (0: pass ld = 0)
};

// One quantized copy of a matrix, with its own buffers.
struct Copy {
  QuantizedOperand operand;
  std::vector<std::uint8_t> data, scales;
  float global_scale = 0;
};

Copy quantize_copy(const std::vector<float>& x, std::int64_t rows, std::int64_t k, OperandType type, Operand which,
                   const MajorCase& major, const LayoutCase& layout) {
  Copy c;
  type.scale_layout = layout.layout;
  c.operand.type = type;
  c.operand.which = which;
  c.operand.rows = rows;
  c.operand.k = k;
  c.operand.major = major.k_major ? Major::k : (which == Operand::a ? Major::m : Major::n);
  const std::int64_t inner = major.k_major ? k : rows, outer = major.k_major ? rows : k;
  const std::int64_t ld = major.extra_ld ? inner + major.extra_ld : inner;
  c.operand.ld = major.extra_ld ? ld : 0;
  c.data.assign(static_cast<std::size_t>(bytes_for(type.element, (outer - 1) * ld + inner)), 0xCD);
  const std::int64_t srows = scale_rows(type.recipe, which, rows), scols = scale_cols(type.recipe, k);
  const std::int64_t dense_sld = default_scale_ld(layout.layout, srows, scols);
  const std::int64_t sld = layout.extra_scale_ld ? dense_sld + layout.extra_scale_ld : dense_sld;
  c.operand.scale_ld = layout.extra_scale_ld ? sld : 0;
  const std::int64_t scale_bytes = type.scale == DataType::f32 ? 4 : 1;
  c.scales.assign(static_cast<std::size_t>(scale_extent(layout.layout, srows, scols, sld) * scale_bytes), 0xCD);
  c.operand.data = c.data.data();
  c.operand.scales = c.scales.data();
  const Status s = quantize(x.data(), k, c.operand, {}, &c.global_scale);
  EXPECT_TRUE(s.ok()) << s.message;
  return c;
}

// The scale (row, col) of a copy, as raw bits (f32) or the code.
std::uint32_t scale_bits(const Copy& c, std::int64_t row, std::int64_t col) {
  const std::int64_t cols = scale_cols(c.operand.type.recipe, c.operand.k);
  const std::int64_t rows = scale_rows(c.operand.type.recipe, c.operand.which, c.operand.rows);
  const std::int64_t ld =
      c.operand.scale_ld ? c.operand.scale_ld : default_scale_ld(c.operand.type.scale_layout, rows, cols);
  const std::int64_t index = scale_offset(c.operand.type.scale_layout, row, col, cols, ld);
  if (c.operand.type.scale != DataType::f32) return c.scales[static_cast<std::size_t>(index)];
  std::uint32_t bits;
  std::memcpy(&bits, &c.scales[static_cast<std::size_t>(index * 4)], 4);
  return bits;
}

std::uint32_t element_code(const Copy& c, std::int64_t row, std::int64_t col) {
  const bool k_major = c.operand.major == Major::k;
  const std::int64_t ld = c.operand.ld ? c.operand.ld : (k_major ? c.operand.k : c.operand.rows);
  return load_code(c.operand.type.element, c.data.data(), k_major ? row * ld + col : col * ld + row);
}

TEST(Layouts, QuantizeRoundTripIsTheSameInEveryLayoutAndMajor) {
  const std::int64_t rows = 130, k = 200;  // neither a multiple of 128 rows nor of any block along K
  std::mt19937 rng(7);
  std::normal_distribution<float> normal;
  std::uniform_int_distribution<int> exponent(-8, 8);
  std::vector<float> x(static_cast<std::size_t>(rows * k));
  for (std::int64_t r = 0; r < rows; ++r) {
    const float row_scale = std::ldexp(1.0f, exponent(rng));  // rows of different magnitudes
    for (std::int64_t i = 0; i < k; ++i) x[static_cast<std::size_t>(r * k + i)] = normal(rng) * row_scale;
  }

  OperandType e5m2 = make_operand_type(Recipe::mxfp8);
  e5m2.element = DataType::e5m2;
  OperandType block_ue8m0 = make_operand_type(Recipe::fp8_block128);
  block_ue8m0.scale = DataType::ue8m0;
  const OperandType types[] = {make_operand_type(Recipe::mxfp8),        e5m2,
                               make_operand_type(Recipe::mxfp4),        make_operand_type(Recipe::nvfp4),
                               make_operand_type(Recipe::fp8_block128), block_ue8m0};
  const LayoutCase layouts[] = {{ScaleLayout::linear, 0},
                                {ScaleLayout::linear, 3},
                                {ScaleLayout::blocked_128x4, 0},
                                {ScaleLayout::mn_major, 0},
                                {ScaleLayout::mn_major, 5}};
  const MajorCase majors[] = {{true, 0}, {true, 16}, {false, 0}, {false, 8}};

  for (const OperandType& type : types) {
    for (const Operand which : {Operand::a, Operand::b}) {
      const std::string name = std::string(to_string(type.recipe)) + "/" + to_string(type.element) + "/" +
                               to_string(type.scale) + (which == Operand::a ? " A" : " B");
      const Copy reference = quantize_copy(x, rows, k, type, which, majors[0], layouts[0]);
      std::vector<float> expected(x.size());
      ASSERT_TRUE(dequantize(reference.operand, expected.data(), k, reference.global_scale).ok());
      const std::int64_t srows = scale_rows(type.recipe, which, rows), scols = scale_cols(type.recipe, k);
      for (const MajorCase& major : majors) {
        if (!major.k_major && type.element == DataType::e2m1) continue;  // FP4 is k-major only
        for (const LayoutCase& layout : layouts) {
          const Copy copy = quantize_copy(x, rows, k, type, which, major, layout);
          const std::string where = name + ", layout " + to_string(layout.layout) + " +" +
                                    std::to_string(layout.extra_scale_ld) +
                                    (major.k_major ? ", k-major +" : ", mn-major +") + std::to_string(major.extra_ld);
          EXPECT_EQ(copy.global_scale, reference.global_scale) << where;
          // Same scales at every (row, col) and same element codes at every (row, k) ...
          int mismatches = 0;
          for (std::int64_t r = 0; r < srows && mismatches == 0; ++r)
            for (std::int64_t c = 0; c < scols; ++c)
              if (scale_bits(copy, r, c) != scale_bits(reference, r, c)) ++mismatches;
          for (std::int64_t r = 0; r < rows && mismatches == 0; ++r)
            for (std::int64_t i = 0; i < k; ++i)
              if (element_code(copy, r, i) != element_code(reference, r, i)) ++mismatches;
          EXPECT_EQ(mismatches, 0) << where;
          // ... and so the same fp32 values, bit for bit.
          std::vector<float> y(x.size(), -1.0f);
          const Status s = dequantize(copy.operand, y.data(), k, copy.global_scale);
          ASSERT_TRUE(s.ok()) << where << ": " << s.message;
          EXPECT_EQ(std::memcmp(y.data(), expected.data(), y.size() * sizeof(float)), 0) << where;
        }
      }
    }
  }
}

}  // namespace
}  // namespace bsgemm
