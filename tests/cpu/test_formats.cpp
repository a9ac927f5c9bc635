// Element and scale formats (include/bsgemm/formats.hpp), checked three ways:
//   - exhaustively against values computed here from the bit fields (sign, exponent, mantissa
//     arithmetic in double), for every code of every format, with encode(decode(c)) == c;
//   - rounding: every midpoint between adjacent representable values, and the values just beside
//     it, plus hand-computed overflow, subnormal and ue8m0 cases;
//   - externally, against tests/data/formats-torch.json, made by PyTorch's own float8 casts.
// The Json suite tests the JSON reader that the golden-file test uses.
#include <gtest/gtest.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "bsgemm/formats.hpp"
#include "src/core/fp4_to_fp8.hpp"
#include "src/core/scale_codes.hpp"
#include "src/core/stage_bf16.hpp"
#include "src/testing/json.hpp"

namespace bsgemm {
namespace {

namespace json = testing::json;

float bits_float(std::uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

// The value of a code of a binary floating-point format with `exp_bits` exponent bits, `man_bits`
// mantissa bits, exponent bias `bias` and a sign bit above them, ignoring special codes.
double field_value(std::uint32_t code, int exp_bits, int man_bits, int bias) {
  const std::uint32_t sign = (code >> (exp_bits + man_bits)) & 1u;
  const int exponent = static_cast<int>((code >> man_bits) & ((1u << exp_bits) - 1u));
  const int mantissa = static_cast<int>(code & ((1u << man_bits) - 1u));
  const double magnitude = exponent == 0 ? std::ldexp(mantissa, 1 - bias - man_bits)
                                         : std::ldexp((1 << man_bits) + mantissa, exponent - bias - man_bits);
  return sign ? -magnitude : magnitude;
}

// The specification of each format (design.md's table), independent of formats.hpp.
double expected_e4m3(std::uint32_t c) { return (c & 0x7Fu) == 0x7Fu ? kNaN : field_value(c, 4, 3, 7); }

double expected_ieee_like(std::uint32_t c, int exp_bits, int man_bits, int bias) {
  const std::uint32_t exp_mask = (1u << exp_bits) - 1u;
  if (((c >> man_bits) & exp_mask) == exp_mask) {
    if ((c & ((1u << man_bits) - 1u)) != 0) return kNaN;
    return (c >> (exp_bits + man_bits)) & 1u ? -kInf : kInf;
  }
  return field_value(c, exp_bits, man_bits, bias);
}

double expected_e5m2(std::uint32_t c) { return expected_ieee_like(c, 5, 2, 15); }
double expected_f16(std::uint32_t c) { return expected_ieee_like(c, 5, 10, 15); }
double expected_bf16(std::uint32_t c) { return expected_ieee_like(c, 8, 7, 127); }
double expected_e2m1(std::uint32_t c) { return field_value(c, 2, 1, 1); }
double expected_ue8m0(std::uint32_t c) { return c == 0xFFu ? kNaN : std::ldexp(1.0, static_cast<int>(c) - 127); }
double expected_ue4m3(std::uint32_t c) { return expected_e4m3(c & 0x7Fu); }

// Same value, same sign of zero, or both NaN.
bool same_value(double actual, double expected) {
  if (std::isnan(expected)) return std::isnan(actual);
  return actual == expected && std::signbit(actual) == std::signbit(expected);
}

// ---- exhaustive decode and round trip ---------------------------------------------------------

TEST(Formats, DecodeEveryE4m3Code) {
  for (std::uint32_t c = 0; c < 256; ++c)
    EXPECT_TRUE(same_value(decode_e4m3(static_cast<std::uint8_t>(c)), expected_e4m3(c))) << "code " << c;
  // The table's landmarks, by hand.
  EXPECT_EQ(decode_e4m3(0x7E), 448.0f);
  EXPECT_EQ(decode_e4m3(0x01), 0.001953125f);  // 2^-9, the smallest subnormal
  EXPECT_EQ(decode_e4m3(0x08), 0.015625f);     // 2^-6, the smallest normal
  EXPECT_EQ(decode_e4m3(0x38), 1.0f);
  EXPECT_EQ(decode_e4m3(0xC4), -3.0f);
  EXPECT_TRUE(std::isnan(decode_e4m3(0x7F)) && std::isnan(decode_e4m3(0xFF)));
}

// The kernels' ue4m3 scales by bit placement (src/core/scale_codes.hpp) are decode_ue4m3's, bit for bit, for
// every code: both signs, the subnormals (which pass through fp32 subnormals) and NaN.
TEST(Formats, Ue4m3CodeToFloatByBitPlacementIsExact) {
  for (std::uint32_t code = 0; code < 256; ++code) {
    const float expected = decode_ue4m3(static_cast<std::uint8_t>(code));
    const float placed = core::ue4m3_code_to_float(code);
    std::uint32_t expected_bits, placed_bits;
    std::memcpy(&expected_bits, &expected, 4);
    std::memcpy(&placed_bits, &placed, 4);
    EXPECT_EQ(placed_bits, expected_bits) << "code " << code;
  }
}

// The kernels' ue8m0 lifted scale pairs from their codes (src/core/scale_codes.hpp): for every code they accept,
// both halves are the bf16 of the scale times the lift, exactly (the product is a bf16 value: no rounding); and
// they accept every code up to 2.
TEST(Formats, ScaleCodesLiftedByBitsAreExact) {
  const auto bf16_bits_of_exact = [](double v) {
    const float f = static_cast<float>(v);
    EXPECT_EQ(static_cast<double>(f), v);
    std::uint32_t bits;
    std::memcpy(&bits, &f, 4);
    EXPECT_EQ(bits & 0xFFFFu, 0u) << v;  // representable in bf16
    return bits >> 16;
  };
  int ue8m0_lifted = 0;
  for (std::uint32_t code = 0; code < 256; ++code) {
    const double ue8m0 = decode_ue8m0(static_cast<std::uint8_t>(code));
    EXPECT_EQ(core::ue8m0_lifts_exactly(code), ue8m0 <= core::kUe8m0LiftedScaleLimit) << "ue8m0 code " << code;
    if (core::ue8m0_lifts_exactly(code)) {
      ++ue8m0_lifted;
      const std::uint32_t half = bf16_bits_of_exact(ue8m0 * static_cast<double>(core::kUe8m0Lift));
      EXPECT_EQ(core::ue8m0_lifted_bf16x2(code), half | (half << 16)) << "ue8m0 code " << code;
    }
  }
  EXPECT_EQ(ue8m0_lifted, 133);
}

// The staged-token tiles' table of nv16 lifted pairs (src/core/scale_codes.hpp): for every one of the 256 codes, both
// halves are the scale (sign bit ignored) times the lift, exactly, in bf16 and in f16, and NaN for the NaN codes.
TEST(Formats, Ue4m3LiftedTableEntriesAreExactForEveryCode) {
  for (std::uint32_t code = 0; code < static_cast<std::uint32_t>(core::kScaleCodes); ++code) {
    const std::uint32_t bf16 = core::ue4m3_lifted_bf16x2_entry(code), f16 = core::ue4m3_lifted_f16x2_entry(code);
    EXPECT_EQ(bf16 >> 16, bf16 & 0xFFFFu) << "code " << code;
    EXPECT_EQ(f16 >> 16, f16 & 0xFFFFu) << "code " << code;
    const double scale = decode_ue4m3(static_cast<std::uint8_t>(code));
    const double as_bf16 = decode_bf16(static_cast<std::uint16_t>(bf16)), as_f16 = expected_f16(f16 & 0xFFFFu);
    if ((code & 0x7Fu) == 0x7Fu) {
      EXPECT_TRUE(std::isnan(as_bf16) && std::isnan(as_f16)) << "code " << code;
      continue;
    }
    EXPECT_EQ(as_bf16, scale * static_cast<double>(core::kUe4m3Lift)) << "code " << code;
    EXPECT_EQ(as_f16, std::ldexp(scale, 7)) << "code " << code;
  }
}

TEST(Formats, DecodeEveryE5m2Code) {
  for (std::uint32_t c = 0; c < 256; ++c)
    EXPECT_TRUE(same_value(decode_e5m2(static_cast<std::uint8_t>(c)), expected_e5m2(c))) << "code " << c;
  EXPECT_EQ(decode_e5m2(0x7B), 57344.0f);
  EXPECT_EQ(decode_e5m2(0x01), 1.52587890625e-05f);  // 2^-16
  EXPECT_EQ(decode_e5m2(0x7C), std::numeric_limits<float>::infinity());
  EXPECT_EQ(decode_e5m2(0xFC), -std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(decode_e5m2(0x7D)) && std::isnan(decode_e5m2(0xFF)));
}

TEST(Formats, DecodeEveryE2m1Code) {
  // design.md: values +-{0, 0.5, 1, 1.5, 2, 3, 4, 6}.
  const float positive[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  for (std::uint32_t c = 0; c < 16; ++c) {
    const float by_hand = c < 8 ? positive[c] : -positive[c - 8];
    EXPECT_TRUE(same_value(decode_e2m1(static_cast<std::uint8_t>(c)), by_hand)) << "code " << c;
    EXPECT_TRUE(same_value(decode_e2m1(static_cast<std::uint8_t>(c)), expected_e2m1(c))) << "code " << c;
    // Only the low nibble counts.
    EXPECT_TRUE(same_value(decode_e2m1(static_cast<std::uint8_t>(c | 0xA0u)), by_hand)) << "code " << c;
  }
}

// The CUDA back end widens FP4 to FP8 on chip (src/core/fp4_to_fp8.hpp): every pair of four e2m1 codes,
// and every position in a word of eight, gives the e4m3 code of the same value (signed zero included).
TEST(Formats, E2m1WidensToE4m3Exactly) {
  for (std::uint32_t codes = 0; codes < 0x10000u; ++codes) {
    const std::uint32_t widened = core::e2m1x4_to_e4m3x4(codes);
    for (int i = 0; i < 4; ++i) {
      const auto nibble = static_cast<std::uint8_t>((codes >> (4 * i)) & 0xFu);
      const auto byte = static_cast<std::uint8_t>(widened >> (8 * i));
      ASSERT_TRUE(same_value(decode_e4m3(byte), decode_e2m1(nibble))) << "codes " << codes << " element " << i;
    }
  }
  std::mt19937 rng(7);
  for (int trial = 0; trial < 1000; ++trial) {
    const std::uint32_t codes = rng();
    std::uint32_t low = 0, high = 0;
    core::e2m1x8_to_e4m3x8(codes, &low, &high);
    for (int i = 0; i < 8; ++i) {
      const auto byte = static_cast<std::uint8_t>((i < 4 ? low : high) >> (8 * (i % 4)));
      ASSERT_TRUE(same_value(decode_e4m3(byte), decode_e2m1(static_cast<std::uint8_t>(codes >> (4 * i)))));
    }
  }
}

// Words of eight e2m1 codes with every code in every position and the other positions cycling through all
// codes; `check(codes)` for each (ASSERTs inside it end the test at the first failure).
template <class Check>
void for_every_code_in_every_position(Check&& check) {
  for (std::uint32_t code = 0; code < 16; ++code)
    for (int position = 0; position < 8; ++position)
      for (std::uint32_t rest = 0; rest < 16; ++rest) {
        std::uint32_t codes = 0;
        for (int i = 0; i < 8; ++i) codes |= (i == position ? code : (rest + 3 * i) & 0xFu) << (4 * i);
        check(codes);
        if (::testing::Test::HasFatalFailure()) return;
      }
}

// Element i of eight decoded in the pairs order: the low half of word i (i < 4), the high half of word i - 4.
std::uint16_t pairs_element(const std::uint32_t (&words)[4], int i) {
  return static_cast<std::uint16_t>(words[i % 4] >> (16 * (i / 4)));
}

// The decoding kernels turn FP4 into bf16 directly: every code in every position gives the bf16 of the
// same value.
TEST(Formats, E2m1PairsFourApartConvertToBf16Exactly) {
  for_every_code_in_every_position([](std::uint32_t codes) {
    std::uint32_t words[4];
    core::e2m1x8_to_bf16_pairs(codes, words);
    for (int i = 0; i < 8; ++i) {
      const auto nibble = static_cast<std::uint8_t>((codes >> (4 * i)) & 0xFu);
      ASSERT_TRUE(same_value(decode_bf16(pairs_element(words, i)), decode_e2m1(nibble))) << "codes " << codes << " element " << i;
    }
  });
}

// The register-operand kernel's weight decode with nv16 scales: every code in every position gives its value
// times 2^-126 (subnormal for 0.5), and one bf16 multiply by the scale lifted by 2^119 gives the exact scaled
// value times 2^-7 (the accumulators take the 2^7 back) for every finite ue4m3 scale: the product of a
// 2-bit and a 4-bit significand between 2^-17 and 21, a normal bf16, and the lifted scale below bf16's
// largest value.
TEST(Formats, E2m1PairsConvertToTinyBf16Exactly) {
  for_every_code_in_every_position([](std::uint32_t codes) {
    std::uint32_t words[4];
    core::e2m1x8_to_tiny_bf16_pairs(codes, words);
    for (int i = 0; i < 8; ++i) {
      const std::uint32_t nibble = (codes >> (4 * i)) & 0xFu;
      ASSERT_TRUE(same_value(std::ldexp(expected_bf16(pairs_element(words, i)), core::kTinyBf16Exponent), expected_e2m1(nibble)))
          << "codes " << codes << " element " << i;
    }
  });
  const double largest_bf16 = std::ldexp(255.0, 127 - 7);
  for (std::uint32_t s = 0; s < 0x7Fu; ++s) {
    const double lifted = std::ldexp(expected_ue4m3(s), core::kTinyBf16Exponent - 7);
    ASSERT_LE(lifted, largest_bf16) << "scale code " << s;
    for (std::uint32_t code = 0; code < 8; ++code) {
      const double tiny = std::ldexp(expected_e2m1(code), -core::kTinyBf16Exponent);
      const double product = tiny * lifted;  // exact in double
      ASSERT_EQ(product, std::ldexp(expected_e2m1(code) * expected_ue4m3(s), -7));
      if (product == 0) continue;
      int exponent = 0;
      const double significand = std::frexp(product, &exponent);
      ASSERT_GE(exponent - 1, -126) << "a normal bf16: scale code " << s << ", e2m1 code " << code;
      ASSERT_EQ(std::ldexp(significand, 8), std::floor(std::ldexp(significand, 8))) << "8 significant bits";
    }
  }
}

// The register-operand kernel's one-multiply path for mx32 weights (every scale of the warp at most 2): the
// scale times 2^126 is a bf16, and every e2m1 x 2^-126 times it is the exact scaled value as a bf16 (normal,
// or a subnormal on bf16's 2^-133 grid) for every ue8m0 scale 2^-127 .. 2.
TEST(Formats, E2m1TinyTimesLiftedMx32ScaleIsExact) {
  const double largest_bf16 = std::ldexp(255.0, 127 - 7);
  for (std::uint32_t s = 0; s <= 128; ++s) {
    const double lifted = std::ldexp(expected_ue8m0(s), core::kTinyBf16Exponent);
    ASSERT_LE(lifted, largest_bf16) << "scale code " << s;
    ASSERT_GE(lifted, std::ldexp(1.0, -126)) << "a normal bf16: scale code " << s;
    for (std::uint32_t code = 0; code < 8; ++code) {
      const double product = std::ldexp(expected_e2m1(code), -core::kTinyBf16Exponent) * lifted;
      ASSERT_EQ(product, expected_e2m1(code) * expected_ue8m0(s));
      if (product == 0) continue;
      int exponent = 0;
      std::frexp(product, &exponent);
      const int grid = std::max(exponent - 8, -133);  // the bf16 value's last bit: 8 significant bits, or 2^-133
      ASSERT_EQ(std::ldexp(product, -grid), std::floor(std::ldexp(product, -grid))) << "scale code " << s << ", e2m1 code " << code;
    }
  }
}

// The staged path's chunk arithmetic (src/core/stage_bf16.hpp): element e of an 8-element chunk lands in
// half e % 2 of pairs[e / 2], FP4 goes through its e4m3 widening, and each bf16 equals the exact product
// (checked in double) wherever that product is a normal bf16: FP8 and FP4 values against ue8m0 scales
// 2^-100 .. 2^100 and ue4m3 scales.
TEST(Formats, StagedChunksAreExactAndInOrder) {
  std::mt19937 rng(2029);
  for (int trial = 0; trial < 8000; ++trial) {
    const int kind = trial % 3;  // e4m3, e5m2, e2m1
    const bool nv16 = kind == 2 && trial % 2 == 1;
    std::uint8_t element_codes[8];
    for (auto& c : element_codes) c = static_cast<std::uint8_t>(rng() & (kind == 2 ? 0xFu : 0xFFu));
    std::uint32_t codes[2] = {};
    if (kind == 2) {
      std::uint32_t packed = 0;
      for (int e = 0; e < 8; ++e) packed |= static_cast<std::uint32_t>(element_codes[e]) << (4 * e);
      core::widen_fp4_chunk(packed, codes);
    } else {
      for (int e = 0; e < 8; ++e) codes[e / 4] |= static_cast<std::uint32_t>(element_codes[e]) << (8 * (e % 4));
    }
    const float scale = nv16 ? decode_ue4m3(static_cast<std::uint8_t>(rng() % 0x7Fu))
                             : decode_ue8m0(static_cast<std::uint8_t>(27 + rng() % 201));  // 2^-100 .. 2^100
    std::uint32_t pairs[4];
    core::stage_chunk(codes, kind == 1, scale, pairs);
    for (int e = 0; e < 8; ++e) {
      const std::uint8_t c = element_codes[e];
      const double value = kind == 0 ? decode_e4m3(c) : kind == 1 ? decode_e5m2(c) : decode_e2m1(c);
      if (std::isnan(value)) continue;  // FP8 NaN codes stay NaN (not a value to compare)
      const double exact = value * scale;
      const float staged = decode_bf16(static_cast<std::uint16_t>(pairs[e / 2] >> (16 * (e % 2))));
      if (exact == 0 || (std::fabs(exact) >= 0x1p-126 && std::fabs(exact) < 0x1p127))
        EXPECT_EQ(static_cast<double>(staged), exact) << "trial " << trial << " element " << e << " code " << int(c);
    }
  }
}

// The same chunk in the pairs order (stage_chunk_pairs): pairs[i] holds elements i and i + 4, bit for bit
// what stage_chunk makes of them.
TEST(Formats, StagedChunksInThePairsOrder) {
  std::mt19937 rng(2031);
  for (int trial = 0; trial < 2000; ++trial) {
    std::uint32_t codes[2] = {static_cast<std::uint32_t>(rng()), static_cast<std::uint32_t>(rng())};
    const bool e5m2 = trial % 2 == 1;
    const float scale = decode_ue8m0(static_cast<std::uint8_t>(100 + rng() % 50));
    std::uint32_t in_order[4], pairs[4];
    core::stage_chunk(codes, e5m2, scale, in_order);
    core::stage_chunk_pairs(codes, e5m2, scale, pairs);
    const auto element = [](const std::uint32_t(&w)[4], int e) { return static_cast<std::uint16_t>(w[e / 2] >> (16 * (e % 2))); };
    for (int i = 0; i < 4; ++i) {
      EXPECT_EQ(static_cast<std::uint16_t>(pairs[i]), element(in_order, i)) << "trial " << trial;
      EXPECT_EQ(static_cast<std::uint16_t>(pairs[i] >> 16), element(in_order, i + 4)) << "trial " << trial;
    }
  }
}

// The register-operand kernel's K order (core::weights_order_slot) is a permutation of each 64-deep slice,
// and it is the order its A fragments read the weights in: slot 16 s + 2 q + (j % 2) + 8 (j / 2) of wgmma
// step s, lane quad q, fragment element j holds stored position 16 q + 8 (s / 2) + 2 (s % 2) + j / 2 + 4 (j % 2)
// (kernel_traits_swapped.cuh), and stage_bf16.cu writes chunk j's pair i at slot 8 (4 (j % 2) + i) + 2 (j / 2).
TEST(Formats, WeightsOrderIsTheFragmentOrder) {
  std::vector<int> seen(core::kWeightsOrderSlice, 0);
  for (int position = 0; position < core::kWeightsOrderSlice; ++position) {
    const int slot = core::weights_order_slot(position);
    ASSERT_GE(slot, 0);
    ASSERT_LT(slot, core::kWeightsOrderSlice);
    ++seen[static_cast<std::size_t>(slot)];
  }
  for (int slot = 0; slot < core::kWeightsOrderSlice; ++slot) EXPECT_EQ(seen[static_cast<std::size_t>(slot)], 1) << slot;
  for (int s = 0; s < 4; ++s)
    for (int q = 0; q < 4; ++q)
      for (int j = 0; j < 4; ++j)
        EXPECT_EQ(core::weights_order_slot(16 * q + 8 * (s / 2) + 2 * (s % 2) + j / 2 + 4 * (j % 2)),
                  16 * s + 2 * q + (j % 2) + 8 * (j / 2));
  for (int chunk = 0; chunk < 8; ++chunk)
    for (int i = 0; i < 4; ++i)
      for (int h = 0; h < 2; ++h)
        EXPECT_EQ(core::weights_order_slot(8 * chunk + i + 4 * h), 8 * (4 * (chunk % 2) + i) + 2 * (chunk / 2) + h);
}

// The f16 operands of the register-operand kernel (fp8-block128 tokens staged as f16): every code in every
// position decodes to its value times 2^-14 (subnormal for 0.5) at its place in the f16 pairs order.
TEST(Formats, E2m1PairsConvertToTinyF16Exactly) {
  for_every_code_in_every_position([](std::uint32_t codes) {
    std::uint32_t words[4];
    core::e2m1x8_to_tiny_f16_pairs(codes, words);
    std::vector<int> seen(8, 0);
    for (int i = 0; i < 8; ++i) {
      const std::uint32_t nibble = (codes >> (4 * i)) & 0xFu;
      const int word = core::f16_pairs_word(i), half = core::f16_pairs_half(i);
      ++seen[static_cast<std::size_t>(2 * word + half)];
      const auto bits = static_cast<std::uint16_t>(words[word] >> (16 * half));
      ASSERT_TRUE(same_value(std::ldexp(expected_f16(bits), core::kTinyF16Exponent), expected_e2m1(nibble)))
          << "codes " << codes << " element " << i;
    }
    for (int slot = 0; slot < 8; ++slot) ASSERT_EQ(seen[static_cast<std::size_t>(slot)], 1);
  });
}

// The f16 decode's scale lifts (src/core/scale_codes.hpp): nv16 codes' table entries are their fp32 scales times 2^7,
// rounded to f16 (exactly: the scale times 2^7) in both halves; mx32 codes in f16's window (108 .. 132 and no
// other) lifted by their bits are the scale times 2^10; and every e2m1 value times 2^-14 times a lifted scale,
// multiplied as f16 (the host's f16x2_multiply rounds the exact product to f16), is the exact scaled value
// times 2^-7 (nv16) or 2^-4 (mx32).
TEST(Formats, E2m1TinyF16TimesLiftedScalesIsExact) {
  const auto check_products = [](std::uint32_t lifted, double scale, int weight_exponent, std::uint32_t s) {
    for (std::uint32_t code = 0; code < 16; ++code) {
      const std::uint32_t tiny = static_cast<std::uint32_t>(encode_f16(static_cast<float>(
                                     std::ldexp(expected_e2m1(code), -core::kTinyF16Exponent)))) * 0x00010001u;
      const std::uint32_t product = core::f16x2_multiply(tiny, lifted);
      for (int half = 0; half < 2; ++half)
        ASSERT_TRUE(same_value(expected_f16((product >> (16 * half)) & 0xFFFFu),
                               std::ldexp(expected_e2m1(code) * scale, -weight_exponent)))
            << "scale code " << s << ", e2m1 code " << code;
    }
  };
  for (std::uint32_t s = 0; s < 0x7Fu; ++s) {
    const double scale = expected_ue4m3(s);
    const std::uint32_t by_fp32 = core::f16x2_of(core::ue4m3_code_to_float(s) * core::kUe4m3F16Lift);
    ASSERT_EQ(expected_f16(by_fp32 & 0xFFFFu), std::ldexp(scale, 7)) << "scale code " << s;
    ASSERT_EQ(by_fp32 >> 16, by_fp32 & 0xFFFFu);
    check_products(by_fp32, scale, 7, s);
    ASSERT_EQ(core::ue4m3_lifted_f16x2_entry(s), by_fp32) << "scale code " << s;
  }
  for (std::uint32_t s = 0; s < 256; ++s) {
    ASSERT_EQ(core::ue8m0_lifts_exactly_f16(s), s >= 108 && s <= 132) << "scale code " << s;
    // The table's entry: 0 exactly where the code is outside the window (the kernel's test of a lookup).
    if (!core::ue8m0_lifts_exactly_f16(s)) {
      ASSERT_EQ(core::ue8m0_lifted_f16x2_entry(s), 0u) << "scale code " << s;
      continue;
    }
    ASSERT_EQ(core::ue8m0_lifted_f16x2_entry(s), core::ue8m0_lifted_f16x2(s)) << "scale code " << s;
    ASSERT_NE(core::ue8m0_lifted_f16x2_entry(s), 0u) << "scale code " << s;
    const std::uint32_t lifted = core::ue8m0_lifted_f16x2(s);
    ASSERT_EQ(expected_f16(lifted & 0xFFFFu), std::ldexp(expected_ue8m0(s), 10)) << "scale code " << s;
    ASSERT_EQ(lifted >> 16, lifted & 0xFFFFu);
    check_products(lifted, expected_ue8m0(s), 4, s);
  }
}

// The f16 operands' K order (core::weights_order_slot_f16) is a permutation of each 64-deep slice and the order
// their fragments read the weights in: word f16_pairs_word(e), half f16_pairs_half(e) of code word b of lane quad p
// feeds step 2 b + word / 2 at fragment element j = 2 (word % 2) + half, slot 16 s + 8 (j / 2) + 2 p + j % 2
// (mainloop_swapped.cuh's place_words); and stage_bf16.cu's store of chunk c's pair i at slot
// 8 (4 (c % 2) + i) + 2 (c / 2) writes word i of that chunk's elements there.
TEST(Formats, F16WeightsOrderIsTheFragmentOrder) {
  std::vector<int> seen(core::kWeightsOrderSlice, 0);
  for (int position = 0; position < core::kWeightsOrderSlice; ++position) {
    const int slot = core::weights_order_slot_f16(position);
    ASSERT_GE(slot, 0);
    ASSERT_LT(slot, core::kWeightsOrderSlice);
    ++seen[static_cast<std::size_t>(slot)];
    const int p = position / 16, b = (position / 8) % 2, e = position % 8;
    const int word = core::f16_pairs_word(e), half = core::f16_pairs_half(e);
    const int s = 2 * b + word / 2, j = 2 * (word % 2) + half;
    EXPECT_EQ(slot, 16 * s + 8 * (j / 2) + 2 * p + j % 2) << position;
    const int chunk = position / 8;
    EXPECT_EQ(slot, 8 * (4 * (chunk % 2) + word) + 2 * (chunk / 2) + half) << position;
  }
  for (int slot = 0; slot < core::kWeightsOrderSlice; ++slot) EXPECT_EQ(seen[static_cast<std::size_t>(slot)], 1) << slot;
}

// The f16 staging of fp8-block128 tokens (src/core/stage_bf16.hpp): a chunk's element e lands at word
// f16_pairs_word(e), half f16_pairs_half(e), as its e4m3 value times the staging scale rounded to nearest even
// f16; rows' powers of two bring their largest product into [2^8, 2^9); blocks of zeros under any scale stage as
// zeros.
TEST(Formats, Block128TokensStageAsF16) {
  std::mt19937 rng(2041);
  for (int trial = 0; trial < 4000; ++trial) {
    std::uint32_t codes[2] = {static_cast<std::uint32_t>(rng()), static_cast<std::uint32_t>(rng())};
    const float scale = std::ldexp(static_cast<float>(1 + rng() % 1000) / 1000.0f, static_cast<int>(rng() % 40) - 20);
    std::uint32_t pairs[4];
    core::stage_block128_f16_chunk(codes, scale, pairs);
    for (int e = 0; e < 8; ++e) {
      const auto code = static_cast<std::uint8_t>(codes[e / 4] >> (8 * (e % 4)));
      const auto staged = static_cast<std::uint16_t>(pairs[core::f16_pairs_word(e)] >> (16 * core::f16_pairs_half(e)));
      const double value = expected_e4m3(code);
      if (std::isnan(value)) {
        EXPECT_TRUE(std::isnan(expected_f16(staged))) << "trial " << trial;
        continue;
      }
      EXPECT_EQ(staged, encode_f16(static_cast<float>(value) * scale)) << "trial " << trial << " element " << e;
      const double exact = value * scale;
      if (std::fabs(exact) >= 0x1p-14 && std::fabs(exact) <= 65504.0)  // f16's normal range
        EXPECT_LE(std::fabs(expected_f16(staged) - exact), std::ldexp(std::fabs(exact), -11)) << "trial " << trial;
    }
  }
  EXPECT_EQ(core::block128_token_exponent(0), 0);
  EXPECT_EQ(core::block128_token_exponent(detail::float_to_bits(std::numeric_limits<float>::infinity())), 0);
  EXPECT_EQ(core::block128_token_exponent(0x7FC00000u), 0);
  EXPECT_EQ(core::block128_token_exponent(detail::float_to_bits(1.0f)), -8);
  EXPECT_EQ(core::block128_token_exponent(detail::float_to_bits(448.0f)), 0);
  EXPECT_EQ(core::block128_token_exponent(detail::float_to_bits(0x1p-118f)), -126);
  EXPECT_EQ(core::block128_token_exponent(detail::float_to_bits(0x1p-125f)), -126);
  EXPECT_EQ(core::block128_token_exponent(1u), -126);  // the smallest subnormal
  EXPECT_EQ(core::block128_token_exponent(detail::float_to_bits(0x1.fffffep127f)), 119);
  for (int trial = 0; trial < 2000; ++trial) {
    // 2^-118 .. 2^128 (below, E is clamped at -126)
    const float largest = std::ldexp(0.5f + static_cast<float>(rng() % 100000) / 200000.0f, static_cast<int>(rng() % 246) - 117);
    const int e = core::block128_token_exponent(detail::float_to_bits(largest));
    EXPECT_EQ(core::power_of_two(e), std::ldexp(1.0f, e));
    EXPECT_GE(largest * core::power_of_two(-e), 256.0f) << largest;
    EXPECT_LT(largest * core::power_of_two(-e), 512.0f) << largest;
  }
  // A row staged with its scales' bound (448 x the largest |s|) keeps the bound's exponent while its largest value
  // lies within kBlock128BoundSlack binades below it: amax / 448 scales (the bound itself), ue8m0 scales (a binade
  // at most), and takes the largest value's own further below (a large scale over codes of zeros beside small
  // blocks) or above a bound that is not finite; rows of zeros and rows holding a NaN keep the bound's.
  const auto bits = [](float x) { return detail::float_to_bits(x); };
  EXPECT_EQ(core::block128_row_exponent(core::block128_token_exponent(bits(448.0f * 0x1p-20f)), bits(448.0f * 0x1p-20f)), -20);
  EXPECT_EQ(core::block128_row_exponent(-20, bits(240.0f * 0x1p-20f)), -20);  // an ue8m0 block's largest code 240
  EXPECT_EQ(core::block128_row_exponent(-20, bits(0x1p-16f)), -20);            // kBlock128BoundSlack binades below
  EXPECT_EQ(core::block128_row_exponent(-20, bits(0x1.fffffep-17f)), -25);     // further below: its own
  EXPECT_EQ(core::block128_row_exponent(100, bits(3.0f)), -7);
  EXPECT_EQ(core::block128_row_exponent(0, bits(0x1p127f)), 119);  // the bound overflowed fp32: 0 from it
  EXPECT_EQ(core::block128_row_exponent(37, 0u), 37);
  EXPECT_EQ(core::block128_row_exponent(37, 0x7FC00000u), 37);
  for (int trial = 0; trial < 2000; ++trial) {
    // Whatever the bound, the row's largest value lands in [2^(8 - slack), 2^9) and nothing overflows f16.
    const float largest = std::ldexp(0.5f + static_cast<float>(rng() % 100000) / 200000.0f, static_cast<int>(rng() % 200) - 90);
    const float bound = largest * std::ldexp(1.0f, static_cast<int>(rng() % 12));
    const int e = core::block128_row_exponent(core::block128_token_exponent(bits(bound)), bits(largest));
    EXPECT_GE(largest * core::power_of_two(-e), std::ldexp(1.0f, 8 - core::kBlock128BoundSlack)) << largest << " " << bound;
    EXPECT_LT(largest * core::power_of_two(-e), 512.0f) << largest << " " << bound;
  }
  // A block whose scale times 2^-E overflows holds only zeros: it stages at the largest finite scale, so 0 x s
  // stays 0; infinite and NaN scales stay as they are.
  EXPECT_EQ(core::block128_staging_scale(0x1p100f, -120), std::numeric_limits<float>::max());
  EXPECT_EQ(core::block128_staging_scale(-0x1p100f, -120), -std::numeric_limits<float>::max());
  EXPECT_EQ(core::block128_staging_scale(0x1p100f, 10), 0x1p90f);
  EXPECT_EQ(core::block128_staging_scale(std::numeric_limits<float>::infinity(), -120), std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(core::block128_staging_scale(std::numeric_limits<float>::quiet_NaN(), 0)));
  const std::uint32_t zeros[2] = {0x80008000u, 0u};
  std::uint32_t staged[4];
  core::stage_block128_f16_chunk(zeros, core::block128_staging_scale(0x1p100f, -120), staged);
  for (const std::uint32_t w : staged) EXPECT_EQ(w & 0x7FFF7FFFu, 0u);
}

TEST(Formats, DecodeEveryScaleCode) {
  for (std::uint32_t c = 0; c < 256; ++c) {
    EXPECT_TRUE(same_value(decode_ue8m0(static_cast<std::uint8_t>(c)), expected_ue8m0(c))) << "ue8m0 code " << c;
    EXPECT_TRUE(same_value(decode_ue4m3(static_cast<std::uint8_t>(c)), expected_ue4m3(c))) << "ue4m3 code " << c;
  }
  EXPECT_EQ(decode_ue8m0(0), std::ldexp(1.0f, -127));
  EXPECT_EQ(decode_ue8m0(127), 1.0f);
  EXPECT_EQ(decode_ue8m0(254), std::ldexp(1.0f, 127));
  EXPECT_EQ(decode_ue4m3(0xB8), 1.0f);  // the sign bit is ignored
}

TEST(Formats, DecodeEvery16BitCode) {
  for (std::uint32_t c = 0; c < 65536; ++c) {
    const auto bits = static_cast<std::uint16_t>(c);
    ASSERT_TRUE(same_value(decode_f16(bits), expected_f16(c))) << "f16 code " << c;
    ASSERT_TRUE(same_value(decode_bf16(bits), expected_bf16(c))) << "bf16 code " << c;
  }
}

TEST(Formats, DecodeByDataType) {
  for (std::uint32_t c = 0; c < 256; ++c) {
    const auto code = static_cast<std::uint8_t>(c);
    EXPECT_TRUE(same_value(decode(DataType::e4m3, code), expected_e4m3(c)));
    EXPECT_TRUE(same_value(decode(DataType::e5m2, code), expected_e5m2(c)));
    EXPECT_TRUE(same_value(decode(DataType::e2m1, code), expected_e2m1(c & 0xFu)));
    EXPECT_TRUE(same_value(decode(DataType::ue8m0, code), expected_ue8m0(c)));
    EXPECT_TRUE(same_value(decode(DataType::ue4m3, code), expected_ue4m3(c)));
  }
}

TEST(Formats, EncodeOfDecodeIsIdentity) {
  for (std::uint32_t c = 0; c < 256; ++c) {
    const auto code = static_cast<std::uint8_t>(c);
    if (!std::isnan(expected_e4m3(c))) {
      EXPECT_EQ(encode_e4m3(decode_e4m3(code), Overflow::saturate), code) << "e4m3 " << c;
      EXPECT_EQ(encode_e4m3(decode_e4m3(code), Overflow::non_saturating), code) << "e4m3 " << c;
      EXPECT_EQ(encode(DataType::e4m3, decode_e4m3(code)), code) << "e4m3 " << c;
    }
    const double e5m2 = expected_e5m2(c);
    if (!std::isnan(e5m2)) {
      EXPECT_EQ(encode_e5m2(decode_e5m2(code), Overflow::non_saturating), code) << "e5m2 " << c;
      // Saturation maps the infinities to the largest finite value, every other code to itself.
      const std::uint8_t saturated = std::isinf(e5m2) ? static_cast<std::uint8_t>((c & 0x80u) | 0x7Bu) : code;
      EXPECT_EQ(encode_e5m2(decode_e5m2(code), Overflow::saturate), saturated) << "e5m2 " << c;
    }
    if (c != 0xFFu) {
      EXPECT_EQ(encode_ue8m0(decode_ue8m0(code), Ue8m0Rounding::floor), code) << "ue8m0 " << c;
      EXPECT_EQ(encode_ue8m0(decode_ue8m0(code), Ue8m0Rounding::ceil), code) << "ue8m0 " << c;
      EXPECT_EQ(encode_ue8m0(decode_ue8m0(code), Ue8m0Rounding::nearest_up), code) << "ue8m0 " << c;
    }
    if (c < 0x7Fu) {
      EXPECT_EQ(encode_ue4m3(decode_ue4m3(code)), code) << "ue4m3 " << c;
    }
  }
  for (std::uint32_t c = 0; c < 16; ++c)  // including -0 (code 8)
    EXPECT_EQ(encode_e2m1(decode_e2m1(static_cast<std::uint8_t>(c))), c) << "e2m1 " << c;
  for (std::uint32_t c = 0; c < 65536; ++c) {
    const auto bits = static_cast<std::uint16_t>(c);
    if (!std::isnan(expected_f16(c))) {
      ASSERT_EQ(encode_f16(decode_f16(bits)), bits) << "f16 " << c;
    }
    if (!std::isnan(expected_bf16(c))) {
      ASSERT_EQ(encode_bf16(decode_bf16(bits)), bits) << "bf16 " << c;
    }
  }
}

TEST(Formats, NaNEncodings) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(encode_e4m3(nan), 0x7F);
  EXPECT_EQ(encode_e4m3(-nan), 0xFF);
  EXPECT_EQ(encode_e4m3(nan, Overflow::non_saturating), 0x7F);
  EXPECT_TRUE(std::isnan(expected_e5m2(encode_e5m2(nan))));
  EXPECT_TRUE(std::isnan(expected_e5m2(encode_e5m2(nan, Overflow::non_saturating))));
  EXPECT_EQ(encode_e2m1(nan), 0x7);  // e2m1 has no NaN: +6, as formats.hpp documents
  EXPECT_EQ(encode_ue8m0(nan), 0xFF);
  EXPECT_EQ(encode_ue4m3(nan), 0x7F);
  EXPECT_TRUE(std::isnan(expected_f16(encode_f16(nan))));
  EXPECT_TRUE(std::isnan(expected_bf16(encode_bf16(nan))));
  EXPECT_TRUE(std::signbit(decode_bf16(encode_bf16(-nan))));
  // A signalling NaN pattern stays a NaN (is not truncated to inf) in bf16.
  EXPECT_TRUE(std::isnan(expected_bf16(encode_bf16(bits_float(0x7F800001u)))));
}

// ---- rounding ---------------------------------------------------------------------------------

struct CodeValue {
  std::uint32_t code;
  double value;
};

// Checks round-to-nearest-even of `encoder` between every pair of adjacent non-negative finite
// values of a format: each midpoint goes to the neighbour with an even code (the one whose last
// mantissa bit is 0), the floats just above and below it to the nearer neighbour, and the same
// holds with the sign flipped (`sign_bit` set in the code).
void check_midpoints(const char* name, std::vector<CodeValue> values, std::uint32_t sign_bit,
                     const std::function<std::uint32_t(float)>& encoder) {
  std::sort(values.begin(), values.end(), [](const CodeValue& a, const CodeValue& b) { return a.value < b.value; });
  int failures = 0;
  for (std::size_t i = 0; i + 1 < values.size() && failures < 10; ++i) {
    const CodeValue lo = values[i], hi = values[i + 1];
    ASSERT_EQ(hi.code, lo.code + 1) << name << ": codes are ordered as their values";
    const double mid = (lo.value + hi.value) / 2;
    const auto mid_f = static_cast<float>(mid);
    ASSERT_EQ(static_cast<double>(mid_f), mid) << name << ": every midpoint is an fp32 value";
    const std::uint32_t even = lo.code % 2 == 0 ? lo.code : hi.code;
    const float above = std::nextafter(mid_f, std::numeric_limits<float>::infinity());
    const float below = std::nextafter(mid_f, 0.0f);
    const struct {
      float x;
      std::uint32_t want;
    } cases[] = {{mid_f, even},
                 {above, hi.code},
                 {below, lo.code},
                 {static_cast<float>(lo.value), lo.code},
                 {-mid_f, even | sign_bit},
                 {-above, hi.code | sign_bit},
                 {-below, lo.code | sign_bit}};
    for (const auto& c : cases) {
      const std::uint32_t got = encoder(c.x);
      if (got != c.want) {
        ADD_FAILURE() << name << ": encode(" << c.x << ") = 0x" << std::hex << got << ", expected 0x" << c.want;
        ++failures;
      }
    }
  }
}

std::vector<CodeValue> finite_non_negative(std::uint32_t count, double (*expected)(std::uint32_t)) {
  std::vector<CodeValue> out;
  for (std::uint32_t c = 0; c < count; ++c) {
    const double v = expected(c);
    if (std::isfinite(v) && !std::signbit(v)) out.push_back({c, v});
  }
  return out;
}

TEST(Formats, MidpointsRoundToNearestEven) {
  for (const Overflow overflow : {Overflow::saturate, Overflow::non_saturating}) {
    check_midpoints("e4m3", finite_non_negative(256, expected_e4m3), 0x80,
                    [&](float x) { return encode_e4m3(x, overflow); });
    check_midpoints("e5m2", finite_non_negative(256, expected_e5m2), 0x80,
                    [&](float x) { return encode_e5m2(x, overflow); });
  }
  check_midpoints("e2m1", finite_non_negative(16, expected_e2m1), 0x8, [](float x) { return encode_e2m1(x); });
  check_midpoints("ue4m3", finite_non_negative(128, expected_ue4m3), 0, [](float x) { return encode_ue4m3(x); });
  check_midpoints("f16", finite_non_negative(65536, expected_f16), 0x8000, [](float x) { return encode_f16(x); });
  check_midpoints("bf16", finite_non_negative(65536, expected_bf16), 0x8000, [](float x) { return encode_bf16(x); });
}

TEST(Formats, SubnormalsByHand) {
  // e4m3 subnormals are m * 2^-9.
  EXPECT_EQ(encode_e4m3(std::ldexp(1.0f, -9)), 0x01);
  EXPECT_EQ(encode_e4m3(std::ldexp(1.0f, -10)), 0x00);    // half the smallest: tie to even 0
  EXPECT_EQ(encode_e4m3(std::ldexp(1.5f, -10)), 0x01);    // 0.75 of the smallest: nearer to it
  EXPECT_EQ(encode_e4m3(std::ldexp(3.0f, -10)), 0x02);    // 1.5 * 2^-9: tie between codes 1 and 2
  EXPECT_EQ(encode_e4m3(std::ldexp(15.0f, -10)), 0x08);   // 7.5 * 2^-9: tie, 0x07 is odd -> 2^-6
  EXPECT_EQ(encode_e4m3(-std::ldexp(1.0f, -11)), 0x80);   // rounds to -0
  EXPECT_EQ(encode_e4m3(bits_float(0x00000001u)), 0x00);  // an fp32 subnormal
  EXPECT_EQ(encode_e4m3(bits_float(0x80000001u)), 0x80);
  // e5m2 subnormals are m * 2^-16.
  EXPECT_EQ(encode_e5m2(std::ldexp(1.0f, -16)), 0x01);
  EXPECT_EQ(encode_e5m2(std::ldexp(3.0f, -17)), 0x02);  // tie between codes 1 and 2
  EXPECT_EQ(encode_e5m2(std::ldexp(1.0f, -17)), 0x00);
  // e2m1: 0.5 is the only subnormal.
  EXPECT_EQ(encode_e2m1(0.25f), 0x0);
  EXPECT_EQ(encode_e2m1(0.26f), 0x1);
  EXPECT_EQ(encode_e2m1(0.75f), 0x2);  // tie between 0.5 and 1: code 2 is even
  EXPECT_EQ(encode_e2m1(-0.1f), 0x8);
  // f16 subnormals are m * 2^-24; bf16 ones m * 2^-133.
  EXPECT_EQ(encode_f16(std::ldexp(1.0f, -24)), 0x0001);
  EXPECT_EQ(encode_f16(std::ldexp(1.0f, -25)), 0x0000);
  EXPECT_EQ(encode_f16(std::ldexp(3.0f, -25)), 0x0002);
  EXPECT_EQ(encode_bf16(std::ldexp(1.0f, -133)), 0x0001);
  EXPECT_EQ(encode_bf16(std::ldexp(3.0f, -134)), 0x0002);
}

TEST(Formats, OverflowRules) {
  const float inf = std::numeric_limits<float>::infinity();
  // e4m3: the step at the top is 32, so the midpoint above 448 is 464 (a tie: 448 = 0x7E is even).
  for (const float x : {448.0f, 449.0f, 464.0f, 465.0f, 480.0f, 1e30f, inf}) {
    EXPECT_EQ(encode_e4m3(x, Overflow::saturate), 0x7E) << x;
    EXPECT_EQ(encode_e4m3(-x, Overflow::saturate), 0xFE) << x;
  }
  EXPECT_EQ(encode_e4m3(464.0f, Overflow::non_saturating), 0x7E);
  EXPECT_EQ(encode_e4m3(std::nextafter(464.0f, inf), Overflow::non_saturating), 0x7F);
  for (const float x : {480.0f, 500.0f, 1e30f, inf}) {
    EXPECT_EQ(encode_e4m3(x, Overflow::non_saturating), 0x7F) << x;
    EXPECT_EQ(encode_e4m3(-x, Overflow::non_saturating), 0xFF) << x;
  }
  // e5m2: the step at the top is 8192, the midpoint 61440 is a tie and 0x7B is odd: inf wins.
  for (const float x : {57344.0f, 61439.0f, 61440.0f, 1e30f, inf}) {
    EXPECT_EQ(encode_e5m2(x, Overflow::saturate), 0x7B) << x;
    EXPECT_EQ(encode_e5m2(-x, Overflow::saturate), 0xFB) << x;
  }
  EXPECT_EQ(encode_e5m2(std::nextafter(61440.0f, 0.0f), Overflow::non_saturating), 0x7B);
  EXPECT_EQ(encode_e5m2(61440.0f, Overflow::non_saturating), 0x7C);
  EXPECT_EQ(encode_e5m2(inf, Overflow::non_saturating), 0x7C);
  EXPECT_EQ(encode_e5m2(-1e30f, Overflow::non_saturating), 0xFC);
  // e2m1 always saturates; 5 is a tie between 4 (code 6) and 6 (code 7).
  EXPECT_EQ(encode_e2m1(5.0f), 0x6);
  EXPECT_EQ(encode_e2m1(5.001f), 0x7);
  for (const float x : {6.0f, 7.0f, 1e30f, inf}) {
    EXPECT_EQ(encode_e2m1(x), 0x7) << x;
    EXPECT_EQ(encode_e2m1(-x), 0xF) << x;
  }
  // ue4m3: saturating, sign ignored.
  EXPECT_EQ(encode_ue4m3(500.0f), 0x7E);
  EXPECT_EQ(encode_ue4m3(-2.0f), 0x40);
  EXPECT_EQ(encode_ue4m3(inf), 0x7E);
  // f16: max 65504, step 32 at the top, midpoint 65520 is a tie and 0x7BFF is odd.
  EXPECT_EQ(encode_f16(65504.0f), 0x7BFF);
  EXPECT_EQ(encode_f16(std::nextafter(65520.0f, 0.0f)), 0x7BFF);
  EXPECT_EQ(encode_f16(65520.0f), 0x7C00);
  EXPECT_EQ(encode_f16(-inf), 0xFC00);
  // bf16: the largest finite value is 0x7F7F; halfway to 2^128 is a tie and 0x7F7F is odd.
  const float bf16_max = decode_bf16(0x7F7F);
  const float bf16_mid = static_cast<float>((static_cast<double>(bf16_max) + std::ldexp(1.0, 128)) / 2);
  EXPECT_EQ(encode_bf16(std::nextafter(bf16_mid, 0.0f)), 0x7F7F);
  EXPECT_EQ(encode_bf16(bf16_mid), 0x7F80);
  EXPECT_EQ(encode_bf16(inf), 0x7F80);
  EXPECT_EQ(encode_bf16(-inf), 0xFF80);
}

TEST(Formats, Ue8m0RoundingModes) {
  const float inf = std::numeric_limits<float>::infinity();
  struct Case {
    float x;
    int floor, ceil, nearest_up;
  };
  const Case cases[] = {
      {1.0f, 127, 127, 127},
      {1.5f, 127, 128, 128},  // the arithmetic midpoint of 1 and 2 rounds up
      {std::nextafter(1.5f, 0.0f), 127, 128, 127},
      {1.25f, 127, 128, 127},
      {0.75f, 126, 127, 127},
      {3.0f, 128, 129, 129},
      {-4.0f, 129, 129, 129},  // |x|
      {0.0f, 0, 0, 0},
      {bits_float(0x00400000u), 0, 0, 0},  // 2^-127, an fp32 subnormal: code 0 exactly
      {bits_float(0x00600000u), 0, 1, 1},  // 1.5 * 2^-127
      {bits_float(0x00500000u), 0, 1, 0},  // 1.25 * 2^-127
      {std::ldexp(1.0f, -130), 0, 0, 0},   // below 2^-127: clamped to code 0
      {bits_float(0x00000001u), 0, 0, 0},
      {std::ldexp(1.0f, 127), 254, 254, 254},
      {std::ldexp(1.5f, 127), 254, 254, 254},  // 2^128 does not exist: clamped to 254
      {std::numeric_limits<float>::max(), 254, 254, 254},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(encode_ue8m0(c.x, Ue8m0Rounding::floor), c.floor) << c.x;
    EXPECT_EQ(encode_ue8m0(c.x, Ue8m0Rounding::ceil), c.ceil) << c.x;
    EXPECT_EQ(encode_ue8m0(c.x, Ue8m0Rounding::nearest_up), c.nearest_up) << c.x;
  }
  for (const Ue8m0Rounding r : {Ue8m0Rounding::floor, Ue8m0Rounding::ceil, Ue8m0Rounding::nearest_up}) {
    EXPECT_EQ(encode_ue8m0(inf, r), 0xFF);
    EXPECT_EQ(encode_ue8m0(-inf, r), 0xFF);
    EXPECT_EQ(encode_ue8m0(std::numeric_limits<float>::quiet_NaN(), r), 0xFF);
  }
  // Every normal binade: 2^e, just above it, 1.5 * 2^e and just below that.
  for (int e = -126; e <= 127; ++e) {
    const int code = e + 127, up = std::min(code + 1, 254);
    const float p = std::ldexp(1.0f, e);
    const float above = std::nextafter(p, inf);
    const float half = std::ldexp(1.5f, e);
    const float below_half = std::nextafter(half, 0.0f);
    EXPECT_EQ(encode_ue8m0(p, Ue8m0Rounding::floor), code);
    EXPECT_EQ(encode_ue8m0(p, Ue8m0Rounding::ceil), code);
    EXPECT_EQ(encode_ue8m0(p, Ue8m0Rounding::nearest_up), code);
    EXPECT_EQ(encode_ue8m0(above, Ue8m0Rounding::floor), code);
    EXPECT_EQ(encode_ue8m0(above, Ue8m0Rounding::ceil), up);
    EXPECT_EQ(encode_ue8m0(above, Ue8m0Rounding::nearest_up), code);
    EXPECT_EQ(encode_ue8m0(half, Ue8m0Rounding::floor), code);
    EXPECT_EQ(encode_ue8m0(half, Ue8m0Rounding::ceil), up);
    EXPECT_EQ(encode_ue8m0(half, Ue8m0Rounding::nearest_up), up);
    EXPECT_EQ(encode_ue8m0(below_half, Ue8m0Rounding::nearest_up), code);
  }
}

// ---- packing and by-type access ---------------------------------------------------------------

TEST(Formats, SizesAndPacking) {
  EXPECT_EQ(bits_of(DataType::e2m1), 4);
  EXPECT_EQ(bits_of(DataType::e4m3), 8);
  EXPECT_EQ(bits_of(DataType::ue8m0), 8);
  EXPECT_EQ(bits_of(DataType::bf16), 16);
  EXPECT_EQ(bits_of(DataType::f32), 32);
  EXPECT_EQ(bytes_for(DataType::e2m1, 3), 2);
  EXPECT_EQ(bytes_for(DataType::e2m1, 4), 2);
  EXPECT_EQ(bytes_for(DataType::e5m2, 3), 3);
  EXPECT_EQ(bytes_for(DataType::f16, 3), 6);
  EXPECT_EQ(bytes_for(DataType::f32, 3), 12);

  // Two e2m1 codes per byte, low nibble first; a store changes only its own nibble.
  std::uint8_t bytes[3] = {0xAA, 0xAA, 0xAA};
  store_code(DataType::e2m1, bytes, 0, 0x1);
  EXPECT_EQ(bytes[0], 0xA1);
  store_code(DataType::e2m1, bytes, 1, 0x2);
  EXPECT_EQ(bytes[0], 0x21);
  store_code(DataType::e2m1, bytes, 3, 0x1F);  // only the low nibble of the code is stored
  EXPECT_EQ(bytes[1], 0xFA);
  EXPECT_EQ(bytes[2], 0xAA);
  EXPECT_EQ(load_code(DataType::e2m1, bytes, 0), 0x1);
  EXPECT_EQ(load_code(DataType::e2m1, bytes, 1), 0x2);
  EXPECT_EQ(load_code(DataType::e2m1, bytes, 2), 0xA);
  EXPECT_EQ(load_code(DataType::e2m1, bytes, 3), 0xF);
  for (std::uint32_t lo = 0; lo < 16; ++lo) {
    for (std::uint32_t hi = 0; hi < 16; ++hi) {
      std::uint8_t pair[2] = {0, 0x5C};
      store_code(DataType::e2m1, pair, 2, static_cast<std::uint8_t>(lo));
      store_code(DataType::e2m1, pair, 3, static_cast<std::uint8_t>(hi));
      ASSERT_EQ(pair[1], lo | (hi << 4));
      ASSERT_EQ(pair[0], 0);
      ASSERT_EQ(load_code(DataType::e2m1, pair, 2), lo);
      ASSERT_EQ(load_code(DataType::e2m1, pair, 3), hi);
    }
  }
  // 8-bit formats: one byte per element.
  std::uint8_t eight[2] = {0, 0};
  store_code(DataType::e4m3, eight, 1, 0xC4);
  EXPECT_EQ(eight[0], 0);
  EXPECT_EQ(eight[1], 0xC4);
  EXPECT_EQ(load_code(DataType::ue8m0, eight, 1), 0xC4);
}

TEST(Formats, LoadAndStoreValues) {
  float f32[2] = {0, 0};
  store_value(DataType::f32, f32, 1, 1.1f);
  EXPECT_EQ(f32[1], 1.1f);
  EXPECT_EQ(load_value(DataType::f32, f32, 1), 1.1f);
  std::uint16_t half[2] = {0, 0};
  store_value(DataType::f16, half, 1, 1.0f + std::ldexp(1.0f, -11));  // a tie: rounds to 1.0 (even)
  EXPECT_EQ(half[1], 0x3C00);
  store_value(DataType::bf16, half, 0, -2.0f);
  EXPECT_EQ(half[0], 0xC000);
  EXPECT_EQ(load_value(DataType::bf16, half, 0), -2.0f);
  EXPECT_EQ(load_value(DataType::f16, half, 1), 1.0f);
  std::uint8_t codes[1] = {0};
  store_value(DataType::e2m1, codes, 1, -3.0f);
  EXPECT_EQ(codes[0], 0xD0);
  EXPECT_EQ(load_value(DataType::e2m1, codes, 1), -3.0f);
  EXPECT_EQ(max_finite(DataType::e4m3), 448.0f);
  EXPECT_EQ(max_finite(DataType::e5m2), 57344.0f);
  EXPECT_EQ(max_finite(DataType::e2m1), 6.0f);
  EXPECT_EQ(max_finite(DataType::f16), decode_f16(0x7BFF));
  EXPECT_EQ(max_finite(DataType::bf16), decode_bf16(0x7F7F));
  EXPECT_EQ(max_finite(DataType::ue8m0), decode_ue8m0(254));
}

// For every scale code with every e2m1 code in every position and random words: the staging pass's FP4 chunk
// straight from its codes (`from_codes`) is, bit for bit, what the widened path (e4m3 codes, then
// stage_chunk_pairs with the scale `decode_scale` gives) makes of the same codes, and each element in the pairs
// order is `element_value` of its exact product, computed here in double.
template <typename FromCodes, typename DecodeScale, typename ElementValue>
void expect_fp4_chunks_from_codes_are_the_widened_ones(FromCodes from_codes, DecodeScale decode_scale,
                                                        double (*expected_scale)(std::uint32_t),
                                                        ElementValue element_value, std::uint32_t seed) {
  std::mt19937 rng(seed);
  for (std::uint32_t s = 0; s < 256; ++s) {
    const auto scale_code = static_cast<std::uint8_t>(s);
    const auto check = [&](std::uint32_t packed) {
      std::uint32_t widened[2], expected[4], staged[4];
      core::widen_fp4_chunk(packed, widened);
      core::stage_chunk_pairs(widened, /*e5m2=*/false, decode_scale(scale_code), expected);
      from_codes(packed, scale_code, staged);
      for (int i = 0; i < 4; ++i) ASSERT_EQ(staged[i], expected[i]) << "scale code " << s << " codes " << packed << " pair " << i;
      for (int e = 0; e < 8; ++e) {
        const double exact = expected_e2m1((packed >> (4 * e)) & 0xFu) * expected_scale(s);
        ASSERT_TRUE(same_value(decode_bf16(pairs_element(staged, e)), element_value(exact)))
            << "scale code " << s << " codes " << packed << " element " << e;
      }
    };
    for_every_code_in_every_position(check);
    for (int trial = 0; trial < 256 && !::testing::Test::HasFatalFailure(); ++trial) check(static_cast<std::uint32_t>(rng()));
    if (::testing::Test::HasFatalFailure()) return;
  }
}

// nvfp4 (core::stage_nv16_fp4_chunk_pairs, the ue4m3 scale): the sign bit, zero, the subnormals and NaN
// included; every product is exact.
TEST(Formats, Nv16Fp4ChunksFromTheirCodesAreTheWidenedOnes) {
  ASSERT_EQ(decode_bf16(core::kBf16TwoTo120), std::ldexp(1.0f, 120));
  expect_fp4_chunks_from_codes_are_the_widened_ones(
      [](std::uint32_t packed, std::uint32_t code, std::uint32_t(&pairs)[4]) { core::stage_nv16_fp4_chunk_pairs(packed, code, pairs); },
      [](std::uint8_t code) { return decode_ue4m3(code); }, expected_ue4m3, [](double exact) { return exact; }, 2037);
}

// mxfp4 (core::stage_mx32_fp4_chunk_pairs, the ue8m0 scale): zero's subnormal 2^-127, the largest scales, whose
// products overflow to infinity, and NaN included; every product is exact, or infinity past bf16's largest
// finite value.
TEST(Formats, Mx32Fp4ChunksFromTheirCodesAreTheWidenedOnes) {
  const double largest_bf16 = std::ldexp(2.0 - std::ldexp(1.0, -7), 127);
  expect_fp4_chunks_from_codes_are_the_widened_ones(
      [](std::uint32_t packed, std::uint32_t code, std::uint32_t(&pairs)[4]) { core::stage_mx32_fp4_chunk_pairs(packed, code, pairs); },
      [](std::uint8_t code) { return decode_ue8m0(code); }, expected_ue8m0,
      [&](double exact) { return std::fabs(exact) > largest_bf16 ? std::copysign(kInf, exact) : exact; }, 2039);
}

// ---- the PyTorch golden file ------------------------------------------------------------------

class TorchGolden : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const std::string path = std::string(BSGEMM_SOURCE_DIR) + "/tests/data/formats-torch.json";
    status_ = json::parse_file(path, &document_);
  }

