// CPU quantizers. include/bsgemm/quantize.hpp states the rules; this file follows them exactly.
//
// Everything is validated first into a Plan, so that an error leaves every buffer untouched. The
// operand is then walked in panels of rows (1 row for k-major data, 64 rows for the other major,
// 128 rows for fp8-block128 B, whose scale blocks are 128 x 128). For each panel and each block of
// K: one pass over the source finds the amax of every scale block (from the fp32 bit patterns:
// the largest |x| bit pattern is the largest |x|, and anything at or above the infinity pattern
// means the block holds inf or NaN), the scales are derived and stored, and a second pass over
// the same, cache-resident values encodes the elements into a small tile. The tile is written out
// row by row for k-major data (packing FP4 two per byte, low nibble first) or column by column for
// the other major, so every write is a run of contiguous bytes.
#include "bsgemm/quantize.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "src/core/group_checks.hpp"

namespace bsgemm {
namespace {

constexpr std::uint32_t kAbsMask = 0x7FFFFFFFu;
// The amax loops compare |x| bit patterns as signed 32-bit integers (they are non-negative): x86's
// baseline SSE2 has a signed 32-bit compare but no unsigned one, so this is what vectorizes.
constexpr std::int32_t kInfBitsSigned = 0x7F800000;

// The amax of an fp8-block128 block is clamped below at this (the DeepSeek rule), so an all-zero
// block gets a tiny but finite scale.
constexpr float kBlock128MinAmax = 1e-10f;

// ---- source values ------------------------------------------------------------------------------

inline std::uint32_t source_bits(float x) { return detail::float_to_bits(x); }
inline std::uint32_t source_bits(std::uint16_t bf16) { return static_cast<std::uint32_t>(bf16) << 16; }
inline std::int32_t abs_bits(std::uint32_t bits) { return static_cast<std::int32_t>(bits & kAbsMask); }
inline float source_value(float x) { return x; }
inline float source_value(std::uint16_t bf16) { return decode_bf16(bf16); }

// ---- exact power-of-two arithmetic --------------------------------------------------------------

// 2^e as fp32, exactly, for e in [-149, 127].
inline float exp2_exact(int e) {
  if (e >= -126) return detail::bits_to_float(static_cast<std::uint32_t>(e + 127) << 23);
  return detail::bits_to_float(1u << (e + 149));
}

// ceil(log2(amax / max_elem)) of the exact quotient, for finite amax > 0: the smallest j with
// max_elem * 2^j >= amax. With amax = fa * 2^ea and max_elem = fm * 2^em (fa, fm in [1, 2)),
// j = ea - em works when fm >= fa and j = ea - em + 1 otherwise (2 * fm > fa always), and the
// smaller one never could (2^(ea-1) * fm < 2^ea * fa). Every max_elem * 2^j is exact in double, so
// the one comparison is exact, where an fp32 division could round the quotient.
int ceil_log2_ratio(float amax, float max_elem) {
  const double a = amax, m = max_elem;
  const int j = std::ilogb(a) - std::ilogb(m);
  return std::ldexp(m, j) >= a ? j : j + 1;
}

// emax_elem of the OCP MX rule: the exponent of the element format's largest power of two.
int mx_emax(DataType element) {
  switch (element) {
    case DataType::e4m3: return 8;
    case DataType::e5m2: return 15;
    default: return 2;  // e2m1
  }
}

// ---- validation ---------------------------------------------------------------------------------

Status invalid(const char* field, const std::string& explanation) {
  return Status::error(StatusCode::invalid_argument, -1, field, explanation);
}

std::string str(std::int64_t v) { return std::to_string(v); }

// Everything the walks need, resolved from a validated QuantizedOperand.
struct Plan {
  Recipe recipe = Recipe::mxfp8;
  DataType element = DataType::e4m3;
  DataType scale = DataType::ue8m0;
  ScaleLayout layout = ScaleLayout::linear;
  bool k_major = true;
  std::int64_t rows = 0, k = 0, ld = 0;
  std::int64_t block = 32;          // along K
  std::int64_t rows_per_scale = 1;  // 128 for fp8-block128 B
  std::int64_t scale_rows = 0, scale_cols = 0, scale_ld = 0;
  std::uint8_t* data = nullptr;
  std::uint8_t* scales = nullptr;

