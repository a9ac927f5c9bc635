// CPU quantizers: fp32 or bf16 matrices -> any recipe and scale layout, and back to fp32.
//
// The rules (README.md refers here for them):
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
//
// Precisely, where the rules above leave room:
//   - Arithmetic is fp32 exactly as written (s_g = amax / 2688.0f, s_b = ue4m3(amax_block /
//     (6.0f * s_g)), x / (decode(s_b) * s_g), x / scale for fp32 scales), except the power-of-two
//     rules, which are exact: floor and ceil of log2 are taken of the exact quotient, and dividing
//     by a power of two is exact. "s_g is 1 when amax is 0" also covers an amax so small (below
//     about 4e-42) that amax / 2688 underflows to 0. The tensor amax of nvfp4 is over finite values.
//     nvfp4 elements are 0 wherever decode(s_b) * s_g is 0 (s_b decodes to 0, or the product
//     underflows), instead of x / 0.
//   - Non-finite input: a block holding NaN or +-inf gets a NaN scale (ue8m0 0xFF, ue4m3 0x7F, fp32
//     NaN), so every value it decodes to is NaN, and its elements are written as 0.
//   - Only the elements [rows, k] are written: bytes between the end of a row and the next
//     leading-dimension step are left as they are (for FP4, a half-used byte keeps its other
//     nibble). The blocked_128x4 layout's padding rows and columns (up to 128 rows, 4 columns) are
//     written as zeros, so the buffer can be handed to a kernel that reads whole atoms.
//   - quantize() is single-threaded, with no allocation proportional to the data. To use several
//     threads, quantize row ranges in separate calls (offsetting data and scales; a range must start
//     on a 128-row boundary for fp8-block128 B and the blocked layout, and on an even element index
//     for FP4), and for nvfp4 pass the tensor's s_g in QuantizeOptions::nvfp4_global_scale (see
//     nvfp4_global_scale()) so that every range uses the same one.
#pragma once

#include <cstdint>

#include "bsgemm/formats.hpp"
#include "bsgemm/problem.hpp"
#include "bsgemm/recipe.hpp"
#include "bsgemm/status.hpp"

namespace bsgemm {

struct QuantizeOptions {
  Ue8m0Rounding mx_scale_rounding = Ue8m0Rounding::floor;  // floor (OCP) or ceil; mxfp8 / mxfp4
  // nvfp4 only: when > 0, the global scale s_g to use instead of the one computed from this
  // call's data (for quantizing one tensor in row ranges). Must be finite and not negative.
  float nvfp4_global_scale = 0.0f;
};

// The nvfp4 global scale s_g of a tensor whose largest finite |x| is `amax`: amax / (448 * 6), or
// 1 when that is 0.
inline float nvfp4_global_scale(float amax) {
  const float s = amax / (448.0f * 6.0f);
  return s > 0.0f ? s : 1.0f;
}

// A quantized operand of `rows` rows (M for A, N for B) and `k` columns, in host memory.
// data: element (r, k) at index r * ld + k (major k) or k * ld + r (major m for A, n for B),
// packed as bytes_for(type.element, ...) says; ld = 0 means dense (k, or rows). FP4 elements must
// be k-major. scales: the [scale_rows, scale_cols] matrix of the recipe in type.scale_layout with
// leading dimension scale_ld (0: dense; ignored by blocked_128x4), f32 scales stored as native
// floats (no alignment needed). rows and k must be positive.
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

// Quantizes src (fp32; element (r, k) at src[r * src_ld + k]; src_ld = 0 means k) into dst. For
// nvfp4 the global scale s_g is written to *global_scale (required); for other recipes
// *global_scale, when given, is set to 1. Errors (bad sizes, null pointers, a layout or major the
// recipe cannot hold) are reported before anything is written.
Status quantize(const float* src, std::int64_t src_ld, const QuantizedOperand& dst, const QuantizeOptions& options = {},
                float* global_scale = nullptr);

// The same from bf16 values (raw bits).
Status quantize_bf16(const std::uint16_t* src, std::int64_t src_ld, const QuantizedOperand& dst,
                     const QuantizeOptions& options = {}, float* global_scale = nullptr);

// Decodes src into fp32, dst[r * dst_ld + k] = (element * block scale) * global_scale, each product
// rounded to fp32 (dst_ld = 0 means k). Checks src as quantize() checks dst.
Status dequantize(const QuantizedOperand& src, float* dst, std::int64_t dst_ld, float global_scale = 1.0f);

}  // namespace bsgemm
