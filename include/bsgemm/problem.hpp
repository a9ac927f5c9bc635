// How a grouped block-scaled GEMM is described: the three forms of design.md section 2.
//
// For every group g and batch l < L_g:
//     D_g[l] = alpha_g * sum_k decode(A_g[l][m, k]) * decode(B_g[l][n, k]) + beta_g * C_g[l]
// where decode() applies the operand's recipe (element * block scale). C is read only when
// GemmArguments::has_c is set; C has D's type and major.
//
// Strides are in elements of the tensor they describe (an FP4 element is half a byte); a stride
// of 0 means "dense": a leading dimension defaults to the extent of the contiguous dimension, a batch
// stride to the whole leading-dimension lines of one batch (rows * ld for a k-major A). Every leading dimension and
// batch stride of A, B, C, D must be a multiple of 16 bytes and every such pointer 16-byte
// aligned (what TMA needs); scale pointers need their element's natural alignment.
#pragma once

#include <cstdint>
#include <string_view>

#include "bsgemm/formats.hpp"
#include "bsgemm/recipe.hpp"

namespace bsgemm {

// The contiguous dimension of a matrix: A is M x K (m or k), B is N x K (n or k), C/D are M x N (m or n).
enum class Major : std::uint8_t { m, n, k };

enum class GroupLayout : std::uint8_t {
  pointer_array,  // per-group shapes, pointers and strides (the reference system's form)
  contiguous,     // MoE prefill: A [sum M_g, K], B [G, N, K], D [sum M_g, N], group bounds in offsets
  masked,         // MoE decode:  A [G, max_m, K], B [G, N, K], D [G, max_m, N], valid rows in masked_m
};

// Where the group descriptions (the GroupProblem array, offsets, masked_m, alpha/beta arrays) live.
// With `device` no host synchronisation is needed and the call is CUDA-graph capturable; the
// descriptions are then validated on the device (see device_status() in gemm.hpp).
enum class MemoryLocation : std::uint8_t { host, device };

enum class IndexType : std::uint8_t { i32, i64 };

const char* to_string(Major m);
const char* to_string(GroupLayout l);
bool parse(std::string_view text, Major* out);
bool parse(std::string_view text, GroupLayout* out);  // "ptr-array", "contiguous", "masked"

// One group of the pointer-array form.
//   A: M x K, k-major: a[l*batch_stride_a + m*lda + k];   m-major: a[l*batch_stride_a + k*lda + m]
//   B: N x K, k-major: b[l*batch_stride_b + n*ldb + k];   n-major: b[l*batch_stride_b + k*ldb + n]
//   D: M x N, n-major: d[l*batch_stride_d + m*ldd + n];   m-major: d[l*batch_stride_d + n*ldd + m]
//   SFA: scale matrix [M, ceil(K / block)], SFB: [scale_rows(N), ceil(K / block)], in the
//   operand type's scale layout, batch l at sfa + l * sfa_batch_stride.
struct GroupProblem {
  std::int32_t m = 0, n = 0, k = 0, l = 1;
  const void* a = nullptr;
  const void* b = nullptr;
  const void* c = nullptr;
  void* d = nullptr;
  const void* sfa = nullptr;
  const void* sfb = nullptr;
  std::int64_t lda = 0, ldb = 0, ldc = 0, ldd = 0;
  std::int64_t batch_stride_a = 0, batch_stride_b = 0, batch_stride_c = 0, batch_stride_d = 0;
  std::int64_t sfa_ld = 0, sfb_ld = 0;
  std::int64_t sfa_batch_stride = 0, sfb_batch_stride = 0;
  float alpha = 1.0f, beta = 0.0f;
};

// The MoE forms (contiguous and masked): every group shares N and K, and B holds one N x K
// matrix per group (expert). `rows` is the row count of A, C and D: for the contiguous form the
// capacity sum of all M_g may not exceed; for the masked form max_m, the rows of each group.
//
// Contiguous: group g owns rows [begin_g, end_g) of A, C, D and of SFA. `offsets` holds either G
// cumulative end rows (PyTorch's `offs`), or G + 1 prefix sums starting at 0
// (`offsets_start_with_zero`), as int32 or int64. Any M_g >= 0 is allowed; no padding of A or D.
// With the blocked_128x4 scale layout, each group's SFA block starts at a 128-row boundary: group
// g's scales begin at row sum_{h<g} round_up(M_h, 128) of the blocked matrix (PyTorch's
// convention), so SFA must hold sum_g round_up(M_g, 128) rows: contiguous_blocked_sfa_rows() is a
// size that fits every split of `rows` into the groups.
//
// Masked: group g owns rows [0, masked_m[g]) of A[g], C[g], D[g] (batch strides *_a, *_c, *_d,
// sfa_batch_stride); rows beyond masked_m[g] are neither read into D nor written.
struct MoeGroups {
  std::int32_t num_groups = 0;
  std::int32_t n = 0, k = 0;
  std::int64_t rows = 0;

  const void* offsets = nullptr;  // contiguous only
  IndexType offsets_type = IndexType::i32;
  bool offsets_start_with_zero = false;
  const std::int32_t* masked_m = nullptr;  // masked only

  const void* a = nullptr;
  const void* b = nullptr;
  const void* c = nullptr;
  void* d = nullptr;
  const void* sfa = nullptr;
  const void* sfb = nullptr;
  std::int64_t lda = 0, ldb = 0, ldc = 0, ldd = 0;
  std::int64_t batch_stride_a = 0, batch_stride_b = 0, batch_stride_c = 0, batch_stride_d = 0;
  std::int64_t sfa_ld = 0, sfb_ld = 0;
  std::int64_t sfa_batch_stride = 0, sfb_batch_stride = 0;

  const float* alpha = nullptr;  // per-group array, or nullptr for alpha_value in every group
  const float* beta = nullptr;   // per-group array, or nullptr for beta_value in every group
  float alpha_value = 1.0f;
  float beta_value = 0.0f;
};

// Rows a blocked_128x4 SFA of the contiguous form needs for any group sizes that sum to at most
// `rows`: sum_g round_up(M_g, 128) <= rows + 127 * num_groups, rounded up to whole 128-row atoms.
constexpr std::int64_t contiguous_blocked_sfa_rows(std::int64_t rows, std::int32_t num_groups) {
  return round_up(rows + 127 * static_cast<std::int64_t>(num_groups), 128);
}

// Everything a call needs (the user's "Arguments"). Data pointers are host memory for the CPU
// back end and device memory for the CUDA back end.
struct GemmArguments {
  OperandType a_type = make_operand_type(Recipe::nvfp4);
  OperandType b_type = make_operand_type(Recipe::nvfp4);
  Major a_major = Major::k;
  Major b_major = Major::k;
  Major d_major = Major::n;
  DataType d_type = DataType::bf16;  // f32, f16 or bf16; C has the same type
  bool has_c = false;

  GroupLayout layout = GroupLayout::pointer_array;
  MemoryLocation descriptions = MemoryLocation::host;

  std::int32_t num_groups = 0;           // pointer_array
  const GroupProblem* groups = nullptr;  // pointer_array: num_groups entries
  MoeGroups moe;                         // contiguous and masked

  // Typical rows per group, used only to pick a tile shape when the shapes live on the device
  // (0: the planner assumes large groups). Never changes results.
  std::int32_t expected_m = 0;
};

// Number of groups of any layout.
inline std::int32_t group_count(const GemmArguments& args) {
  return args.layout == GroupLayout::pointer_array ? args.num_groups : args.moe.num_groups;
}

}  // namespace bsgemm