  std::int64_t scale_index(std::int64_t scale_row, std::int64_t scale_col) const {
    return scale_offset(layout, scale_row, scale_col, scale_cols, scale_ld);
  }
  std::int64_t element_index(std::int64_t row, std::int64_t col) const {
    return k_major ? row * ld + col : col * ld + row;
  }
};

// The element and scale types each recipe accepts (recipe.hpp).
Status check_types(const OperandType& type) {
  const DataType e = type.element, s = type.scale;
  const std::string recipe = to_string(type.recipe);
  if (type.recipe > Recipe::fp8_block128) return invalid("type.recipe", "is not a known recipe");
  if (!element_allowed(type.recipe, e))
    return invalid("type.element", recipe + " elements are " + allowed_elements(type.recipe) + ", not " + to_string(e));
  if (!scale_allowed(type.recipe, s))
    return invalid("type.scale", recipe + " scales are " + allowed_scales(type.recipe) + ", not " + to_string(s));
  return Status::success();
}

// A leading dimension `ld` (0: `extent`) of a matrix whose rows are `extent` long and which has
// `count` of them; `*resolved` receives the value to use.
Status check_ld(const char* field, std::int64_t ld, std::int64_t extent, std::int64_t count, const char* extent_name,
                std::int64_t* resolved) {
  if (ld < 0) return invalid(field, str(ld) + " is negative");
  if (ld == 0) ld = extent;
  if (ld < extent) return invalid(field, str(ld) + " is smaller than " + extent_name + " = " + str(extent));
  if (count > 1 && ld > (core::kMaxElements - extent) / (count - 1))
    return invalid(field, str(ld) + " is too large: the matrix would span more than 2^48 elements");
  *resolved = ld;
  return Status::success();
}

Status make_plan(const QuantizedOperand& q, Plan* plan) {
  if (q.rows <= 0) return invalid("rows", str(q.rows) + " is not positive");
  if (q.k <= 0) return invalid("k", str(q.k) + " is not positive");
  if (q.rows > core::kMaxElements) return invalid("rows", str(q.rows) + " is larger than 2^48");
  if (q.k > core::kMaxElements) return invalid("k", str(q.k) + " is larger than 2^48");
  if (Status s = check_types(q.type); !s.ok()) return s;
  const ScaleLayout layout = q.type.scale_layout;
  if (layout != ScaleLayout::linear && layout != ScaleLayout::blocked_128x4 && layout != ScaleLayout::mn_major)
    return invalid("type.scale_layout", "is not a known scale layout");
  if (q.which != Operand::a && q.which != Operand::b) return invalid("which", "is neither Operand::a nor Operand::b");
  const Major other_major = q.which == Operand::a ? Major::m : Major::n;
  if (q.major != Major::k && q.major != other_major)
    return invalid("major", std::string(q.which == Operand::a ? "A is m- or k-major" : "B is n- or k-major") +
                                ", not " + to_string(q.major));
  if (q.type.element == DataType::e2m1 && q.major != Major::k)
    return invalid("major", "FP4 (e2m1) elements must be k-major, two per byte along K");
  if (q.data == nullptr) return invalid("data", "is null");
  if (q.scales == nullptr) return invalid("scales", "is null");

  Plan p;
  p.recipe = q.type.recipe;
  p.element = q.type.element;
  p.scale = q.type.scale;
  p.layout = layout;
  p.k_major = q.major == Major::k;
  p.rows = q.rows;
  p.k = q.k;
  if (Status s =
          p.k_major ? check_ld("ld", q.ld, q.k, q.rows, "k", &p.ld) : check_ld("ld", q.ld, q.rows, q.k, "rows", &p.ld);
      !s.ok())
    return s;
  p.block = block_k(p.recipe);
  p.rows_per_scale = p.recipe == Recipe::fp8_block128 && q.which == Operand::b ? 128 : 1;
  p.scale_rows = scale_rows(p.recipe, q.which, q.rows);
  p.scale_cols = scale_cols(p.recipe, q.k);
  if (layout == ScaleLayout::linear) {
    if (Status s = check_ld("scale_ld", q.scale_ld, p.scale_cols, p.scale_rows, "the scale columns", &p.scale_ld);
        !s.ok())
      return s;
  } else if (layout == ScaleLayout::mn_major) {
    if (Status s = check_ld("scale_ld", q.scale_ld, p.scale_rows, p.scale_cols, "the scale rows", &p.scale_ld); !s.ok())
      return s;
  }
  p.data = static_cast<std::uint8_t*>(q.data);
  p.scales = static_cast<std::uint8_t*>(q.scales);
  *plan = p;
  return Status::success();
}

// ---- element encoding ---------------------------------------------------------------------------

// Round to nearest even, saturating, of a finite fp32 value into a format with E exponent bits,
// M mantissa bits and bias B: the same code as encode_e4m3 / encode_e5m2 (Overflow::saturate) and
// encode_e2m1 give a finite input, computed without branches so that the compiler vectorizes the
// loop (the codecs' general path costs several times more per element). The quantizers only
// encode finite values: blocks holding inf or NaN are written as zeros without encoding.
//   - saturation: |x| is clamped to the largest finite value first (it is representable, so
//     rounding never goes past it);
//   - normal results: rounding the fp32 bit pattern to M mantissa bits (add half an ulp minus one,
//     plus the kept lowest bit, for ties to even) and rebiasing the exponent; a carry out of the
//     mantissa correctly bumps the exponent;
//   - subnormal results (|x| below 2^(1 - B)): adding 2^(24 - B - M), whose fp32 ulp is the
//     format's subnormal step 2^(1 - B - M), makes the FPU round |x| to a multiple of that step;
//     the sum's bit pattern minus the constant's counts the steps (the count 2^M is the smallest
//     normal code, so the two ranges meet seamlessly).
template <int E, int M, int B>
inline std::uint8_t encode_finite(float x, std::uint32_t max_bits) {
  constexpr int kDropped = 23 - M;
  constexpr std::uint32_t kMinNormalBits = static_cast<std::uint32_t>(1 - B + 127) << 23;
  constexpr std::uint32_t kRebias = static_cast<std::uint32_t>(127 - B) << M;
  constexpr std::uint32_t kMagicBits = static_cast<std::uint32_t>(24 - B - M + 127) << 23;
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(x);
  const std::uint32_t mag = std::min(bits & kAbsMask, max_bits);
  const std::uint32_t normal = ((mag + ((1u << (kDropped - 1)) - 1u) + ((mag >> kDropped) & 1u)) >> kDropped) - kRebias;
  const float sum = std::bit_cast<float>(mag) + std::bit_cast<float>(kMagicBits);
  const std::uint32_t subnormal = std::bit_cast<std::uint32_t>(sum) - kMagicBits;
  const std::uint32_t sign = (bits >> 31) << (E + M);
  // A mask rather than ?: so that both results are always computed: GCC will not speculate the
  // float addition into a select (it might trap), and a branch would stop vectorization.
  const std::uint32_t take_subnormal = 0u - static_cast<std::uint32_t>(mag < kMinNormalBits);
  return static_cast<std::uint8_t>(sign | (subnormal & take_subnormal) | (normal & ~take_subnormal));
}

template <DataType T>
inline std::uint8_t encode_element(float x) {
  constexpr std::uint32_t kMaxBits = std::bit_cast<std::uint32_t>(max_finite(T));
  if constexpr (T == DataType::e4m3) return encode_finite<4, 3, 7>(x, kMaxBits);
  if constexpr (T == DataType::e5m2) return encode_finite<5, 2, 15>(x, kMaxBits);
  if constexpr (T == DataType::e2m1) return encode_finite<2, 1, 1>(x, kMaxBits);
}

// Encodes n source values, each divided by (kDivide) or multiplied by `factor` first.
template <DataType T, bool kDivide, typename Src>
void encode_run(const Src* source, std::int64_t n, float factor, std::uint8_t* codes) {
  for (std::int64_t i = 0; i < n; ++i) {
    const float x = source_value(source[i]);
    codes[i] = encode_element<T>(kDivide ? x / factor : x * factor);
  }
}

template <typename Src>
using EncodeRun = void (*)(const Src*, std::int64_t, float, std::uint8_t*);

// The scale of one block: what is stored, and what the elements are divided or multiplied by.
struct BlockScale {
  std::uint8_t code = 0;  // ue8m0 / ue4m3 scales
  float value = 0;        // f32 scales
  float factor = 1;       // element = encode(x * factor), or encode(x / factor) for divide recipes
  bool zero_elements = false;
};

// ---- quantize -----------------------------------------------------------------------------------

template <typename Src>
class Quantizer {
 public:
  Quantizer(const Plan& plan, const Src* src, std::int64_t src_ld, Ue8m0Rounding mx_rounding, float global_scale)
      : plan_(plan), src_(src), src_ld_(src_ld), mx_rounding_(mx_rounding), global_scale_(global_scale) {
    // fp32-scaled recipes divide by their scale as the rules say; power-of-two scales multiply by
    // the exact reciprocal, which gives the same result.
    const bool divide =
        plan.recipe == Recipe::nvfp4 || (plan.recipe == Recipe::fp8_block128 && plan.scale == DataType::f32);
    switch (plan.element) {
      case DataType::e4m3:
        encode_ = divide ? &encode_run<DataType::e4m3, true, Src> : &encode_run<DataType::e4m3, false, Src>;
        break;
      case DataType::e5m2: encode_ = &encode_run<DataType::e5m2, false, Src>; break;
      default:
        encode_ = divide ? &encode_run<DataType::e2m1, true, Src> : &encode_run<DataType::e2m1, false, Src>;
        break;
    }
  }

