// The CPU quantizers (include/bsgemm/quantize.hpp): hand-computed cases for every rule, error
// handling, the memory they may and may not touch, and a property test that dequantize(quantize(x))
// is within half an element step of x for random data, per block, with the block scale recomputed
// here from the rule.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "bsgemm/quantize.hpp"

namespace bsgemm {
namespace {

constexpr std::uint8_t kSentinel = 0xCD;

// A destination for one operand: buffers sized from the layout rules and filled with kSentinel.
struct Target {
  QuantizedOperand operand;
  std::vector<std::uint8_t> data, scales;
  std::int64_t ld = 0, scale_ld = 0;  // the resolved (never 0) leading dimensions

  Target(OperandType type, Operand which, std::int64_t rows, std::int64_t k, Major major = Major::k,
         std::int64_t ld_ = 0, std::int64_t scale_ld_ = 0) {
    operand.type = type;
    operand.which = which;
    operand.rows = rows;
    operand.k = k;
    operand.major = major;
    operand.ld = ld_;
    operand.scale_ld = scale_ld_;
    const bool k_major = major == Major::k;
    ld = ld_ ? ld_ : (k_major ? k : rows);
    const std::int64_t outer = k_major ? rows : k, inner = k_major ? k : rows;
    data.assign(static_cast<std::size_t>(bytes_for(type.element, (outer - 1) * ld + inner)), kSentinel);
    const std::int64_t srows = scale_rows(type.recipe, which, rows), scols = scale_cols(type.recipe, k);
    scale_ld = scale_ld_ ? scale_ld_ : default_scale_ld(type.scale_layout, srows, scols);
    const std::int64_t bytes = type.scale == DataType::f32 ? 4 : 1;
    scales.assign(static_cast<std::size_t>(scale_extent(type.scale_layout, srows, scols, scale_ld) * bytes), kSentinel);
    operand.data = data.data();
    operand.scales = scales.data();
  }