  // document[section][name], which must be an array.
  static const json::Value& array(const char* section, const char* name) {
    static const json::Value missing;
    const json::Value* s = document_.find(section);
    const json::Value* a = s ? s->find(name) : nullptr;
    return a && a->is_array() ? *a : missing;
  }

  static Status status_;
  static json::Value document_;
};

Status TorchGolden::status_;
json::Value TorchGolden::document_;

double golden_number(const json::Value& v) {
  if (v.is_number()) return v.number;
  if (v.is_string() && v.string == "nan") return kNaN;
  if (v.is_string() && v.string == "inf") return kInf;
  if (v.is_string() && v.string == "-inf") return -kInf;
  ADD_FAILURE() << "unexpected entry in the golden file";
  return 0;
}

TEST_F(TorchGolden, DecodeTables) {
  ASSERT_TRUE(status_.ok()) << status_.message;
  const struct {
    const char* name;
    float (*decoder)(std::uint8_t);
  } formats[] = {{"e4m3", decode_e4m3}, {"e5m2", decode_e5m2}, {"ue8m0", decode_ue8m0}};
  for (const auto& f : formats) {
    const json::Value& table = array("decode", f.name);
    ASSERT_EQ(table.array.size(), 256u) << f.name;
    for (std::uint32_t c = 0; c < 256; ++c) {
      const double torch = golden_number(table.array[c]);
      EXPECT_TRUE(same_value(f.decoder(static_cast<std::uint8_t>(c)), torch)) << f.name << " code " << c;
    }
  }
}

TEST_F(TorchGolden, EncodeTables) {
  ASSERT_TRUE(status_.ok()) << status_.message;
  const json::Value& inputs = array("encode", "inputs_fp32_hex");
  const json::Value& e4m3 = array("encode", "e4m3");
  const json::Value& e5m2 = array("encode", "e5m2");
  const json::Value& ue8m0 = array("encode", "ue8m0");
  ASSERT_EQ(inputs.array.size(), 3282u);
  ASSERT_EQ(e4m3.array.size(), inputs.array.size());
  ASSERT_EQ(e5m2.array.size(), inputs.array.size());
  ASSERT_EQ(ue8m0.array.size(), inputs.array.size());

  int mismatches = 0, saturated_e4m3 = 0, saturated_e5m2 = 0;
  for (std::size_t i = 0; i < inputs.array.size(); ++i) {
    const std::string& hex = inputs.array[i].string;
    std::uint32_t bits = 0;
    const auto parsed = std::from_chars(hex.data(), hex.data() + hex.size(), bits, 16);
    ASSERT_TRUE(hex.size() == 8 && parsed.ec == std::errc() && parsed.ptr == hex.data() + hex.size()) << hex;
    const float x = bits_float(bits);
    const auto torch_e4m3 = static_cast<std::uint32_t>(e4m3.array[i].number);
    const auto torch_e5m2 = static_cast<std::uint32_t>(e5m2.array[i].number);
    const auto torch_ue8m0 = static_cast<std::uint32_t>(ue8m0.array[i].number);

    // torch's casts: round to nearest even, no saturation; ue8m0 to the nearest power, ties up.
    const std::uint32_t ours_e4m3 = encode_e4m3(x, Overflow::non_saturating);
    const std::uint32_t ours_e5m2 = encode_e5m2(x, Overflow::non_saturating);
    const std::uint32_t ours_ue8m0 = encode_ue8m0(x, Ue8m0Rounding::nearest_up);
    if (ours_e4m3 != torch_e4m3 || ours_e5m2 != torch_e5m2 || ours_ue8m0 != torch_ue8m0) {
      if (++mismatches <= 10)
        ADD_FAILURE() << "input " << hex << " (" << x << "): e4m3 " << ours_e4m3 << " vs torch " << torch_e4m3
                      << ", e5m2 " << ours_e5m2 << " vs " << torch_e5m2 << ", ue8m0 " << ours_ue8m0 << " vs "
                      << torch_ue8m0;
    }

    // The saturating encoder differs from torch exactly where |x| rounds beyond the largest finite
    // value, and gives the largest finite value with x's sign there. By hand: the e4m3 step at
    // the top is 32, so the bound is 448 + 16 = 464, a tie that rounds to 448 (0x7E is even), so
    // e4m3 overflows for |x| > 464; the e5m2 step is 8192, the bound 61440 ties away from the odd
    // 0x7B to inf, so e5m2 overflows for |x| >= 61440.
    const std::uint32_t sign = bits >> 31 ? 0x80u : 0u;
    const bool e4m3_overflows = !std::isnan(x) && std::fabs(x) > 464.0f;
    const bool e5m2_overflows = !std::isnan(x) && std::fabs(x) >= 61440.0f;
    const std::uint32_t sat_e4m3 = encode_e4m3(x, Overflow::saturate);
    const std::uint32_t sat_e5m2 = encode_e5m2(x, Overflow::saturate);
    EXPECT_EQ(sat_e4m3 != torch_e4m3, e4m3_overflows) << hex;
    EXPECT_EQ(sat_e5m2 != torch_e5m2, e5m2_overflows) << hex;
    if (e4m3_overflows) {
      EXPECT_EQ(sat_e4m3, sign | 0x7Eu) << hex;
      ++saturated_e4m3;
    }
    if (e5m2_overflows) {
      EXPECT_EQ(sat_e5m2, sign | 0x7Bu) << hex;
      ++saturated_e5m2;
    }
  }
  EXPECT_EQ(mismatches, 0);
  // The file does exercise overflow (edge cases and random values up to 2^20).
  EXPECT_GT(saturated_e4m3, 100);
  EXPECT_GT(saturated_e5m2, 10);
}

// ---- the JSON reader and writers ----------------------------------------------------------------

TEST(Json, ParsesValidDocument) {
  const char* text = R"( {"a": [1, -2.5, 3e2, 0, -0, 1E-2, 0.5e+1, 123456789012],
    "b": {"c": true, "d": false, "e": null},
    "s": "x", "empty_object": {}, "empty_array": []} )";
  json::Value v;
  const Status s = json::parse(text, &v);
  ASSERT_TRUE(s.ok()) << s.message;
  ASSERT_TRUE(v.is_object());
  ASSERT_EQ(v.object.size(), 5u);
  EXPECT_EQ(v.object[0].key, "a");  // document order
  EXPECT_EQ(v.object[4].key, "empty_array");
  const json::Value* a = v.find("a");
  ASSERT_TRUE(a && a->is_array());
  const double numbers[] = {1, -2.5, 300, 0, -0.0, 0.01, 5, 123456789012.0};
  ASSERT_EQ(a->array.size(), 8u);
  for (std::size_t i = 0; i < 8; ++i) {
    ASSERT_TRUE(a->array[i].is_number());
    EXPECT_TRUE(same_value(a->array[i].number, numbers[i])) << i;
  }
  const json::Value* b = v.find("b");
  ASSERT_TRUE(b && b->is_object());
  EXPECT_EQ(b->find("c")->kind, json::Value::Kind::boolean);
  EXPECT_TRUE(b->find("c")->boolean);
  EXPECT_FALSE(b->find("d")->boolean);
  EXPECT_EQ(b->find("e")->kind, json::Value::Kind::null);
  EXPECT_EQ(v.find("s")->string, "x");
  EXPECT_TRUE(v.find("empty_object")->is_object() && v.find("empty_object")->object.empty());
  EXPECT_TRUE(v.find("empty_array")->is_array() && v.find("empty_array")->array.empty());
  EXPECT_EQ(v.find("missing"), nullptr);
  EXPECT_EQ(a->find("a"), nullptr);  // find on a non-object

  // Any value may be the whole document.
  ASSERT_TRUE(json::parse(" 42 ", &v).ok());
  EXPECT_EQ(v.number, 42);
  ASSERT_TRUE(json::parse("\"s\"", &v).ok());
  EXPECT_EQ(v.string, "s");
  ASSERT_TRUE(json::parse("\r\n\tnull", &v).ok());
  EXPECT_EQ(v.kind, json::Value::Kind::null);
}