  void run() {
    const std::int64_t panel = plan_.rows_per_scale > 1 ? plan_.rows_per_scale : (plan_.k_major ? 1 : 64);
    tile_.assign(static_cast<std::size_t>(panel * plan_.block), 0);
    for (std::int64_t r0 = 0; r0 < plan_.rows; r0 += panel) {
      const std::int64_t panel_rows = std::min(panel, plan_.rows - r0);
      for (std::int64_t col = 0; col < plan_.scale_cols; ++col) {
        const std::int64_t k0 = col * plan_.block;
        const std::int64_t width = std::min(plan_.block, plan_.k - k0);
        if (plan_.rows_per_scale > 1) {
          std::int32_t amax = 0;
          for (std::int64_t i = 0; i < panel_rows; ++i) amax = std::max(amax, row_amax(r0 + i, k0, width));
          const BlockScale scale = make_scale(amax);
          store_scale(r0 / plan_.rows_per_scale, col, scale);
          for (std::int64_t i = 0; i < panel_rows; ++i) encode_row(r0 + i, k0, width, scale, &tile_[i * plan_.block]);
        } else {
          for (std::int64_t i = 0; i < panel_rows; ++i) {
            const BlockScale scale = make_scale(row_amax(r0 + i, k0, width));
            store_scale(r0 + i, col, scale);
            encode_row(r0 + i, k0, width, scale, &tile_[i * plan_.block]);
          }
        }
        write_tile(r0, panel_rows, k0, width);
      }
    }
    if (plan_.layout == ScaleLayout::blocked_128x4) zero_blocked_padding();
  }

