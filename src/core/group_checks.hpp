// The per-group validity rules, as __host__ __device__ code.
//
// can_implement() runs these on host-resident descriptions; the CUDA pre-kernel runs the very
// same functions on device-resident ones and reports the first failure through the workspace.
// A failure is data (field, violation, value, limit) so that both sides print one message
// (validate.cpp turns it into text).
#pragma once

#include <cstdint>

#include "bsgemm/config.hpp"
#include "src/core/resolved_group.hpp"

namespace bsgemm::core {

enum class Field : std::uint8_t {
  none,
  m, n, k, l,
  a, b, c, d, sfa, sfb,
  lda, ldb, ldc, ldd,
  batch_stride_a, batch_stride_b, batch_stride_c, batch_stride_d,
  sfa_ld, sfb_ld, sfa_batch_stride, sfb_batch_stride,
  num_groups, groups, rows, offsets, masked_m,
};

enum class Violation : std::uint8_t {
  none,
  negative,             // value < 0
  not_positive,         // value < limit (1): n, k, l, num_groups
  null_pointer,
  misaligned_pointer,   // limit = required alignment in bytes
  misaligned_stride,    // limit = required multiple in elements
  smaller_than_extent,  // limit = the extent the stride must cover
  too_large,            // limit = the largest accepted value
  decreasing,           // offsets: value = this group's end, limit = its begin
  beyond_rows,          // offsets / masked_m: value exceeds limit = rows (capacity or max_m)
  too_many_tiles,       // value = the group's output tiles of the chosen kernel, limit = kMaxGroupTiles
};

struct GroupCheck {
  Field field = Field::none;
  Violation violation = Violation::none;
  std::int64_t value = 0;
  std::int64_t limit = 0;
  BSGEMM_HD constexpr bool ok() const { return violation == Violation::none; }
};

// Strides, extents and spans above this many elements are rejected as too large (2^48).
inline constexpr std::int64_t kMaxElements = std::int64_t{1} << 48;

BSGEMM_HD constexpr GroupCheck fail(Field f, Violation v, std::int64_t value, std::int64_t limit = 0) {
  return GroupCheck{f, v, value, limit};
}

// Which fields name a tensor's pointer, leading dimension and batch stride.
struct TensorFields {
  Field pointer, ld, batch_stride;
};

BSGEMM_HD constexpr TensorFields fields_of(Field pointer) {
  switch (pointer) {
    case Field::a: return {Field::a, Field::lda, Field::batch_stride_a};
    case Field::b: return {Field::b, Field::ldb, Field::batch_stride_b};
    case Field::c: return {Field::c, Field::ldc, Field::batch_stride_c};
    case Field::d: return {Field::d, Field::ldd, Field::batch_stride_d};
    case Field::sfa: return {Field::sfa, Field::sfa_ld, Field::sfa_batch_stride};
    default: return {Field::sfb, Field::sfb_ld, Field::sfb_batch_stride};
  }
}

// value > numerator / divisor (divisor > 0), as value * divisor > numerator wherever the product fits in 63
// bits (every realistic shape): the prepare kernel runs these checks one thread per group, and a 64-bit
// division is a long dependent subroutine on the GPU.
BSGEMM_HD constexpr bool exceeds_quotient(std::int64_t value, std::int64_t numerator, std::int64_t divisor) {
  constexpr std::int64_t k2p31 = std::int64_t{1} << 31;
  if (value < k2p31 && divisor < k2p31 && numerator >= 0) return value * divisor > numerator;
  return value > numerator / divisor;
}

// Largest stride accepted so that `batches` batches of `extent` elements stay under kMaxElements.
BSGEMM_HD constexpr bool span_too_large(std::int64_t batches, std::int64_t batch_stride, std::int64_t extent) {
  return batches > 1 && exceeds_quotient(batch_stride, kMaxElements - extent, batches - 1);
}

// A data matrix (A, B, C or D): rows x cols of type t, `col_contiguous` as in matrix_offset(),
// `batches` batches. Pointers and strides must be 16-byte aligned (TMA's rule, kept on every
// back end so that a description valid on one is valid on all).
BSGEMM_HD inline GroupCheck check_matrix(Field pointer, const TensorRef& t, DataType type, bool col_contiguous,
                                         std::int64_t rows, std::int64_t cols, std::int64_t batches) {
  const TensorFields f = fields_of(pointer);
  if (t.data == nullptr) return fail(f.pointer, Violation::null_pointer, 0);
  const auto address = reinterpret_cast<std::uintptr_t>(t.data);
  if (address % 16 != 0) return fail(f.pointer, Violation::misaligned_pointer, static_cast<std::int64_t>(address % 16), 16);
  const std::int64_t stride_multiple = 128 / bits_of(type);  // elements in 16 bytes, a power of two
  const std::int64_t contiguous_extent = col_contiguous ? cols : rows;
  if (t.ld < 0) return fail(f.ld, Violation::negative, t.ld);
  if (t.ld > kMaxElements) return fail(f.ld, Violation::too_large, t.ld, kMaxElements);
  if (t.ld < contiguous_extent) return fail(f.ld, Violation::smaller_than_extent, t.ld, contiguous_extent);
  if ((t.ld & (stride_multiple - 1)) != 0) return fail(f.ld, Violation::misaligned_stride, t.ld, stride_multiple);
  const std::int64_t other_extent = col_contiguous ? rows : cols;
  if (other_extent > 1 && exceeds_quotient(t.ld, kMaxElements - contiguous_extent, other_extent - 1))
    return fail(f.ld, Violation::too_large, t.ld, (kMaxElements - contiguous_extent) / (other_extent - 1));
  if (batches > 1) {
    const std::int64_t extent = matrix_extent(col_contiguous, rows, cols, t.ld);
    if (t.batch_stride < 0) return fail(f.batch_stride, Violation::negative, t.batch_stride);
    if (t.batch_stride < extent) return fail(f.batch_stride, Violation::smaller_than_extent, t.batch_stride, extent);
    if ((t.batch_stride & (stride_multiple - 1)) != 0)
      return fail(f.batch_stride, Violation::misaligned_stride, t.batch_stride, stride_multiple);
    if (span_too_large(batches, t.batch_stride, extent))
      return fail(f.batch_stride, Violation::too_large, t.batch_stride, (kMaxElements - extent) / (batches - 1));
  }
  return {};
}

// A scale matrix of scale_rows x scale_cols in `layout`, elements of type `scale`.
BSGEMM_HD inline GroupCheck check_scales(Field pointer, const TensorRef& t, DataType scale, ScaleLayout layout,
                                         std::int64_t rows, std::int64_t cols, std::int64_t batches) {
  const TensorFields f = fields_of(pointer);
  if (t.data == nullptr) return fail(f.pointer, Violation::null_pointer, 0);
  const auto address = reinterpret_cast<std::uintptr_t>(t.data);
  const std::int64_t align = scale_bytes(scale);  // 1 or 4
  const auto misalignment = static_cast<std::int64_t>(address & static_cast<std::uintptr_t>(align - 1));
  if (misalignment != 0) return fail(f.pointer, Violation::misaligned_pointer, misalignment, align);
  if (layout != ScaleLayout::blocked_128x4) {
    const std::int64_t minimum = layout == ScaleLayout::linear ? cols : rows;
    if (t.ld < 0) return fail(f.ld, Violation::negative, t.ld);
    if (t.ld > kMaxElements) return fail(f.ld, Violation::too_large, t.ld, kMaxElements);
    if (t.ld < minimum) return fail(f.ld, Violation::smaller_than_extent, t.ld, minimum);
    const std::int64_t lines = layout == ScaleLayout::linear ? rows : cols;
    if (lines > 1 && exceeds_quotient(t.ld, kMaxElements - minimum, lines - 1))
      return fail(f.ld, Violation::too_large, t.ld, (kMaxElements - minimum) / (lines - 1));
  }
  if (batches > 1) {
    const std::int64_t extent = scale_extent(layout, rows, cols, t.ld);
    if (t.batch_stride < 0) return fail(f.batch_stride, Violation::negative, t.batch_stride);
    if (t.batch_stride < extent) return fail(f.batch_stride, Violation::smaller_than_extent, t.batch_stride, extent);
    if (span_too_large(batches, t.batch_stride, extent))
      return fail(f.batch_stride, Violation::too_large, t.batch_stride, (kMaxElements - extent) / (batches - 1));
  }
  return {};
}

// Shapes first, then A, B, C, D, SFA, SFB in that order: the first violation is reported.
// `a_batches` etc. let the MoE forms say how many batches each tensor spans.
struct BatchCounts {
  std::int64_t a = 1, b = 1, cd = 1;
};

BSGEMM_HD inline GroupCheck check_tensors(const CallSpec& s, const ResolvedGroup& g, BatchCounts batches) {
  GroupCheck r;
  if (!(r = check_matrix(Field::a, g.a, s.a_type.element, a_k_contiguous(s), g.m, g.k, batches.a)).ok()) return r;
  if (!(r = check_matrix(Field::b, g.b, s.b_type.element, b_k_contiguous(s), g.n, g.k, batches.b)).ok()) return r;
  if (s.has_c && !(r = check_matrix(Field::c, g.c, s.d_type, d_n_contiguous(s), g.m, g.n, batches.cd)).ok()) return r;
  if (!(r = check_matrix(Field::d, g.d, s.d_type, d_n_contiguous(s), g.m, g.n, batches.cd)).ok()) return r;
  const std::int64_t a_rows = scale_rows(s.a_type.recipe, Operand::a, g.m), a_cols = scale_cols(s.a_type.recipe, g.k);
  const std::int64_t b_rows = scale_rows(s.b_type.recipe, Operand::b, g.n), b_cols = scale_cols(s.b_type.recipe, g.k);
  if (!(r = check_scales(Field::sfa, g.sfa, s.a_type.scale, s.a_type.scale_layout, a_rows, a_cols, batches.a)).ok()) return r;
  if (!(r = check_scales(Field::sfb, g.sfb, s.b_type.scale, s.b_type.scale_layout, b_rows, b_cols, batches.b)).ok()) return r;
  return {};
}

// One group of the pointer-array form. M = 0 is a valid empty group: nothing of it is read or
// written, so its pointers and strides are not inspected.
BSGEMM_HD inline GroupCheck check_group(const CallSpec& s, const ResolvedGroup& g) {
  if (g.m < 0) return fail(Field::m, Violation::negative, g.m);
  if (g.n < 1) return fail(Field::n, Violation::not_positive, g.n, 1);
  if (g.k < 1) return fail(Field::k, Violation::not_positive, g.k, 1);
  if (g.l < 1) return fail(Field::l, Violation::not_positive, g.l, 1);
  if (g.m == 0) return {};
  return check_tensors(s, g, BatchCounts{g.l, g.l, g.l});
}

// The tensors every group of a MoE form shares (group = -1 in messages). `whole` is
// resolve_moe_whole(); the masked form steps A, C, D and SFA by group, both forms step B and SFB.
BSGEMM_HD inline GroupCheck check_moe(const CallSpec& s, const MoeGroups& p, const ResolvedGroup& whole) {
  if (p.num_groups < 1) return fail(Field::num_groups, Violation::not_positive, p.num_groups, 1);
  if (p.n < 1) return fail(Field::n, Violation::not_positive, p.n, 1);
  if (p.k < 1) return fail(Field::k, Violation::not_positive, p.k, 1);
  if (p.rows < 0) return fail(Field::rows, Violation::negative, p.rows);
  if (p.rows > 0x7FFFFFFF) return fail(Field::rows, Violation::too_large, p.rows, 0x7FFFFFFF);
  if (s.layout == GroupLayout::contiguous && p.offsets == nullptr) return fail(Field::offsets, Violation::null_pointer, 0);
  if (s.layout == GroupLayout::masked && p.masked_m == nullptr) return fail(Field::masked_m, Violation::null_pointer, 0);
  if (p.rows == 0) return {};
  const std::int64_t groups = p.num_groups;
  const BatchCounts batches = s.layout == GroupLayout::masked ? BatchCounts{groups, groups, groups} : BatchCounts{1, groups, 1};
  return check_tensors(s, whole, batches);
}

// The bounds of group g of the contiguous form.
BSGEMM_HD inline GroupCheck check_contiguous_bounds(std::int64_t begin, std::int64_t end, std::int64_t rows) {
  if (begin < 0) return fail(Field::offsets, Violation::negative, begin);
  if (end < begin) return fail(Field::offsets, Violation::decreasing, end, begin);
  if (end > rows) return fail(Field::offsets, Violation::beyond_rows, end, rows);
  return {};
}

// The valid rows of group g of the masked form.
BSGEMM_HD inline GroupCheck check_masked_rows(std::int64_t m, std::int64_t max_m) {
  if (m < 0) return fail(Field::masked_m, Violation::negative, m);
  if (m > max_m) return fail(Field::masked_m, Violation::beyond_rows, m, max_m);
  return {};
}

}  // namespace bsgemm::core