  std::int64_t scale_index(std::int64_t row, std::int64_t col) const {
    return scale_offset(operand.type.scale_layout, row, col, scale_cols(operand.type.recipe, operand.k), scale_ld);
  }
  std::uint8_t scale_code(std::int64_t row, std::int64_t col) const {
    return scales[static_cast<std::size_t>(scale_index(row, col))];
  }
  float scale_f32(std::int64_t row, std::int64_t col) const {
    float f;
    std::memcpy(&f, &scales[static_cast<std::size_t>(scale_index(row, col) * 4)], 4);
    return f;
  }
  std::uint8_t code(std::int64_t row, std::int64_t col) const {
    const std::int64_t index = operand.major == Major::k ? row * ld + col : col * ld + row;
    return load_code(operand.type.element, data.data(), index);
  }
  std::vector<float> dequantized(float global_scale = 1.0f) const {
    std::vector<float> out(static_cast<std::size_t>(operand.rows * operand.k));
    const Status s = dequantize(operand, out.data(), operand.k, global_scale);
    EXPECT_TRUE(s.ok()) << s.message;
    return out;
  }
};

OperandType type_of(Recipe recipe, DataType element, DataType scale, ScaleLayout layout = ScaleLayout::linear) {
  return OperandType{recipe, element, scale, layout};
}

const OperandType kMxE4m3 = type_of(Recipe::mxfp8, DataType::e4m3, DataType::ue8m0);
const OperandType kMxE5m2 = type_of(Recipe::mxfp8, DataType::e5m2, DataType::ue8m0);
const OperandType kMxfp4 = type_of(Recipe::mxfp4, DataType::e2m1, DataType::ue8m0);
const OperandType kNvfp4 = type_of(Recipe::nvfp4, DataType::e2m1, DataType::ue4m3);
const OperandType kBlockF32 = type_of(Recipe::fp8_block128, DataType::e4m3, DataType::f32);
const OperandType kBlockUe8m0 = type_of(Recipe::fp8_block128, DataType::e4m3, DataType::ue8m0);

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

// ---- MX ------------------------------------------------------------------------------------------

TEST(Quantize, MxE4m3FloorByHand) {
  // Block 0, amax 5: shared_exp = floor(log2 5) - 8 = 2 - 8 = -6, scale code -6 + 127 = 121; the
  // elements are x * 64: 5 -> 320 = 1.25 * 2^8 (code 0x7A), 1 -> 64 (0x68), -2.5 -> -160 (0xF2),
  // 0.3 -> 19.2, between 18 and 20 in steps of 2 -> 20 (0x5A), 0.01 -> 0.64 -> 0.625 (0x32).
  // Block 1, amax 7.9: the same shared_exp, 7.9 * 64 = 505.6 saturates to 448 (0x7E), -7.9 to -448
  // (0xFE), 0.125 -> 8 (0x50).
  std::vector<float> x(64, 0.0f);
  x[0] = 5, x[1] = 1, x[2] = -2.5f, x[3] = 0.3f, x[4] = 0.01f;
  x[32] = 7.9f, x[33] = -7.9f, x[34] = 0.125f;
  Target t(kMxE4m3, Operand::a, 1, 64);
  float global_scale = 0;
  ASSERT_TRUE(quantize(x.data(), 64, t.operand, {}, &global_scale).ok());
  EXPECT_EQ(global_scale, 1.0f);
  EXPECT_EQ(t.scale_code(0, 0), 121);
  EXPECT_EQ(t.scale_code(0, 1), 121);
  const std::uint8_t codes[] = {0x7A, 0x68, 0xF2, 0x5A, 0x32};
  for (int i = 0; i < 5; ++i) EXPECT_EQ(t.code(0, i), codes[i]) << i;
  for (int i = 5; i < 32; ++i) EXPECT_EQ(t.code(0, i), 0) << i;
  EXPECT_EQ(t.code(0, 32), 0x7E);
  EXPECT_EQ(t.code(0, 33), 0xFE);
  EXPECT_EQ(t.code(0, 34), 0x50);
  const std::vector<float> y = t.dequantized();
  EXPECT_EQ(y[0], 5.0f);
  EXPECT_EQ(y[3], 0.3125f);
  EXPECT_EQ(y[4], 0.009765625f);
  EXPECT_EQ(y[32], 7.0f);  // 448 / 64
  EXPECT_EQ(y[33], -7.0f);
}

TEST(Quantize, MxE4m3CeilByHand) {
  // Block 0, amax 5: 5 / 448 = 0.01116 = 2^-6.49, ceil -> -6, code 121 (as floor).
  // Block 1, amax 7.9: 7.9 / 448 = 2^-5.83, ceil -> -5, code 122; 7.9 * 32 = 252.8, between 240
  // and 256 in steps of 16 -> 256 (0x78), no saturation; 0.125 * 32 = 4 (0x48).
  // Block 2, amax 56 = 448 / 8 exactly: ceil(log2(1/8)) = -3, code 124, 56 * 8 = 448 (0x7E).
  // Block 3, amax just above 56: the quotient is just above 1/8, so -2 (code 125): 56 * 4 = 224.
  std::vector<float> x(128, 0.0f);
  x[0] = 5, x[32] = 7.9f, x[33] = 0.125f, x[64] = 56, x[96] = std::nextafter(56.0f, 100.0f), x[97] = 56;
  Target t(kMxE4m3, Operand::a, 1, 128);
  QuantizeOptions options;
  options.mx_scale_rounding = Ue8m0Rounding::ceil;
  ASSERT_TRUE(quantize(x.data(), 128, t.operand, options).ok());
  EXPECT_EQ(t.scale_code(0, 0), 121);
  EXPECT_EQ(t.scale_code(0, 1), 122);
  EXPECT_EQ(t.scale_code(0, 2), 124);
  EXPECT_EQ(t.scale_code(0, 3), 125);
  EXPECT_EQ(t.code(0, 0), 0x7A);
  EXPECT_EQ(t.code(0, 32), 0x78);
  EXPECT_EQ(t.code(0, 33), 0x48);
  EXPECT_EQ(t.code(0, 64), 0x7E);
  EXPECT_EQ(t.code(0, 97), 0x76);  // 224 = 1.75 * 2^7
}

TEST(Quantize, MxPowerOfTwoAmaxAndE5m2) {
  // amax 256 = 2^8: floor(log2) - 8 = 0, code 127, 256 stays 256 (e4m3 0x78).
  std::vector<float> x(32, 0.0f);
  x[0] = 256, x[1] = -1;
  Target t(kMxE4m3, Operand::b, 1, 32);
  ASSERT_TRUE(quantize(x.data(), 32, t.operand).ok());
  EXPECT_EQ(t.scale_code(0, 0), 127);
  EXPECT_EQ(t.code(0, 0), 0x78);
  EXPECT_EQ(t.code(0, 1), 0xB8);
  // e5m2, amax 5: shared_exp = 2 - 15 = -13, code 114; 5 * 2^13 = 40960 = 1.25 * 2^15 (0x79);
  // 0.001 * 8192 = 8.192, between 8 and 10 in steps of 2 -> 8 (0x48).
  x[0] = 5, x[1] = 0.001f;
  Target e(kMxE5m2, Operand::a, 1, 32);
  ASSERT_TRUE(quantize(x.data(), 32, e.operand).ok());
  EXPECT_EQ(e.scale_code(0, 0), 114);
  EXPECT_EQ(e.code(0, 0), 0x79);
  EXPECT_EQ(e.code(0, 1), 0x48);
}

TEST(Quantize, Mxfp4ByHand) {
  // Block 0, amax 6.5: shared_exp = floor(log2 6.5) - 2 = 0, scale code 127, elements x itself:
  // 6.5 saturates to 6 (code 7); 0.25 is a tie between 0 and 0.5 -> 0 (code 0); 0.75 a tie
  // between 0.5 and 1 -> 1 (code 2); 2.5 between 2 and 3 -> 2 (code 4); 5 between 4 and 6 -> 4
  // (code 6); -1.25 between 1 and 1.5 -> -1 (code 0xA); 1 (code 2); -6 (code 0xF).
  // Block 1, amax 1: shared_exp = 0 - 2 = -2 (code 125), x * 4: 1 -> 4 (code 6), 0.3 -> 1.2 -> 1
  // (code 2).
  std::vector<float> x(64, 0.0f);
  const float block0[] = {6.5f, 0.25f, 0.75f, 2.5f, 5.0f, -1.25f, 1.0f, -6.0f};
  std::copy(std::begin(block0), std::end(block0), x.begin());
  x[32] = 1, x[33] = 0.3f;
  Target t(kMxfp4, Operand::a, 1, 64);
  ASSERT_TRUE(quantize(x.data(), 64, t.operand).ok());
  EXPECT_EQ(t.scale_code(0, 0), 127);
  EXPECT_EQ(t.scale_code(0, 1), 125);
  // Two per byte, low nibble first.
  const std::uint8_t bytes[] = {0x07, 0x42, 0xA6, 0xF2};
  for (int i = 0; i < 4; ++i) EXPECT_EQ(t.data[i], bytes[i]) << i;
  for (int i = 4; i < 16; ++i) EXPECT_EQ(t.data[i], 0) << i;
  EXPECT_EQ(t.data[16], 0x26);
  const std::vector<float> y = t.dequantized();
  EXPECT_EQ(y[0], 6.0f);
  EXPECT_EQ(y[33], 0.25f);
}

TEST(Quantize, NonFiniteAndZeroBlocks) {
  // mxfp8: block 0 holds a NaN, block 1 an inf, block 2 only zeros, block 3 is ordinary (amax 1:
  // code 127 - 8 = 119).
  std::vector<float> x(128, 0.0f);
  x[0] = 1, x[1] = kNaN, x[33] = -kInf, x[34] = 2, x[96] = 1;
  Target t(kMxE4m3, Operand::a, 1, 128);
  ASSERT_TRUE(quantize(x.data(), 128, t.operand).ok());
  EXPECT_EQ(t.scale_code(0, 0), 0xFF);
  EXPECT_EQ(t.scale_code(0, 1), 0xFF);
  EXPECT_EQ(t.scale_code(0, 2), 0);
  EXPECT_EQ(t.scale_code(0, 3), 119);
  for (int i = 0; i < 96; ++i) EXPECT_EQ(t.code(0, i), 0) << i;
  EXPECT_EQ(t.code(0, 96), 0x78);  // 1 * 2^8 = 256
  const std::vector<float> y = t.dequantized();
  for (int i = 0; i < 64; ++i) EXPECT_TRUE(std::isnan(y[i])) << i;
  for (int i = 64; i < 96; ++i) EXPECT_EQ(y[i], 0.0f) << i;
  EXPECT_EQ(y[96], 1.0f);

  // nvfp4: the inf block gets the NaN scale 0x7F; the tensor amax (2688 -> s_g = 1) ignores it.
  std::vector<float> v(32, 0.0f);
  v[0] = kInf, v[16] = 2688;
  Target n(kNvfp4, Operand::a, 1, 32);
  float s_g = 0;
  ASSERT_TRUE(quantize(v.data(), 32, n.operand, {}, &s_g).ok());
  EXPECT_EQ(s_g, 1.0f);
  EXPECT_EQ(n.scale_code(0, 0), 0x7F);
  EXPECT_EQ(n.scale_code(0, 1), 0x7E);
  EXPECT_EQ(n.code(0, 0), 0);
  EXPECT_EQ(n.code(0, 16), 0x7);

  // fp8-block128, fp32 scales: a NaN scale.
  std::vector<float> w(128, 1.0f);
  w[5] = kNaN;
  Target b(kBlockF32, Operand::a, 1, 128);
  ASSERT_TRUE(quantize(w.data(), 128, b.operand).ok());
  EXPECT_TRUE(std::isnan(b.scale_f32(0, 0)));
  EXPECT_EQ(b.code(0, 0), 0);
}

TEST(Quantize, MxClampsTinyAmax) {
  // amax 2^-140: floor(log2) - 8 = -148, clamped to -127 (code 0); x * 2^127 = 2^-13 is below
  // half the smallest e4m3 subnormal (2^-10), so it is 0. amax 2^-120: -128 -> clamped, 2^7 stays.
  std::vector<float> x(64, 0.0f);
  x[0] = std::ldexp(1.0f, -140);
  x[32] = std::ldexp(1.0f, -120);
  Target t(kMxE4m3, Operand::a, 1, 64);
  ASSERT_TRUE(quantize(x.data(), 64, t.operand).ok());
  EXPECT_EQ(t.scale_code(0, 0), 0);
  EXPECT_EQ(t.code(0, 0), 0);
  EXPECT_EQ(t.scale_code(0, 1), 0);
  EXPECT_EQ(t.code(0, 32), 0x70);  // 128 = 2^7
  EXPECT_EQ(t.dequantized()[32], std::ldexp(1.0f, -120));
}

TEST(Quantize, ElementsEncodeLikeTheCodecs) {
  // With an MX block scale of exactly 2^0 the quantizer encodes x itself, so its element codes must
  // be the saturating codecs' (formats.hpp, tested exhaustively in test_formats). Each row is a
  // block whose first value pins the amax into [2^emax, 2^(emax+1)); the rest are every
  // representable value, every midpoint and the floats beside both, with both signs, and random
  // floats of every exponent below 2^(emax+1), fp32 subnormals included.
  struct Format {
    OperandType type;
    float pin;  // 2^emax
    std::uint8_t (*codec)(float);
  };
  const Format formats[] = {
      {kMxE4m3, 256.0f, [](float v) { return encode_e4m3(v, Overflow::saturate); }},
      {kMxE5m2, 32768.0f, [](float v) { return encode_e5m2(v, Overflow::saturate); }},
      {kMxfp4, 4.0f, [](float v) { return encode_e2m1(v); }},
  };
  std::mt19937 rng(99);
  for (const Format& f : formats) {
    const int codes = f.type.element == DataType::e2m1 ? 8 : 128;
    const float limit = 2.0f * f.pin;
    std::vector<float> values;
    float previous = 0.0f;
    for (int c = 0; c < codes; ++c) {
      const float v = decode(f.type.element, static_cast<std::uint8_t>(c));
      if (!std::isfinite(v)) continue;
      const float mid = (previous + v) / 2;
      for (const float w : {v, std::nextafter(v, 0.0f), std::nextafter(v, kInf), mid, std::nextafter(mid, 0.0f),
                            std::nextafter(mid, kInf)}) {
        if (w < limit) values.insert(values.end(), {w, -w});
      }
      previous = v;
    }
    for (const float w : {previous * 1.01f, std::nextafter(limit, 0.0f)}) values.insert(values.end(), {w, -w});
    for (int i = 0; i < 20000; ++i) {
      const std::uint32_t bits = static_cast<std::uint32_t>(rng()) & 0x807FFFFFu;
      const std::uint32_t exponent = static_cast<std::uint32_t>(rng() % (127 + std::ilogb(f.pin) + 1));
      values.push_back(std::bit_cast<float>(bits | (exponent << 23)));  // exponent field 0 = subnormal
    }
    const std::int64_t rows = static_cast<std::int64_t>((values.size() + 30) / 31);
    std::vector<float> x(static_cast<std::size_t>(rows * 32), 0.0f);
    for (std::int64_t r = 0; r < rows; ++r) x[static_cast<std::size_t>(r * 32)] = f.pin;
    for (std::size_t i = 0; i < values.size(); ++i) x[(i / 31) * 32 + 1 + i % 31] = values[i];
    Target t(f.type, Operand::a, rows, 32);
    ASSERT_TRUE(quantize(x.data(), 32, t.operand).ok());
    int mismatches = 0;
    for (std::int64_t r = 0; r < rows; ++r) {
      ASSERT_EQ(t.scale_code(r, 0), 127) << "row " << r;
      for (std::int64_t i = 0; i < 32; ++i) {
        const float v = x[static_cast<std::size_t>(r * 32 + i)];
        if (t.code(r, i) != f.codec(v) && ++mismatches <= 5)
          ADD_FAILURE() << to_string(f.type.element) << ": " << v << " -> " << int(t.code(r, i)) << ", codec "
                        << int(f.codec(v));
      }
    }
    EXPECT_EQ(mismatches, 0);
  }
}

// ---- NVFP4 -------------------------------------------------------------------------------------

TEST(Quantize, Nvfp4ByHand) {
  // Tensor amax 10: s_g = 10 / 2688. Block 0, amax 10: s_b = ue4m3(10 / (6 s_g)) = ue4m3(448) =
  // 0x7E; 10 / (448 s_g) = 6 (code 7). Block 1, amax 1: 1 / (6 s_g) = 44.8, between 44 and 48 in
  // steps of 4 -> 44 (0x63: 1.375 * 2^5); elements x / (44 s_g) = x * 2688 / 440: 1 -> 6.11 -> 6
  // (code 7), 0.5 -> 3.05 -> 3 (code 5), 0.25 -> 1.53 -> 1.5 (code 3), -0.1 -> -0.61 -> -0.5 (0x9).
  std::vector<float> x(32, 0.0f);
  x[0] = 10, x[16] = 1, x[17] = 0.5f, x[18] = 0.25f, x[19] = -0.1f;
  Target t(kNvfp4, Operand::b, 1, 32);
  float s_g = 0;
  ASSERT_TRUE(quantize(x.data(), 32, t.operand, {}, &s_g).ok());
  EXPECT_EQ(s_g, 10.0f / 2688.0f);
  EXPECT_EQ(t.scale_code(0, 0), 0x7E);
  EXPECT_EQ(t.scale_code(0, 1), 0x63);
  EXPECT_EQ(t.code(0, 0), 0x7);
  EXPECT_EQ(t.code(0, 16), 0x7);
  EXPECT_EQ(t.code(0, 17), 0x5);
  EXPECT_EQ(t.code(0, 18), 0x3);
  EXPECT_EQ(t.code(0, 19), 0x9);
  // dequantize applies element * s_b, then the global scale.
  const std::vector<float> y = t.dequantized(s_g);
  EXPECT_EQ(y[0], (6.0f * 448.0f) * s_g);
  EXPECT_EQ(y[17], (3.0f * 44.0f) * s_g);
  const std::vector<float> unscaled = t.dequantized();
  EXPECT_EQ(unscaled[18], 66.0f);  // 1.5 * 44
}

TEST(Quantize, Nvfp4BlockScaleUnderflowGivesZeroElements) {
  // s_g = 1 (amax 2688). Block 1, amax 2^-12: 2^-12 / 6 is below half the smallest ue4m3
  // subnormal (2^-10), so s_b = 0 and the elements are 0 rather than x / 0.
  std::vector<float> x(32, 0.0f);
  x[0] = 2688;
  x[16] = std::ldexp(1.0f, -12);
  Target t(kNvfp4, Operand::a, 1, 32);
  float s_g = 0;
  ASSERT_TRUE(quantize(x.data(), 32, t.operand, {}, &s_g).ok());
  EXPECT_EQ(s_g, 1.0f);
  EXPECT_EQ(t.scale_code(0, 0), 0x7E);
  EXPECT_EQ(t.code(0, 0), 0x7);
  EXPECT_EQ(t.scale_code(0, 1), 0);
  EXPECT_EQ(t.code(0, 16), 0);
  // An all-zero tensor: s_g = 1, every scale and element 0.
  std::vector<float> zeros(32, 0.0f);
  Target z(kNvfp4, Operand::a, 1, 32);
  ASSERT_TRUE(quantize(zeros.data(), 32, z.operand, {}, &s_g).ok());
  EXPECT_EQ(s_g, 1.0f);
  EXPECT_EQ(z.scale_code(0, 0), 0);
  EXPECT_EQ(z.data[0], 0);
}

TEST(Quantize, Nvfp4GlobalScaleOptionAllowsRowRanges) {
  const std::int64_t rows = 40, k = 48;
  std::mt19937 rng(3);
  std::normal_distribution<float> normal;
  std::vector<float> x(static_cast<std::size_t>(rows * k));
  for (float& v : x) v = normal(rng);
  x[1000] = 17;  // the tensor amax, in rows [20, 40)
  Target whole(kNvfp4, Operand::a, rows, k);
  float s_g = 0;
  ASSERT_TRUE(quantize(x.data(), k, whole.operand, {}, &s_g).ok());
  EXPECT_EQ(s_g, nvfp4_global_scale(17.0f));
  EXPECT_EQ(s_g, 17.0f / 2688.0f);
  // Two row ranges with the tensor's s_g give the same bytes as one call.
  Target parts(kNvfp4, Operand::a, rows, k);
  QuantizeOptions options;
  options.nvfp4_global_scale = s_g;
  for (const std::int64_t r0 : {0, 20}) {
    QuantizedOperand range = parts.operand;
    range.rows = 20;
    range.data = parts.data.data() + r0 * k / 2;
    range.scales = parts.scales.data() + r0 * (k / 16);
    float range_s_g = 0;
    ASSERT_TRUE(quantize(x.data() + r0 * k, k, range, options, &range_s_g).ok());
    EXPECT_EQ(range_s_g, s_g);
  }
  EXPECT_EQ(parts.data, whole.data);
  EXPECT_EQ(parts.scales, whole.scales);
  // Without the option the first range would use its own amax, and differ.
  Target first(kNvfp4, Operand::a, 20, k);
  float first_s_g = 0;
  ASSERT_TRUE(quantize(x.data(), k, first.operand, {}, &first_s_g).ok());
  EXPECT_NE(first_s_g, s_g);
}

// ---- fp8-block128 --------------------------------------------------------------------------------

TEST(Quantize, Block128ActivationsByHand) {
  // Rows 2, K 130: two blocks per row, the second holding 2 elements.
  // Row 0, block 0: amax 896 -> fp32 scale 896 / 448 = 2; 896 / 2 = 448 (0x7E), 3 / 2 = 1.5 (0x3C).
  //   ue8m0: 2^ceil(log2 2) = 2 (code 128), the same elements.
  // Row 0, block 1 (k 128, 129): amax 0.5 -> fp32 scale 0.5 / 448; 0.5 / scale = 448 (0x7E),
  //   -0.25 / scale = -224 (0xF6). ue8m0: 0.5 / 448 = 2^-9.81, ceil -9 (code 118): 0.5 * 512 = 256
  //   (0x78), -0.25 * 512 = -128 (0xF0).
  // Row 1: zeros; amax clamps to 1e-10: fp32 scale 1e-10 / 448; ue8m0 2^ceil(log2(2.23e-13)) =
  //   2^-42 (code 85).
  std::vector<float> x(260, 0.0f);
  x[0] = 896, x[1] = 3, x[128] = 0.5f, x[129] = -0.25f;
  Target f(kBlockF32, Operand::a, 2, 130);
  ASSERT_TRUE(quantize(x.data(), 130, f.operand).ok());
  EXPECT_EQ(f.scale_f32(0, 0), 2.0f);
  EXPECT_EQ(f.scale_f32(0, 1), 0.5f / 448.0f);
  EXPECT_EQ(f.scale_f32(1, 0), 1e-10f / 448.0f);
  EXPECT_EQ(f.scale_f32(1, 1), 1e-10f / 448.0f);
  EXPECT_EQ(f.code(0, 0), 0x7E);
  EXPECT_EQ(f.code(0, 1), 0x3C);
  EXPECT_EQ(f.code(0, 128), 0x7E);
  EXPECT_EQ(f.code(0, 129), 0xF6);
  EXPECT_EQ(f.code(1, 0), 0);

  Target u(kBlockUe8m0, Operand::a, 2, 130);
  ASSERT_TRUE(quantize(x.data(), 130, u.operand).ok());
  EXPECT_EQ(u.scale_code(0, 0), 128);
  EXPECT_EQ(u.scale_code(0, 1), 118);
  EXPECT_EQ(u.scale_code(1, 0), 85);
  EXPECT_EQ(u.code(0, 0), 0x7E);
  EXPECT_EQ(u.code(0, 1), 0x3C);
  EXPECT_EQ(u.code(0, 128), 0x78);
  EXPECT_EQ(u.code(0, 129), 0xF0);
  const std::vector<float> y = u.dequantized();
  EXPECT_EQ(y[0], 896.0f);
  EXPECT_EQ(y[129], -0.25f);

  // ue8m0 at the boundary: amax 448 -> 2^0 (code 127), amax 449 -> 2^1 (code 128).
  std::vector<float> edge(256, 0.0f);
  edge[0] = 448, edge[128] = 449;
  Target e(kBlockUe8m0, Operand::a, 2, 128);
  ASSERT_TRUE(quantize(edge.data(), 128, e.operand).ok());
  EXPECT_EQ(e.scale_code(0, 0), 127);
  EXPECT_EQ(e.scale_code(1, 0), 128);
  EXPECT_EQ(e.code(1, 0), 0x76);  // 449 / 2 = 224.5, between 224 and 240 -> 224 = 1.75 * 2^7
}

TEST(Quantize, Block128WeightsByHand) {
  // B with N = 200, K = 130: scale blocks of 128 rows x 128 columns, a [2, 2] scale matrix.
  // Block (0, 0): amax 1792 at (5, 3) -> scale 1792 / 448 = 4; (100, 50) = 2 -> 0.5 (0x30).
  // Block (1, 1) = rows 128..199, k 128..129: amax 9 at (130, 129) -> scale 9 / 448; -9 -> -448
  //   (0xFE); (199, 128) = 0.5 -> 0.5 * 448 / 9 = 24.9, between 24 and 26 -> 24 (0x5C).
  // Blocks (0, 1) and (1, 0): zeros, scale 1e-10 / 448.
  const std::int64_t n = 200, k = 130;
  std::vector<float> x(static_cast<std::size_t>(n * k), 0.0f);
  auto at = [&](std::int64_t r, std::int64_t c) -> float& { return x[static_cast<std::size_t>(r * k + c)]; };
  at(5, 3) = 1792, at(100, 50) = 2, at(130, 129) = -9, at(199, 128) = 0.5f;
  Target t(kBlockF32, Operand::b, n, k);
  ASSERT_TRUE(quantize(x.data(), k, t.operand).ok());
  EXPECT_EQ(t.scales.size(), 4u * 4u);
  EXPECT_EQ(t.scale_f32(0, 0), 4.0f);
  EXPECT_EQ(t.scale_f32(1, 1), 9.0f / 448.0f);
  EXPECT_EQ(t.scale_f32(0, 1), 1e-10f / 448.0f);
  EXPECT_EQ(t.scale_f32(1, 0), 1e-10f / 448.0f);
  EXPECT_EQ(t.code(5, 3), 0x7E);
  EXPECT_EQ(t.code(100, 50), 0x30);
  EXPECT_EQ(t.code(130, 129), 0xFE);
  EXPECT_EQ(t.code(199, 128), 0x5C);
}

TEST(Quantize, PartialLastBlockUsesOnlyItsElements) {
  // mxfp8 with K = 40: block 1 holds k 32..39. Block 0 is all 100 (amax 100: floor(log2) = 6,
  // code 127 + 6 - 8 = 125); block 1 has 0.5 at k = 39 (floor(log2) = -1, code 118): 0.5 * 2^9 =
  // 256 (0x78). nvfp4 with K = 20: block 1 holds k 16..19.
  std::vector<float> x(40, 100.0f);
  std::fill(x.begin() + 32, x.end(), 0.0f);
  x[39] = 0.5f;
  Target t(kMxE4m3, Operand::a, 1, 40);
  ASSERT_TRUE(quantize(x.data(), 40, t.operand).ok());
  EXPECT_EQ(t.scale_code(0, 0), 125);
  EXPECT_EQ(t.scale_code(0, 1), 118);
  EXPECT_EQ(t.code(0, 39), 0x78);
  EXPECT_EQ(t.dequantized()[39], 0.5f);

  // nvfp4, K = 20, s_g = 2688 / 2688 = 1: block 1 = {6, 0, 0, 0}: s_b = ue4m3(1) = 0x38.
  std::vector<float> v(20, 0.0f);
  v[0] = 2688, v[16] = 6;
  Target n(kNvfp4, Operand::a, 1, 20);
  float s_g = 0;
  ASSERT_TRUE(quantize(v.data(), 20, n.operand, {}, &s_g).ok());
  EXPECT_EQ(n.scale_code(0, 1), 0x38);
  EXPECT_EQ(n.code(0, 16), 0x7);
}

// Values x near rounding midpoints of the element format for which x / divisor and
// x * (1 / divisor), both in fp32, encode differently: where the rule's division shows.
template <typename Encode>
std::vector<float> division_sensitive_values(float divisor, std::initializer_list<float> midpoints, Encode encode) {
  std::vector<float> found;
  for (const float mid : midpoints) {
    float x = mid * divisor;
    for (int i = 0; i < 64; ++i) x = std::nextafter(x, 0.0f);
    for (int i = 0; i < 128; ++i, x = std::nextafter(x, kInf))
      if (encode(x / divisor) != encode(x * (1.0f / divisor))) found.push_back(x);
  }
  return found;
}

TEST(Quantize, Fp32ScaledRecipesDivideAsWritten) {
  // fp8-block128 with fp32 scales: elements = e4m3(x / scale) with scale = amax / 448 in fp32. The
  // amax 3.3 gives values whose quotient rounds differently from a reciprocal multiply.
  const float amax = 3.3f, scale = amax / 448.0f;
  const auto e4m3 = [](float q) { return encode_e4m3(q); };
  const std::vector<float> tricky = division_sensitive_values(scale, {1.1875f, 9.5f, 100.0f}, e4m3);
  ASSERT_FALSE(tricky.empty());
  ASSERT_LE(tricky.size(), 127u);
  std::vector<float> x(128, 0.0f);
  x[0] = amax;
  std::copy(tricky.begin(), tricky.end(), x.begin() + 1);
  Target t(kBlockF32, Operand::a, 1, 128);
  ASSERT_TRUE(quantize(x.data(), 128, t.operand).ok());
  ASSERT_EQ(t.scale_f32(0, 0), scale);
  for (std::size_t i = 0; i < tricky.size(); ++i) EXPECT_EQ(t.code(0, 1 + i), e4m3(tricky[i] / scale)) << tricky[i];

  // nvfp4: elements = e2m1(x / (decode(s_b) * s_g)). With s_g fixed through the option, search the
  // block amax values for one whose divisor has such values.
  QuantizeOptions options;
  options.nvfp4_global_scale = 0.01f;
  const auto e2m1 = [](float q) { return encode_e2m1(q); };
  int blocks_checked = 0;
  for (float block_amax = 0.37f; block_amax < 20.0f && blocks_checked < 3; block_amax *= 1.37f) {
    const std::uint8_t s_b = encode_ue4m3(block_amax / (6.0f * 0.01f));
    const float divisor = decode_ue4m3(s_b) * 0.01f;
    std::vector<float> values = division_sensitive_values(divisor, {0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f}, e2m1);
    values.erase(std::remove_if(values.begin(), values.end(), [&](float v) { return std::fabs(v) > block_amax; }),
                 values.end());
    if (values.empty()) continue;
    values.resize(std::min<std::size_t>(values.size(), 15));
    std::vector<float> v(16, 0.0f);
    v[0] = block_amax;
    std::copy(values.begin(), values.end(), v.begin() + 1);
    Target n(kNvfp4, Operand::a, 1, 16);
    float s_g = 0;
    ASSERT_TRUE(quantize(v.data(), 16, n.operand, options, &s_g).ok());
    ASSERT_EQ(s_g, 0.01f);
    ASSERT_EQ(n.scale_code(0, 0), s_b);
    for (std::size_t i = 0; i < values.size(); ++i) EXPECT_EQ(n.code(0, 1 + i), e2m1(values[i] / divisor)) << values[i];
    ++blocks_checked;
  }
  EXPECT_GT(blocks_checked, 0);
}

// ---- what is and is not written ---------------------------------------------------------------

TEST(Quantize, Fp4PackingWithOddLeadingDimensionAndPadding) {
  // mxfp4, 3 rows of K = 33. With ld = 40 each row leaves the nibbles 33..39 untouched; with
  // ld = 33 the rows start on alternating nibbles. Both hold the codes of a dense ld = 34 copy.
  const std::int64_t rows = 3, k = 33;
  std::mt19937 rng(11);
  std::normal_distribution<float> normal;
  std::vector<float> x(static_cast<std::size_t>(rows * k));
  for (float& v : x) v = normal(rng);
  Target reference(kMxfp4, Operand::a, rows, k, Major::k, 34);
  ASSERT_TRUE(quantize(x.data(), k, reference.operand).ok());
  for (const std::int64_t ld : {33, 40}) {
    Target t(kMxfp4, Operand::a, rows, k, Major::k, ld);
    ASSERT_TRUE(quantize(x.data(), k, t.operand).ok());
    for (std::int64_t r = 0; r < rows; ++r) {
      for (std::int64_t i = 0; i < k; ++i) ASSERT_EQ(t.code(r, i), reference.code(r, i)) << "ld " << ld;
      for (std::int64_t i = k; i < ld && r + 1 < rows; ++i) {
        const std::int64_t index = r * ld + i;  // padding: 0xCD holds nibble D (even), C (odd)
        EXPECT_EQ(load_code(DataType::e2m1, t.data.data(), index), index % 2 ? 0xC : 0xD) << "ld " << ld;
      }
    }
    EXPECT_EQ(t.dequantized(), reference.dequantized());
  }
}

TEST(Quantize, MnMajorDataAndPaddingLeftAlone) {
  // e4m3 A stored m-major with ld = rows + 3: element (r, k) at k * ld + r; the 3 bytes after each
  // column stay as they were.
  const std::int64_t rows = 70, k = 40, ld = 73;
  std::mt19937 rng(5);
  std::normal_distribution<float> normal;
  std::vector<float> x(static_cast<std::size_t>(rows * k));
  for (float& v : x) v = normal(rng);
  Target by_k(kMxE4m3, Operand::a, rows, k);
  Target by_m(kMxE4m3, Operand::a, rows, k, Major::m, ld);
  ASSERT_TRUE(quantize(x.data(), k, by_k.operand).ok());
  ASSERT_TRUE(quantize(x.data(), k, by_m.operand).ok());
  for (std::int64_t i = 0; i < k; ++i) {
    for (std::int64_t r = 0; r < rows; ++r) ASSERT_EQ(by_m.data[i * ld + r], by_k.data[r * k + i]);
    for (std::int64_t r = rows; r < ld && i + 1 < k; ++r) ASSERT_EQ(by_m.data[i * ld + r], kSentinel);
  }
  EXPECT_EQ(by_m.scales, by_k.scales);
}

TEST(Quantize, BlockedLayoutPaddingIsZero) {
  // 130 rows, K = 200 (7 scale columns): the blocked matrix is 256 x 8; every entry outside
  // [130, 7] is zero, every entry inside equals the linear layout's.
  const std::int64_t rows = 130, k = 200;
  std::vector<float> x(static_cast<std::size_t>(rows * k));
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 97) - 40.0f;
  for (const OperandType base : {kMxE4m3, kNvfp4, kBlockF32}) {
    for (const Operand which : {Operand::a, Operand::b}) {
      OperandType blocked = base;
      blocked.scale_layout = ScaleLayout::blocked_128x4;
      Target linear(base, which, rows, k), t(blocked, which, rows, k);
      float s_g = 0;
      ASSERT_TRUE(quantize(x.data(), k, linear.operand, {}, &s_g).ok());
      ASSERT_TRUE(quantize(x.data(), k, t.operand, {}, &s_g).ok());
      const std::int64_t srows = scale_rows(base.recipe, which, rows), scols = scale_cols(base.recipe, k);
      const std::int64_t bytes = base.scale == DataType::f32 ? 4 : 1;
      ASSERT_EQ(static_cast<std::int64_t>(t.scales.size()), round_up(srows, 128) * round_up(scols, 4) * bytes);
      std::vector<bool> real(t.scales.size(), false);
      for (std::int64_t r = 0; r < srows; ++r) {
        for (std::int64_t c = 0; c < scols; ++c) {
          const auto i = static_cast<std::size_t>(t.scale_index(r, c) * bytes);
          const auto j = static_cast<std::size_t>(linear.scale_index(r, c) * bytes);
          ASSERT_EQ(std::memcmp(&t.scales[i], &linear.scales[j], static_cast<std::size_t>(bytes)), 0);
          for (std::int64_t b = 0; b < bytes; ++b) real[i + static_cast<std::size_t>(b)] = true;
        }
      }
      for (std::size_t i = 0; i < t.scales.size(); ++i) {
        if (!real[i]) {
          ASSERT_EQ(t.scales[i], 0) << to_string(base.recipe) << " byte " << i;
        }
      }
    }
  }
}

TEST(Quantize, Bf16SourceMatchesFp32Source) {
  const std::int64_t rows = 9, k = 150;
  std::mt19937 rng(17);
  std::normal_distribution<float> normal;
  std::vector<std::uint16_t> bf16(static_cast<std::size_t>(rows * k));
  std::vector<float> fp32(bf16.size());
  for (std::size_t i = 0; i < bf16.size(); ++i) {
    bf16[i] = encode_bf16(normal(rng) * 3.0f);
    fp32[i] = decode_bf16(bf16[i]);
  }
  for (const OperandType type : {kMxE4m3, kMxE5m2, kMxfp4, kNvfp4, kBlockF32, kBlockUe8m0}) {
    Target from_bf16(type, Operand::b, rows, k), from_fp32(type, Operand::b, rows, k);
    float s1 = 0, s2 = 0;
    ASSERT_TRUE(quantize_bf16(bf16.data(), k, from_bf16.operand, {}, &s1).ok());
    ASSERT_TRUE(quantize(fp32.data(), k, from_fp32.operand, {}, &s2).ok());
    EXPECT_EQ(s1, s2);
    EXPECT_EQ(from_bf16.data, from_fp32.data) << to_string(type.recipe);
    EXPECT_EQ(from_bf16.scales, from_fp32.scales) << to_string(type.recipe);
  }
}

// ---- errors ------------------------------------------------------------------------------------

TEST(Quantize, ErrorsNameTheFieldAndWriteNothing) {
  const std::int64_t rows = 4, k = 64;
  const std::vector<float> x(static_cast<std::size_t>(rows * k), 1.0f);
  struct Case {
    const char* field;
    OperandType type;
    void (*change)(QuantizedOperand&);
    std::int64_t src_ld = 64;
    bool null_src = false;
    bool null_global_scale = false;
    QuantizeOptions options = {};
  };
  auto with_option = [](float global_scale, Ue8m0Rounding rounding) {
    QuantizeOptions o;
    o.nvfp4_global_scale = global_scale;
    o.mx_scale_rounding = rounding;
    return o;
  };
  const Ue8m0Rounding floor = Ue8m0Rounding::floor;
  const Case cases[] = {
      {"rows", kMxE4m3, [](QuantizedOperand& q) { q.rows = 0; }},
      {"rows", kMxE4m3, [](QuantizedOperand& q) { q.rows = -3; }},
      {"k", kMxE4m3, [](QuantizedOperand& q) { q.k = 0; }},
      {"k", kMxE4m3, [](QuantizedOperand& q) { q.k = -64; }},
      {"data", kMxE4m3, [](QuantizedOperand& q) { q.data = nullptr; }},
      {"scales", kMxE4m3, [](QuantizedOperand& q) { q.scales = nullptr; }},
      {"ld", kMxE4m3, [](QuantizedOperand& q) { q.ld = 63; }},
      {"ld", kMxE4m3, [](QuantizedOperand& q) { q.ld = -1; }},
      {"ld", kMxE4m3, [](QuantizedOperand& q) { q.major = Major::m, q.ld = 3; }},
      {"ld", kMxE4m3, [](QuantizedOperand& q) { q.ld = std::int64_t{1} << 50; }},
      {"major", kMxE4m3, [](QuantizedOperand& q) { q.major = Major::n; }},
      {"major", kMxE4m3, [](QuantizedOperand& q) { q.which = Operand::b, q.major = Major::m; }},
      {"major", kMxfp4, [](QuantizedOperand& q) { q.major = Major::m; }},
      {"major", kNvfp4, [](QuantizedOperand& q) { q.which = Operand::b, q.major = Major::n; }},
      {"type.element", type_of(Recipe::mxfp8, DataType::e2m1, DataType::ue8m0), [](QuantizedOperand&) {}},
      {"type.element", type_of(Recipe::mxfp4, DataType::e4m3, DataType::ue8m0), [](QuantizedOperand&) {}},
      {"type.element", type_of(Recipe::nvfp4, DataType::e5m2, DataType::ue4m3), [](QuantizedOperand&) {}},
      {"type.element", type_of(Recipe::fp8_block128, DataType::e5m2, DataType::f32), [](QuantizedOperand&) {}},
      {"type.scale", type_of(Recipe::mxfp8, DataType::e4m3, DataType::f32), [](QuantizedOperand&) {}},
      {"type.scale", type_of(Recipe::mxfp4, DataType::e2m1, DataType::ue4m3), [](QuantizedOperand&) {}},
      {"type.scale", type_of(Recipe::nvfp4, DataType::e2m1, DataType::ue8m0), [](QuantizedOperand&) {}},
      {"type.scale", type_of(Recipe::fp8_block128, DataType::e4m3, DataType::ue4m3), [](QuantizedOperand&) {}},
      {"scale_ld", kMxE4m3, [](QuantizedOperand& q) { q.scale_ld = 1; }},  // 2 scale columns
      {"scale_ld", kMxE4m3, [](QuantizedOperand& q) { q.scale_ld = -2; }},
      {"scale_ld", type_of(Recipe::mxfp8, DataType::e4m3, DataType::ue8m0, ScaleLayout::mn_major),
       [](QuantizedOperand& q) { q.scale_ld = 3; }},  // 4 scale rows
      {"src", kMxE4m3, [](QuantizedOperand&) {}, 64, true},
      {"src_ld", kMxE4m3, [](QuantizedOperand&) {}, 63},
      {"src_ld", kMxE4m3, [](QuantizedOperand&) {}, -64},
      {"global_scale", kNvfp4, [](QuantizedOperand&) {}, 64, false, true},
      {"nvfp4_global_scale", kNvfp4, [](QuantizedOperand&) {}, 64, false, false, with_option(-1.0f, floor)},
      {"nvfp4_global_scale", kNvfp4, [](QuantizedOperand&) {}, 64, false, false, with_option(kNaN, floor)},
      {"nvfp4_global_scale", kNvfp4, [](QuantizedOperand&) {}, 64, false, false, with_option(kInf, floor)},
      {"mx_scale_rounding", kMxE4m3, [](QuantizedOperand&) {}, 64, false, false,
       with_option(0.0f, Ue8m0Rounding::nearest_up)},
  };
  for (const Case& c : cases) {
    // Buffers large enough for any variant, so that a write anywhere would show.
    std::vector<std::uint8_t> data(4096, kSentinel), scales(4096, kSentinel);
    QuantizedOperand q;
    q.type = c.type;
    q.which = Operand::a;
    q.rows = rows;
    q.k = k;
    q.data = data.data();
    q.scales = scales.data();
    c.change(q);
    float global_scale = -7.0f;
    const Status s = quantize(c.null_src ? nullptr : x.data(), c.src_ld, q, c.options,
                              c.null_global_scale ? nullptr : &global_scale);
    ASSERT_FALSE(s.ok()) << c.field;
    EXPECT_EQ(s.code, StatusCode::invalid_argument) << c.field;
    EXPECT_EQ(s.field, c.field) << s.message;
    EXPECT_FALSE(s.message.empty());
    EXPECT_EQ(global_scale, -7.0f) << c.field;
    EXPECT_TRUE(std::all_of(data.begin(), data.end(), [](std::uint8_t b) { return b == kSentinel; })) << c.field;
    EXPECT_TRUE(std::all_of(scales.begin(), scales.end(), [](std::uint8_t b) { return b == kSentinel; })) << c.field;
  }
}

TEST(Quantize, DequantizeErrors) {
  Target t(kMxE4m3, Operand::a, 2, 64);
  std::vector<float> out(128, -1.0f);
  Status s = dequantize(t.operand, nullptr, 64);
  EXPECT_EQ(s.field, "dst");
  s = dequantize(t.operand, out.data(), 32);
  EXPECT_EQ(s.field, "dst_ld");
  const Target fp4(kMxfp4, Operand::a, 2, 64);
  QuantizedOperand fp4_m = fp4.operand;
  fp4_m.major = Major::m;
  s = dequantize(fp4_m, out.data(), 64);
  EXPECT_EQ(s.field, "major");
  QuantizedOperand no_scales = t.operand;
  no_scales.scales = nullptr;
  s = dequantize(no_scales, out.data(), 64);
  EXPECT_EQ(s.field, "scales");
  EXPECT_TRUE(std::all_of(out.begin(), out.end(), [](float v) { return v == -1.0f; }));
}

// ---- property: error within half an element step ------------------------------------------------

// What the test knows about an element format.
struct ElementFormat {
  int mantissa_bits;
  int min_normal_exponent;  // the smallest normal is 2^this
  double max;
};

ElementFormat format_of(DataType t) {
  switch (t) {
    case DataType::e4m3: return {3, -6, 448};
    case DataType::e5m2: return {2, -14, 57344};
    default: return {1, 0, 6};  // e2m1
  }
}

// Half the spacing of the element format's values around |y| (y in element units).
double half_step(const ElementFormat& f, double y) {
  int exponent = f.min_normal_exponent;
  if (std::fabs(y) >= std::ldexp(1.0, f.min_normal_exponent)) exponent = std::ilogb(std::fabs(y));
  return std::ldexp(1.0, exponent - f.mantissa_bits - 1);
}

// Smallest j with m * 2^j >= a, computed by stepping (all exact in double).
int smallest_power_covering(double a, double m) {
  int j = -200;
  while (std::ldexp(m, j) < a) ++j;
  return j;
}

// The block scale (in real units) the rule of quantize.hpp gives a block of amax `amax`.
double rule_scale(const OperandType& type, Ue8m0Rounding rounding, double amax, float s_g) {
  const ElementFormat f = format_of(type.element);
  switch (type.recipe) {
    case Recipe::mxfp8:
    case Recipe::mxfp4: {
      if (amax == 0) return std::ldexp(1.0, -127);
      const int emax = type.element == DataType::e4m3 ? 8 : type.element == DataType::e5m2 ? 15 : 2;
      int shared = rounding == Ue8m0Rounding::floor ? std::ilogb(amax) - emax : smallest_power_covering(amax, f.max);
      shared = std::clamp(shared, -127, 127);
      return std::ldexp(1.0, shared);
    }
    case Recipe::nvfp4:
      return static_cast<double>(decode_ue4m3(encode_ue4m3(static_cast<float>(amax) / (6.0f * s_g)))) * s_g;
    case Recipe::fp8_block128: {
      const float clamped = std::max(static_cast<float>(amax), 1e-10f);
      if (type.scale == DataType::f32) return clamped / 448.0f;
      return std::ldexp(1.0, smallest_power_covering(clamped, 448.0));
    }
  }
  return 0;
}

TEST(Quantize, DequantizedValuesAreWithinHalfAStep) {
  std::mt19937 rng(2024);
  std::normal_distribution<float> normal;
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);
  struct Config {
    OperandType type;
    Operand which;
    Ue8m0Rounding rounding;
  };
  const Config configs[] = {
      {kMxE4m3, Operand::a, Ue8m0Rounding::floor},     {kMxE4m3, Operand::b, Ue8m0Rounding::ceil},
      {kMxE5m2, Operand::a, Ue8m0Rounding::floor},     {kMxE5m2, Operand::b, Ue8m0Rounding::ceil},
      {kMxfp4, Operand::a, Ue8m0Rounding::floor},      {kMxfp4, Operand::b, Ue8m0Rounding::ceil},
      {kNvfp4, Operand::a, Ue8m0Rounding::floor},      {kBlockF32, Operand::a, Ue8m0Rounding::floor},
      {kBlockF32, Operand::b, Ue8m0Rounding::floor},   {kBlockUe8m0, Operand::a, Ue8m0Rounding::floor},
      {kBlockUe8m0, Operand::b, Ue8m0Rounding::floor},
  };
  for (const Config& config : configs) {
    const std::int64_t rows = config.which == Operand::b && config.type.recipe == Recipe::fp8_block128 ? 150 : 37;
    const std::int64_t k = 300;  // 9 full MX blocks + 12, 18 nvfp4 blocks + 12, 2 block128 blocks + 44
    const std::int64_t block = block_k(config.type.recipe);
    const std::int64_t rows_per_scale =
        config.which == Operand::b && config.type.recipe == Recipe::fp8_block128 ? 128 : 1;
    // Each (row, block) gets its own magnitude, so the scales span a wide range; some values are 0.
    // nvfp4's block scales are relative to the tensor amax and ue4m3 spans only 2^17, so its
    // magnitudes stay within 2^+-5 to keep most blocks clear of the subnormal scales.
    const int spread = config.type.recipe == Recipe::nvfp4 ? 5 : 20;
    std::uniform_int_distribution<int> magnitude(-spread, spread);
    std::vector<float> x(static_cast<std::size_t>(rows * k));
    for (std::int64_t r = 0; r < rows; ++r) {
      for (std::int64_t b = 0; b * block < k; ++b) {
        const float m = std::ldexp(1.0f, magnitude(rng));
        for (std::int64_t i = b * block; i < std::min(k, (b + 1) * block); ++i)
          x[static_cast<std::size_t>(r * k + i)] = unit(rng) < 0.05f ? 0.0f : normal(rng) * m;
      }
    }
    Target t(config.type, config.which, rows, k);
    QuantizeOptions options;
    options.mx_scale_rounding = config.rounding;
    float s_g = 0;
    ASSERT_TRUE(quantize(x.data(), k, t.operand, options, &s_g).ok());
    const std::vector<float> y = t.dequantized(s_g);
    double tensor_amax = 0;
    for (const float v : x) tensor_amax = std::max(tensor_amax, std::fabs(static_cast<double>(v)));
    const float expected_s_g = config.type.recipe == Recipe::nvfp4 ? static_cast<float>(tensor_amax) / 2688.0f : 1.0f;
    EXPECT_EQ(s_g, expected_s_g);

    const ElementFormat f = format_of(config.type.element);
    // fp32-scaled recipes round the quotient x / scale and the products of dequantize to fp32.
    const bool fp32_arithmetic = config.type.recipe == Recipe::nvfp4 || config.type.scale == DataType::f32;
    int failures = 0;
    for (std::int64_t r0 = 0; r0 < rows; r0 += rows_per_scale) {
      for (std::int64_t k0 = 0; k0 < k; k0 += block) {
        const std::int64_t r1 = std::min(rows, r0 + rows_per_scale), k1 = std::min(k, k0 + block);
        double amax = 0;
        for (std::int64_t r = r0; r < r1; ++r)
          for (std::int64_t i = k0; i < k1; ++i) amax = std::max(amax, std::fabs(static_cast<double>(x[r * k + i])));
        // The stored scale is the rule's (nvfp4: s_b, without s_g).
        const double scale = rule_scale(config.type, config.rounding, amax, s_g);
        const std::int64_t scale_row = r0 / rows_per_scale, scale_col = k0 / block;
        const double stored = config.type.scale == DataType::f32
                                  ? t.scale_f32(scale_row, scale_col)
                                  : decode(config.type.scale, t.scale_code(scale_row, scale_col)) *
                                        (config.type.recipe == Recipe::nvfp4 ? static_cast<double>(s_g) : 1.0);
        EXPECT_EQ(stored, scale) << to_string(config.type.recipe) << " block (" << r0 << ", " << k0 << ")";
        for (std::int64_t r = r0; r < r1; ++r) {
          for (std::int64_t i = k0; i < k1; ++i) {
            const double xv = x[r * k + i], yv = y[r * k + i];
            if (scale == 0) {  // nvfp4: s_b underflowed, the rule flushes the block to zero
              EXPECT_EQ(yv, 0.0);
              continue;
            }
            const double e = std::fabs(xv) / scale;  // |x| in element units
            double bound = scale * (half_step(f, std::min(e, f.max)) + std::max(0.0, e - f.max));
            if (fp32_arithmetic) bound += std::ldexp(std::fabs(xv) + scale * f.max, -21);
            if (!(std::fabs(yv - xv) <= bound) && ++failures <= 5)
              ADD_FAILURE() << to_string(config.type.recipe) << "/" << to_string(config.type.element) << " (" << r
                            << ", " << i << "): x " << xv << " -> " << yv << ", bound " << bound;
          }
        }
      }
    }
    EXPECT_EQ(failures, 0);
  }
}

}  // namespace
}  // namespace bsgemm