 private:
  const Plan& plan_;
  const Src* src_;
  std::int64_t src_ld_;
  Ue8m0Rounding mx_rounding_;
  float global_scale_;
  EncodeRun<Src> encode_ = nullptr;
  std::vector<std::uint8_t> tile_;  // codes of one panel x one block, row-major, row stride plan_.block

  // The largest |x| bit pattern of src[row, k0 .. k0 + width).
  std::int32_t row_amax(std::int64_t row, std::int64_t k0, std::int64_t width) const {
    const Src* p = src_ + row * src_ld_ + k0;
    std::int32_t amax = 0;
    for (std::int64_t i = 0; i < width; ++i) amax = std::max(amax, abs_bits(source_bits(p[i])));
    return amax;
  }

  BlockScale make_scale(std::int32_t amax_bits) const {
    BlockScale s;
    if (amax_bits >= kInfBitsSigned) {  // inf or NaN in the block
      s.code = plan_.scale == DataType::ue4m3 ? 0x7Fu : 0xFFu;
      s.value = std::numeric_limits<float>::quiet_NaN();
      s.zero_elements = true;
      return s;
    }
    const float amax = detail::bits_to_float(static_cast<std::uint32_t>(amax_bits));
    switch (plan_.recipe) {
      case Recipe::mxfp8:
      case Recipe::mxfp4: {
        int code;
        if (amax == 0.0f) {
          code = 0;
        } else if (mx_rounding_ == Ue8m0Rounding::ceil) {
          code = std::clamp(ceil_log2_ratio(amax, max_finite(plan_.element)), -127, 127) + 127;
        } else {
          // encode_ue8m0 gives floor(log2(amax)) + 127 clamped to [0, 254]; subtracting emax and
          // clamping at 0 is the rule's clamp to -127 (the top end cannot be reached from fp32).
          code = std::max(0, static_cast<int>(encode_ue8m0(amax, Ue8m0Rounding::floor)) - mx_emax(plan_.element));
        }
        s.code = static_cast<std::uint8_t>(code);
        s.factor = exp2_exact(127 - code);
        return s;
      }
      case Recipe::nvfp4: {
        s.code = encode_ue4m3(amax / (6.0f * global_scale_));
        s.factor = decode_ue4m3(s.code) * global_scale_;
        s.zero_elements = s.factor == 0.0f;
        return s;
      }
      case Recipe::fp8_block128: {
        const float clamped = std::max(amax, kBlock128MinAmax);
        if (plan_.scale == DataType::f32) {
          s.value = clamped / 448.0f;
          s.factor = s.value;
        } else {
          const int j = std::clamp(ceil_log2_ratio(clamped, 448.0f), -127, 127);
          s.code = static_cast<std::uint8_t>(j + 127);
          s.factor = exp2_exact(-j);
        }
        return s;
      }
    }
    return s;
  }