TEST(Json, Escapes) {
  json::Value v;
  ASSERT_TRUE(json::parse(R"("\"\\\/\b\f\n\r\t")", &v).ok());
  EXPECT_EQ(v.string, "\"\\/\b\f\n\r\t");
  ASSERT_TRUE(json::parse(R"("\u0041\u00e9\u20AC\ud83d\ude00")", &v).ok());
  EXPECT_EQ(v.string, "A\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80");  // UTF-8 of A, e acute, euro, U+1F600
  ASSERT_TRUE(json::parse(R"("a\u0000b")", &v).ok());
  EXPECT_EQ(v.string, std::string("a\0b", 3));
  ASSERT_TRUE(json::parse("\"caf\xC3\xA9 \xF0\x9F\x98\x80\"", &v).ok());  // raw UTF-8 passes through
  EXPECT_EQ(v.string, "caf\xC3\xA9 \xF0\x9F\x98\x80");
}

TEST(Json, MalformedInputReportsLineAndColumn) {
  const struct {
    std::string text;
    int line, column;
    const char* says;
  } cases[] = {
      {"", 1, 1, "expected a value"},
      {"[1, 2,]", 1, 7, "expected a value, found ']'"},
      {"[1 2]", 1, 4, "expected ',' or ']'"},
      {"{\"a\" 1}", 1, 6, "expected ':'"},
      {"{'a': 1}", 1, 2, "expected a string key"},
      {"{\"a\": 1,}", 1, 9, "expected a string key"},
      {"{\n  \"a\": 1,\n  \"b\": tru\n}", 3, 8, "invalid literal"},
      {"[1,\n2,\n\n  x]", 4, 3, "expected a value, found 'x'"},
      {"[01]", 1, 2, "leading zeros"},
      {"[1.]", 1, 4, "after the decimal point"},
      {"[.5]", 1, 2, "expected a value, found '.'"},
      {"[+1]", 1, 2, "expected a value, found '+'"},
      {"[-]", 1, 3, "expected a digit"},
      {"[1e]", 1, 4, "exponent"},
      {"[1e400]", 1, 2, "outside the range"},
      {"NaN", 1, 1, "expected a value"},
      {"[Infinity]", 1, 2, "expected a value"},
      {"\"abc", 1, 1, "unterminated string"},
      {"[\"a\tb\"]", 1, 4, "control character"},
      {"\"\\x\"", 1, 2, "invalid escape"},
      {"\"\\u12G4\"", 1, 6, "hex digit"},
      {"\"\\uD800\"", 1, 2, "high surrogate"},
      {"\"\\uD800\\u0041\"", 1, 8, "low surrogate"},
      {"\"\\uDC00\"", 1, 2, "unpaired low surrogate"},
      {"\"\xC3\"", 1, 2, "invalid UTF-8"},
      {"\"\xC0\xAF\"", 1, 2, "invalid UTF-8"},          // overlong '/'
      {"\"\xED\xA0\x80\"", 1, 2, "invalid UTF-8"},      // a UTF-16 surrogate in UTF-8
      {"\"\xF4\x90\x80\x80\"", 1, 2, "invalid UTF-8"},  // beyond U+10FFFF
      {"{\"a\": 1, \"a\": 2}", 1, 10, "duplicate key"},
      {"[1] [2]", 1, 5, "unexpected text"},
      {"[\n  true,\n  fals]", 3, 3, "invalid literal"},
      {std::string(600, '['), 1, 513, "nesting deeper than 512"},
  };
  for (const auto& c : cases) {
    json::Value v;
    const Status s = json::parse(c.text, &v);
    ASSERT_FALSE(s.ok()) << c.text;
    EXPECT_EQ(s.code, StatusCode::invalid_argument);
    const std::string where = "line " + std::to_string(c.line) + ", column " + std::to_string(c.column) + ":";
    EXPECT_NE(s.message.find(where), std::string::npos) << c.text << " -> " << s.message;
    EXPECT_NE(s.message.find(c.says), std::string::npos) << c.text << " -> " << s.message;
  }
}

TEST(Json, ParseFile) {
  json::Value v;
  const std::string path = std::string(BSGEMM_SOURCE_DIR) + "/tests/data/no-such-file.json";
  const Status s = json::parse_file(path, &v);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message.find(path), std::string::npos) << s.message;
}

