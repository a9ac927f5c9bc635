// One group of any description form, resolved to pointers and strides with every default filled.
//
// The three description forms (pointer array, contiguous, masked) all become a ResolvedGroup:
// the CPU reference and back end walk these on the host, and the CUDA pre-kernel builds the same
// records on the device from device-resident descriptions. The code is __host__ __device__ so
// that both sides resolve and check groups with one implementation.
#pragma once

#include <cstdint>

#include "bsgemm/config.hpp"
#include "bsgemm/formats.hpp"
#include "bsgemm/problem.hpp"
#include "bsgemm/recipe.hpp"

namespace bsgemm::core {

// The call-level facts every group shares (no pointers into host memory, so it can be copied to
// the device as is).
struct CallSpec {
  OperandType a_type, b_type;
  Major a_major = Major::k, b_major = Major::k, d_major = Major::n;
  DataType d_type = DataType::bf16;
  bool has_c = false;
  GroupLayout layout = GroupLayout::pointer_array;
};

inline CallSpec make_call_spec(const GemmArguments& args) {
  return CallSpec{args.a_type, args.b_type, args.a_major, args.b_major, args.d_major, args.d_type, args.has_c, args.layout};
}

// A strided matrix (or scale matrix), strides in its own elements.
struct TensorRef {
  const void* data = nullptr;
  std::int64_t ld = 0;
  std::int64_t batch_stride = 0;
};

struct ResolvedGroup {
  std::int32_t m = 0, n = 0, k = 0, l = 1;
  TensorRef a, b, c, d, sfa, sfb;
  float alpha = 1.0f, beta = 0.0f;
};

// Whether the second logical dimension of each matrix is the contiguous one:
// A (M x K) and B (N x K) when k-major, D (M x N) when n-major.
BSGEMM_HD constexpr bool a_k_contiguous(const CallSpec& s) { return s.a_major == Major::k; }
BSGEMM_HD constexpr bool b_k_contiguous(const CallSpec& s) { return s.b_major == Major::k; }
BSGEMM_HD constexpr bool d_n_contiguous(const CallSpec& s) { return s.d_major == Major::n; }

// Offset of element (row, col) of a matrix whose col dimension is contiguous or not.
BSGEMM_HD constexpr std::int64_t matrix_offset(bool col_contiguous, std::int64_t row, std::int64_t col, std::int64_t ld) {
  return col_contiguous ? row * ld + col : col * ld + row;
}

// Dense leading dimension of a rows x cols matrix.
BSGEMM_HD constexpr std::int64_t dense_ld(bool col_contiguous, std::int64_t rows, std::int64_t cols) {
  return col_contiguous ? cols : rows;
}

// Minimum stride between batches: the elements one rows x cols matrix spans with leading dim ld.
BSGEMM_HD constexpr std::int64_t matrix_extent(bool col_contiguous, std::int64_t rows, std::int64_t cols, std::int64_t ld) {
  if (rows <= 0 || cols <= 0) return 0;
  return col_contiguous ? strided_extent(rows, ld, cols) : strided_extent(cols, ld, rows);
}

BSGEMM_HD constexpr std::int64_t or_default(std::int64_t value, std::int64_t fallback) { return value != 0 ? value : fallback; }

// Advances a pointer by `elements` elements of type t (FP4: half bytes; callers keep it even).
BSGEMM_HD inline const void* advance(const void* p, DataType t, std::int64_t elements) {
  return p == nullptr ? nullptr : static_cast<const std::uint8_t*>(p) + bytes_for(t, elements);
}

BSGEMM_HD inline std::int64_t scale_bytes(DataType scale) { return scale == DataType::f32 ? 4 : 1; }

BSGEMM_HD inline const void* advance_scales(const void* p, DataType scale, std::int64_t elements) {
  return p == nullptr ? nullptr : static_cast<const std::uint8_t*>(p) + elements * scale_bytes(scale);
}

// The dense batch stride of a rows x cols matrix with leading dimension ld: whole leading-dimension
// lines, so that it keeps the line alignment (a multiple of 16 bytes when ld is).
BSGEMM_HD constexpr std::int64_t dense_batch_stride(bool col_contiguous, std::int64_t rows, std::int64_t cols, std::int64_t ld) {
  return strided_lines(col_contiguous ? rows : cols, ld);
}

// The same for a scale matrix in `layout`.
BSGEMM_HD constexpr std::int64_t dense_scale_batch_stride(ScaleLayout layout, std::int64_t rows, std::int64_t cols, std::int64_t ld) {
  switch (layout) {
    case ScaleLayout::linear: return strided_lines(rows, ld);
    case ScaleLayout::mn_major: return strided_lines(cols, ld);
    case ScaleLayout::blocked_128x4: return scale_extent(layout, rows, cols, ld);
  }
  return 0;
}

// Fills the dense defaults of every stride of `g`, which holds shapes and pointers already.
BSGEMM_HD inline void fill_defaults(const CallSpec& s, ResolvedGroup& g) {
  const bool ak = a_k_contiguous(s), bk = b_k_contiguous(s), dn = d_n_contiguous(s);
  g.a.ld = or_default(g.a.ld, dense_ld(ak, g.m, g.k));
  g.b.ld = or_default(g.b.ld, dense_ld(bk, g.n, g.k));
  g.d.ld = or_default(g.d.ld, dense_ld(dn, g.m, g.n));
  g.c.ld = or_default(g.c.ld, dense_ld(dn, g.m, g.n));
  g.a.batch_stride = or_default(g.a.batch_stride, dense_batch_stride(ak, g.m, g.k, g.a.ld));
  g.b.batch_stride = or_default(g.b.batch_stride, dense_batch_stride(bk, g.n, g.k, g.b.ld));
  g.d.batch_stride = or_default(g.d.batch_stride, dense_batch_stride(dn, g.m, g.n, g.d.ld));
  g.c.batch_stride = or_default(g.c.batch_stride, dense_batch_stride(dn, g.m, g.n, g.c.ld));

  const std::int64_t a_rows = scale_rows(s.a_type.recipe, Operand::a, g.m);
  const std::int64_t b_rows = scale_rows(s.b_type.recipe, Operand::b, g.n);
  const std::int64_t a_cols = scale_cols(s.a_type.recipe, g.k), b_cols = scale_cols(s.b_type.recipe, g.k);
  g.sfa.ld = or_default(g.sfa.ld, default_scale_ld(s.a_type.scale_layout, a_rows, a_cols));
  g.sfb.ld = or_default(g.sfb.ld, default_scale_ld(s.b_type.scale_layout, b_rows, b_cols));
  g.sfa.batch_stride = or_default(g.sfa.batch_stride, dense_scale_batch_stride(s.a_type.scale_layout, a_rows, a_cols, g.sfa.ld));
  g.sfb.batch_stride = or_default(g.sfb.batch_stride, dense_scale_batch_stride(s.b_type.scale_layout, b_rows, b_cols, g.sfb.ld));
}

// The pointers and strides of a description that names them like GroupProblem and MoeGroups do
// (a, lda, batch_stride_a, ..., sfb_batch_stride), with C dropped unless the call reads it.
template <class Description>
BSGEMM_HD inline void copy_tensors(const CallSpec& s, const Description& p, ResolvedGroup& g) {
  g.a = {p.a, p.lda, p.batch_stride_a};
  g.b = {p.b, p.ldb, p.batch_stride_b};
  g.c = {s.has_c ? p.c : nullptr, p.ldc, p.batch_stride_c};
  g.d = {p.d, p.ldd, p.batch_stride_d};
  g.sfa = {p.sfa, p.sfa_ld, p.sfa_batch_stride};
  g.sfb = {p.sfb, p.sfb_ld, p.sfb_batch_stride};
}

BSGEMM_HD inline ResolvedGroup resolve_pointer_array(const CallSpec& s, const GroupProblem& p) {
  ResolvedGroup g;
  g.m = p.m;
  g.n = p.n;
  g.k = p.k;
  g.l = p.l;
  copy_tensors(s, p, g);
  g.alpha = p.alpha;
  g.beta = s.has_c ? p.beta : 0.0f;
  fill_defaults(s, g);
  return g;
}

// The tensors every MoE group shares, as one group of `rows` rows (the whole A, C, D): what the
// call-level checks of the contiguous and masked forms inspect. B is expert 0.
BSGEMM_HD inline ResolvedGroup resolve_moe_whole(const CallSpec& s, const MoeGroups& p) {
  ResolvedGroup g;
  g.m = static_cast<std::int32_t>(p.rows > 0x7FFFFFFF ? 0x7FFFFFFF : p.rows);
  g.n = p.n;
  g.k = p.k;
  g.l = 1;
  copy_tensors(s, p, g);
  g.alpha = p.alpha_value;
  g.beta = s.has_c ? p.beta_value : 0.0f;
  fill_defaults(s, g);
  return g;
}

// Group g of the contiguous form: rows [begin, end) of A, C, D; `sfa_block_row0` is the first row
// of its block in a blocked_128x4 SFA (sum of round_up(M_h, 128) over earlier groups).
BSGEMM_HD inline ResolvedGroup resolve_contiguous(const CallSpec& s, const MoeGroups& p, int group, std::int64_t begin,
                                                  std::int64_t end, std::int64_t sfa_block_row0, float alpha, float beta) {
  const ResolvedGroup whole = resolve_moe_whole(s, p);
  ResolvedGroup g = whole;
  g.m = static_cast<std::int32_t>(end - begin);
  const bool ak = a_k_contiguous(s), dn = d_n_contiguous(s);
  g.a.data = advance(whole.a.data, s.a_type.element, matrix_offset(ak, begin, 0, whole.a.ld));
  g.b.data = advance(whole.b.data, s.b_type.element, group * whole.b.batch_stride);
  g.d.data = advance(whole.d.data, s.d_type, matrix_offset(dn, begin, 0, whole.d.ld));
  g.c.data = advance(whole.c.data, s.d_type, matrix_offset(dn, begin, 0, whole.c.ld));
  const std::int64_t a_cols = scale_cols(s.a_type.recipe, g.k);
  const std::int64_t sfa_offset = s.a_type.scale_layout == ScaleLayout::blocked_128x4
                                      ? sfa_block_row0 * round_up(a_cols, 4)
                                      : scale_offset(s.a_type.scale_layout, begin, 0, a_cols, whole.sfa.ld);
  g.sfa.data = advance_scales(whole.sfa.data, s.a_type.scale, sfa_offset);
  g.sfb.data = advance_scales(whole.sfb.data, s.b_type.scale, group * whole.sfb.batch_stride);
  g.alpha = alpha;
  g.beta = s.has_c ? beta : 0.0f;
  return g;
}

// Group g of the masked form: rows [0, m) of A[g], C[g], D[g].
BSGEMM_HD inline ResolvedGroup resolve_masked(const CallSpec& s, const MoeGroups& p, int group, std::int32_t m, float alpha,
                                              float beta) {
  const ResolvedGroup whole = resolve_moe_whole(s, p);
  ResolvedGroup g = whole;
  g.m = m;
  g.a.data = advance(whole.a.data, s.a_type.element, group * whole.a.batch_stride);
  g.b.data = advance(whole.b.data, s.b_type.element, group * whole.b.batch_stride);
  g.d.data = advance(whole.d.data, s.d_type, group * whole.d.batch_stride);
  g.c.data = advance(whole.c.data, s.d_type, group * whole.c.batch_stride);
  g.sfa.data = advance_scales(whole.sfa.data, s.a_type.scale, group * whole.sfa.batch_stride);
  g.sfb.data = advance_scales(whole.sfb.data, s.b_type.scale, group * whole.sfb.batch_stride);
  g.alpha = alpha;
  g.beta = s.has_c ? beta : 0.0f;
  return g;
}

// Bounds of group g of the contiguous form from its offsets array (host or device memory).
BSGEMM_HD inline std::int64_t contiguous_offset(const MoeGroups& p, std::int64_t index) {
  return p.offsets_type == IndexType::i32 ? static_cast<const std::int32_t*>(p.offsets)[index]
                                          : static_cast<const std::int64_t*>(p.offsets)[index];
}

BSGEMM_HD inline void contiguous_bounds(const MoeGroups& p, int group, std::int64_t* begin, std::int64_t* end) {
  if (p.offsets_start_with_zero) {
    *begin = contiguous_offset(p, group);
    *end = contiguous_offset(p, group + 1);
  } else {
    *begin = group == 0 ? 0 : contiguous_offset(p, group - 1);
    *end = contiguous_offset(p, group);
  }
}

BSGEMM_HD inline float moe_alpha(const MoeGroups& p, int group) { return p.alpha ? p.alpha[group] : p.alpha_value; }
BSGEMM_HD inline float moe_beta(const MoeGroups& p, int group) { return p.beta ? p.beta[group] : p.beta_value; }

}  // namespace bsgemm::core