  void store_scale(std::int64_t scale_row, std::int64_t scale_col, const BlockScale& s) const {
    const std::int64_t index = plan_.scale_index(scale_row, scale_col);
    if (plan_.scale == DataType::f32) {
      std::memcpy(plan_.scales + index * 4, &s.value, 4);
    } else {
      plan_.scales[index] = s.code;
    }
  }

  void encode_row(std::int64_t row, std::int64_t k0, std::int64_t width, const BlockScale& s,
                  std::uint8_t* codes) const {
    if (s.zero_elements) {
      std::memset(codes, 0, static_cast<std::size_t>(width));  // code 0 is +0 in every element format
      return;
    }
    encode_(src_ + row * src_ld_ + k0, width, s.factor, codes);
  }

  // Writes FP4 codes to consecutive element indices starting at `index`, two per byte.
  void pack_fp4(std::int64_t index, const std::uint8_t* codes, std::int64_t n) const {
    std::int64_t i = 0;
    if (index & 1) {
      store_code(DataType::e2m1, plan_.data, index, codes[0]);
      i = 1;
    }
    std::uint8_t* out = plan_.data + ((index + i) >> 1);
    for (; i + 1 < n; i += 2) *out++ = static_cast<std::uint8_t>(codes[i] | (codes[i + 1] << 4));
    if (i < n) store_code(DataType::e2m1, plan_.data, index + i, codes[i]);
  }

  void write_tile(std::int64_t r0, std::int64_t panel_rows, std::int64_t k0, std::int64_t width) const {
    if (plan_.k_major) {
      for (std::int64_t i = 0; i < panel_rows; ++i) {
        const std::uint8_t* codes = &tile_[i * plan_.block];
        const std::int64_t index = plan_.element_index(r0 + i, k0);
        if (plan_.element == DataType::e2m1) {
          pack_fp4(index, codes, width);
        } else {
          std::memcpy(plan_.data + index, codes, static_cast<std::size_t>(width));
        }
      }
      return;
    }
    for (std::int64_t kk = 0; kk < width; ++kk) {  // 8-bit elements only (FP4 is k-major)
      std::uint8_t* column = plan_.data + plan_.element_index(r0, k0 + kk);
      for (std::int64_t i = 0; i < panel_rows; ++i) column[i] = tile_[i * plan_.block + kk];
    }
  }

