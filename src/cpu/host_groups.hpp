// The groups of host-resident arguments, each resolved to pointers and strides (resolved_group.hpp).
//
// The CPU reference, the output check and the CPU back end all walk groups this way, so that
// the three description forms mean the same thing to each of them.
#pragma once

#include <cstdint>
#include <vector>

#include "bsgemm/formats.hpp"
#include "bsgemm/problem.hpp"
#include "bsgemm/recipe.hpp"
#include "src/core/resolved_group.hpp"

namespace bsgemm::cpu {

// Group g of `args` at index g. Empty groups are kept (m = 0), so indices match group numbers.
// Expects arguments that core::validate accepted: the offsets and masked_m arrays are read
// without further checks.
inline std::vector<core::ResolvedGroup> resolve_host_groups(const GemmArguments& args) {
  const core::CallSpec spec = core::make_call_spec(args);
  std::vector<core::ResolvedGroup> groups;
  switch (args.layout) {
    case GroupLayout::pointer_array:
      groups.reserve(static_cast<std::size_t>(args.num_groups));
      for (int g = 0; g < args.num_groups; ++g) groups.push_back(core::resolve_pointer_array(spec, args.groups[g]));
      break;
    case GroupLayout::contiguous: {
      const MoeGroups& moe = args.moe;
      groups.reserve(static_cast<std::size_t>(moe.num_groups));
      // With blocked_128x4 scales every group's SFA block starts on a 128-row boundary, so the
      // block's first row is the sum of the earlier groups' row counts rounded up to 128.
      std::int64_t sfa_block_row0 = 0;
      for (int g = 0; g < moe.num_groups; ++g) {
        std::int64_t begin = 0, end = 0;
        core::contiguous_bounds(moe, g, &begin, &end);
        groups.push_back(core::resolve_contiguous(spec, moe, g, begin, end, sfa_block_row0, core::moe_alpha(moe, g),
                                                  core::moe_beta(moe, g)));
        sfa_block_row0 += round_up(end - begin, 128);
      }
      break;
    }
    case GroupLayout::masked: {
      const MoeGroups& moe = args.moe;
      groups.reserve(static_cast<std::size_t>(moe.num_groups));
      for (int g = 0; g < moe.num_groups; ++g)
        groups.push_back(
            core::resolve_masked(spec, moe, g, moe.masked_m[g], core::moe_alpha(moe, g), core::moe_beta(moe, g)));
      break;
    }
  }
  return groups;
}

// Row of the scale matrix that holds the scale of operand row `row` (recipe.hpp): fp8-block128 B
// has one scale per 128 rows of N, every other operand one per row.
constexpr std::int64_t scale_row_of(Recipe recipe, Operand which, std::int64_t row) {
  return (recipe == Recipe::fp8_block128 && which == Operand::b) ? row / 128 : row;
}

// One operand (A or B) of one resolved group, as the definition reads it.
struct OperandView {
  OperandType type;
  Operand which = Operand::a;
  bool k_contiguous = true;     // k-major storage
  core::TensorRef data;         // the elements
  core::TensorRef scales;       // the block scales
  std::int64_t scale_cols = 0;  // columns of the scale matrix (one per block of K)
};

inline OperandView operand_a(const GemmArguments& args, const core::ResolvedGroup& g) {
  return {args.a_type, Operand::a, args.a_major == Major::k, g.a, g.sfa, scale_cols(args.a_type.recipe, g.k)};
}

inline OperandView operand_b(const GemmArguments& args, const core::ResolvedGroup& g) {
  return {args.b_type, Operand::b, args.b_major == Major::k, g.b, g.sfb, scale_cols(args.b_type.recipe, g.k)};
}

// decode(element[row, k]) * decode(scale[scale_row(row), k / block]) of batch `batch`, in fp64
// (exact: both factors are fp32 values). One element at a time, straight from the definition.
inline double decoded_value(const OperandView& op, std::int64_t batch, std::int64_t row, std::int64_t k) {
  const std::int64_t element_index =
      batch * op.data.batch_stride + core::matrix_offset(op.k_contiguous, row, k, op.data.ld);
  const float value = decode(op.type.element, load_code(op.type.element, op.data.data, element_index));
  const std::int64_t scale_index =
      batch * op.scales.batch_stride + scale_offset(op.type.scale_layout, scale_row_of(op.type.recipe, op.which, row),
                                                    k / block_k(op.type.recipe), op.scale_cols, op.scales.ld);
  const float scale = load_value(op.type.scale, op.scales.data, scale_index);
  return static_cast<double>(value) * static_cast<double>(scale);
}

// The fp64 reference's output blocks (reference.cpp): each decodes the columns of B it needs and each row of
// A once, so B is decoded once per kReferenceBlockRows rows of D and A once per kReferenceBlockColumns
// columns (which the tool's estimate of the reference's time counts).
inline constexpr std::int64_t kReferenceBlockRows = 32;
inline constexpr std::int64_t kReferenceBlockColumns = 64;

// fp32 value of every code of an element format (256 entries; e2m1 uses the first 16).
struct DecodeTable {
  float value[256];
  explicit DecodeTable(DataType element) {
    const int codes = bits_of(element) == 4 ? 16 : 256;
    for (int code = 0; code < 256; ++code)
      value[code] = code < codes ? decode(element, static_cast<std::uint8_t>(code)) : 0.0f;
  }
};

// Rows of one operand decoded as decoded_value decodes them, at a fraction of the cost: each element's
// code through a DecodeTable, each block's scale read once. The same fp32 factors multiplied in fp64, so
// every value is decoded_value's bit for bit (the CPU tier compares the reference, which decodes its rows
// this way, with element-at-a-time sums of decoded_value).
class RowDecoder {
 public:
  explicit RowDecoder(const OperandView& op) : op_(op), table_(op.type.element) {}

  // out[k] = decoded_value(op, batch, row, k) for every k in [0, k_count).
  void decode_row(std::int64_t batch, std::int64_t row, std::int64_t k_count, double* out) const {
    const std::int64_t block = block_k(op_.type.recipe);
    const std::int64_t scale_row = scale_row_of(op_.type.recipe, op_.which, row);
    for (std::int64_t k0 = 0; k0 < k_count; k0 += block) {
      const std::int64_t scale_index =
          batch * op_.scales.batch_stride +
          scale_offset(op_.type.scale_layout, scale_row, k0 / block, op_.scale_cols, op_.scales.ld);
      const double scale = static_cast<double>(load_value(op_.type.scale, op_.scales.data, scale_index));
      const std::int64_t k1 = k0 + block < k_count ? k0 + block : k_count;
      for (std::int64_t k = k0; k < k1; ++k) {
        const std::int64_t index =
            batch * op_.data.batch_stride + core::matrix_offset(op_.k_contiguous, row, k, op_.data.ld);
        out[k] = static_cast<double>(table_.value[load_code(op_.type.element, op_.data.data, index)]) * scale;
      }
    }
  }

 private:
  OperandView op_;
  DecodeTable table_;
};

}  // namespace bsgemm::cpu
