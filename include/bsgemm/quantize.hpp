// CPU quantizers: fp32 or bf16 matrices -> any recipe and scale layout, and back to fp32.
//
// The rules (also in README.md):
//   mxfp8, mxfp4 (OCP MX v1.0, block 32 along K): shared_exp = floor(log2(amax)) - emax_elem
//     (emax_elem: e4m3 8, e5m2 15, e2m1 2), clamped to [-127, 127]; the scale is ue8m0 2^shared_exp;
//     elements = RNE(x / 2^shared_exp), saturated to the element's largest finite value. A block
//     whose amax is 0 gets scale code 0 (2^-127); a block holding NaN gets the NaN scale 0xFF.
//     QuantizeOptions::mx_scale_rounding = ceil gives the "round the scale up" variant instead
//     (2^ceil(log2(amax / max_elem))), which never saturates an element.
//   nvfp4 (two-level, block 16): global fp32 scale s_g = amax_tensor / (448 * 6) (1 when amax is 0);
//     block scale s_b = ue4m3(amax_block / (6 * s_g)) (RNE, saturating); elements =
//     e2m1(x / (decode(s_b) * s_g)) (elements of a block whose s_b decodes to 0 are 0). The
//     tensor is represented by elements * s_b, with s_g returned to be folded into alpha:
//     alpha = alpha_user * s_g(A) * s_g(B).
//   fp8-block128: scale = amax / 448 over the block (amax clamped below at 1e-10), as fp32; or,
//     with ue8m0 scales, 2^ceil(log2(amax / 448)). A is blocked per (row, 128 of K), B per
//     (128 of N, 128 of K). Elements = e4m3(x / scale), RNE, saturating.
// Partial last blocks (K not a multiple of the block) use the elements they have.
#pragma once

#include <cstdint>

#include "bsgemm/formats.hpp"
#include "bsgemm/problem.hpp"
#include "bsgemm/recipe.hpp"
#include "bsgemm/status.hpp"

namespace bsgemm {

struct QuantizeOptions {
  Ue8m0Rounding mx_scale_rounding = Ue8m0Rounding::floor;  // floor (OCP) or ceil; mxfp8 / mxfp4
};

// A quantized operand of `rows` rows (M for A, N for B) and `k` columns, in host memory.
// data: element (r, k) at index r * ld + k (major k) or k * ld + r (major m or n), packed as
// bytes_for(type.element, ...) says; scales: the [scale_rows, scale_cols] matrix of the recipe in
// type.scale_layout with leading dimension scale_ld (0: dense).
struct QuantizedOperand {
  OperandType type;
  Operand which = Operand::a;
  std::int64_t rows = 0, k = 0;
  Major major = Major::k;
  void* data = nullptr;
  std::int64_t ld = 0;
  void* scales = nullptr;
  std::int64_t scale_ld = 0;
};

// Quantizes src (fp32; element (r, k) at src[r * src_ld + k]) into dst. For nvfp4 the global
// scale s_g is written to *global_scale (required); for other recipes *global_scale, when given,
// is set to 1. Errors (bad sizes, null pointers, a layout or major the recipe cannot hold) are
// reported before anything is written.
Status quantize(const float* src, std::int64_t src_ld, const QuantizedOperand& dst, const QuantizeOptions& options = {},
                float* global_scale = nullptr);

// The same from bf16 values (raw bits).
Status quantize_bf16(const std::uint16_t* src, std::int64_t src_ld, const QuantizedOperand& dst,
                     const QuantizeOptions& options = {}, float* global_scale = nullptr);

// Decodes src into fp32, dst[r * dst_ld + k] = element * block scale * global_scale.
Status dequantize(const QuantizedOperand& src, float* dst, std::int64_t dst_ld, float global_scale = 1.0f);

}  // namespace bsgemm