  // The blocked layout stores whole 128 x 4 atoms: the scale rows beyond scale_rows and the scale
  // columns beyond scale_cols inside the last atoms are set to zero bytes.
  void zero_blocked_padding() const {
    const std::int64_t padded_rows = round_up(plan_.scale_rows, 128);
    const std::int64_t padded_cols = round_up(plan_.scale_cols, 4);
    const std::size_t bytes = plan_.scale == DataType::f32 ? 4 : 1;
    for (std::int64_t row = 0; row < padded_rows; ++row) {
      for (std::int64_t col = row < plan_.scale_rows ? plan_.scale_cols : 0; col < padded_cols; ++col)
        std::memset(plan_.scales + plan_.scale_index(row, col) * static_cast<std::int64_t>(bytes), 0, bytes);
    }
  }
};

// The largest finite |x| bit pattern of n values.
template <typename Src>
std::int32_t finite_amax_bits(const Src* p, std::int64_t n) {
  std::int32_t amax = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    const std::int32_t bits = abs_bits(source_bits(p[i]));
    amax = std::max(amax, bits < kInfBitsSigned ? bits : 0);
  }
  return amax;
}

// The largest finite |x| of the source (nvfp4's tensor amax).
template <typename Src>
float finite_amax(const Src* src, std::int64_t src_ld, std::int64_t rows, std::int64_t k) {
  std::int32_t amax = 0;
  for (std::int64_t r = 0; r < rows; ++r) amax = std::max(amax, finite_amax_bits(src + r * src_ld, k));
  return detail::bits_to_float(static_cast<std::uint32_t>(amax));
}

template <typename Src>
Status quantize_any(const Src* src, std::int64_t src_ld, const QuantizedOperand& dst, const QuantizeOptions& options,
                    float* global_scale) {
  Plan plan;
  if (Status s = make_plan(dst, &plan); !s.ok()) return s;
  if (src == nullptr) return invalid("src", "is null");
  if (Status s = check_ld("src_ld", src_ld, plan.k, plan.rows, "k", &src_ld); !s.ok()) return s;
  if (options.mx_scale_rounding != Ue8m0Rounding::floor && options.mx_scale_rounding != Ue8m0Rounding::ceil)
    return invalid("mx_scale_rounding", "the MX scale rounding is floor or ceil");
  if (!(options.nvfp4_global_scale >= 0.0f) || !std::isfinite(options.nvfp4_global_scale))
    return invalid("nvfp4_global_scale", "must be finite and not negative (0: computed from the data)");
  if (plan.recipe == Recipe::nvfp4 && global_scale == nullptr)
    return invalid("global_scale", "nvfp4 needs a pointer to receive the global scale s_g (fold it into alpha)");

  float s_g = 1.0f;
  if (plan.recipe == Recipe::nvfp4) {
    s_g = options.nvfp4_global_scale > 0.0f ? options.nvfp4_global_scale
                                            : nvfp4_global_scale(finite_amax(src, src_ld, plan.rows, plan.k));
  }
  Quantizer<Src>(plan, src, src_ld, options.mx_scale_rounding, s_g).run();
  if (global_scale != nullptr) *global_scale = s_g;
  return Status::success();
}

}  // namespace

Status quantize(const float* src, std::int64_t src_ld, const QuantizedOperand& dst, const QuantizeOptions& options,
                float* global_scale) {
  return quantize_any(src, src_ld, dst, options, global_scale);
}

Status quantize_bf16(const std::uint16_t* src, std::int64_t src_ld, const QuantizedOperand& dst,
                     const QuantizeOptions& options, float* global_scale) {
  return quantize_any(src, src_ld, dst, options, global_scale);
}

Status dequantize(const QuantizedOperand& src, float* dst, std::int64_t dst_ld, float global_scale) {
  Plan plan;
  if (Status s = make_plan(src, &plan); !s.ok()) return s;
  if (dst == nullptr) return invalid("dst", "is null");
  if (Status s = check_ld("dst_ld", dst_ld, plan.k, plan.rows, "k", &dst_ld); !s.ok()) return s;

  // Every element code's value, looked up instead of decoded per element.
  float values[256];
  for (int code = 0; code < 256; ++code) values[code] = decode(plan.element, static_cast<std::uint8_t>(code));

  for (std::int64_t row = 0; row < plan.rows; ++row) {
    float* out = dst + row * dst_ld;
    const std::int64_t scale_row = row / plan.rows_per_scale;
    for (std::int64_t col = 0; col < plan.scale_cols; ++col) {
      const std::int64_t index = plan.scale_index(scale_row, col);
      float scale;
      if (plan.scale == DataType::f32) {
        std::memcpy(&scale, plan.scales + index * 4, 4);
      } else {
        scale = decode(plan.scale, plan.scales[index]);
      }
      const std::int64_t k0 = col * plan.block;
      const std::int64_t k1 = std::min(plan.k, k0 + plan.block);
      for (std::int64_t kk = k0; kk < k1; ++kk) {
        const std::uint8_t code = load_code(plan.element, plan.data, plan.element_index(row, kk));
        out[kk] = (values[code] * scale) * global_scale;
      }
    }
  }
  return Status::success();
}

}  // namespace bsgemm