TEST(Json, Quote) {
  EXPECT_EQ(json::quote("plain"), "\"plain\"");
  EXPECT_EQ(json::quote("a\"b\\c/"), R"("a\"b\\c/")");
  EXPECT_EQ(json::quote("\b\f\n\r\t"), R"("\b\f\n\r\t")");
  EXPECT_EQ(json::quote(std::string("\x01\x1f\x7f\0", 4)), R"("\u0001\u001F\u007F\u0000")");
  EXPECT_EQ(json::quote("caf\xC3\xA9"), "\"caf\xC3\xA9\"");
  // Every ASCII character (NUL included) and some UTF-8 survive quote() then parse().
  std::string all;
  for (int c = 0; c < 128; ++c) all.push_back(static_cast<char>(c));
  all += "\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80";
  json::Value v;
  const Status s = json::parse(json::quote(all), &v);
  ASSERT_TRUE(s.ok()) << s.message;
  EXPECT_EQ(v.string, all);
}

TEST(Json, Number) {
  EXPECT_EQ(json::number(1), "1");
  EXPECT_EQ(json::number(-0.0), "-0");
  EXPECT_EQ(json::number(0.1), "0.10000000000000001");
  EXPECT_EQ(json::number(1e300), "1.0000000000000001e+300");
  EXPECT_EQ(json::number(5e-324), "4.9406564584124654e-324");
  EXPECT_EQ(json::number(std::numeric_limits<double>::quiet_NaN()), "null");
  EXPECT_EQ(json::number(kInf), "null");
  EXPECT_EQ(json::number(-kInf), "null");
  // Random finite doubles of every magnitude: the text is printf's %.17g and reads back exactly.
  std::mt19937_64 rng(12345);
  for (int i = 0; i < 20000; ++i) {
    std::uint64_t bits = rng();
    double x;
    std::memcpy(&x, &bits, sizeof x);
    if (!std::isfinite(x)) continue;
    const std::string text = json::number(x);
    char printed[40];
    std::snprintf(printed, sizeof printed, "%.17g", x);
    ASSERT_EQ(text, printed);
    json::Value v;
    const Status s = json::parse(text, &v);
    ASSERT_TRUE(s.ok()) << text << ": " << s.message;
    ASSERT_TRUE(same_value(v.number, x)) << text;
  }
}

}  // namespace
}  // namespace bsgemm
