// Element and scale-factor formats, bit exact, for host and device code.
//
// Every value of the 4- and 8-bit formats is exactly representable in fp32, so decode is exact.
// Encode rounds to nearest, ties to even, and then applies the format's overflow rule:
//   - Overflow::saturate (the quantizer rule, PTX `.satfinite`): out-of-range values and
//     infinities become the largest finite value of the same sign; NaN stays NaN.
//   - Overflow::non_saturating (an IEEE-style cast, as PyTorch's float8 casts do): a value that
//     rounds beyond the largest finite value becomes inf (e5m2) or NaN (e4m3, which has no inf).
// e2m1 has neither inf nor NaN: it always saturates, and NaN encodes as +6 (quantizers carry NaN
// in the block scale instead, as OCP MX v1.0 prescribes).
#pragma once

#include <cstdint>
#include <cstring>
#include <string_view>

#include "bsgemm/config.hpp"

namespace bsgemm {

enum class DataType : std::uint8_t { e4m3, e5m2, e2m1, ue8m0, ue4m3, f32, f16, bf16 };

enum class Overflow : std::uint8_t { saturate, non_saturating };

// How a positive fp32 value becomes a power of two in ue8m0.
enum class Ue8m0Rounding : std::uint8_t {
  floor,        // 2^floor(log2 x): the OCP MX v1.0 scale rule
  ceil,         // 2^ceil(log2 x): the "round the scale up" variant (DeepSeek ue8m0, torchao RCEIL)
  nearest_up,   // nearest power of two, ties up: PyTorch's float8_e8m0fnu cast
};

BSGEMM_HD constexpr int bits_of(DataType t) {
  switch (t) {
    case DataType::e2m1: return 4;
    case DataType::f32: return 32;
    case DataType::f16:
    case DataType::bf16: return 16;
    default: return 8;
  }
}

// Bytes needed for `count` elements (FP4 packs two per byte, low nibble first).
BSGEMM_HD constexpr std::int64_t bytes_for(DataType t, std::int64_t count) {
  return bits_of(t) == 4 ? (count + 1) / 2 : count * (bits_of(t) / 8);
}

const char* to_string(DataType t);
bool parse(std::string_view text, DataType* out);

namespace detail {

BSGEMM_HD inline std::uint32_t float_to_bits(float x) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(x);
#else
  std::uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
#endif
}

BSGEMM_HD inline float bits_to_float(std::uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float x;
  std::memcpy(&x, &u, sizeof x);
  return x;
#endif
}

// Value of a finite code with E exponent bits, M mantissa bits and exponent bias B.
template <int E, int M, int B>
BSGEMM_HD inline float decode_finite(std::uint32_t code) {
  const std::uint32_t sign = (code >> (E + M)) & 1u;
  const std::uint32_t exp = (code >> M) & ((1u << E) - 1u);
  const std::uint32_t man = code & ((1u << M) - 1u);
  float mag;
  if (exp == 0) {
    // Subnormal: man * 2^(1 - B - M); 2^(1 - B - M) is a normal fp32 for every format here.
    mag = static_cast<float>(man) * bits_to_float(static_cast<std::uint32_t>(1 - B - M + 127) << 23);
  } else {
    mag = bits_to_float((static_cast<std::uint32_t>(static_cast<int>(exp) - B + 127) << 23) |
                        (man << (23 - M)));
  }
  return sign ? -mag : mag;
}

// |x| (given as the fp32 bits of a finite, non-negative value) rounded to nearest-even in a
// format with M mantissa bits and bias B, with an unbounded exponent range above. Returns the
// magnitude code (exponent field << M | mantissa); a code above the format's largest finite code
// means the value overflowed. Subnormals of the target and of fp32 are handled.
BSGEMM_HD inline std::uint32_t round_magnitude(std::uint32_t mag_bits, int M, int B) {
  if (mag_bits == 0) return 0;
  const int exp32 = static_cast<int>(mag_bits >> 23);
  std::uint32_t sig = mag_bits & 0x7FFFFFu;
  int e;
  if (exp32 == 0) {
    e = -126;  // fp32 subnormal: sig * 2^-149 == (sig / 2^23) * 2^-126
  } else {
    sig |= 0x800000u;
    e = exp32 - 127;
  }
  const int emin = 1 - B;
  const int quantum_e = e < emin ? emin : e;  // exponent whose quantum is 2^(quantum_e - M)
  const int shift = 23 - M + (quantum_e - e);
  std::uint32_t q = 0;
  if (shift < 32) {
    q = sig >> shift;
    const std::uint32_t rem = sig & ((1u << shift) - 1u);
    const std::uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (q & 1u))) ++q;
  }
  // q quanta of 2^(quantum_e - M). This single formula covers subnormals (quantum_e == emin,
  // q < 2^M), normals, and the carry q == 2^(M+1) into the next exponent.
  return (static_cast<std::uint32_t>(quantum_e + B) << M) + q - (1u << M);
}

}  // namespace detail

// ---- decode -----------------------------------------------------------------------------------

BSGEMM_HD inline float decode_e4m3(std::uint8_t code) {
  if ((code & 0x7Fu) == 0x7Fu) return detail::bits_to_float(0x7FC00000u | ((code & 0x80u) << 24));
  return detail::decode_finite<4, 3, 7>(code);
}

BSGEMM_HD inline float decode_e5m2(std::uint8_t code) {
  if ((code & 0x7Cu) == 0x7Cu) {
    const std::uint32_t sign = (code & 0x80u) << 24;
    return detail::bits_to_float(((code & 0x3u) ? 0x7FC00000u : 0x7F800000u) | sign);
  }
  return detail::decode_finite<5, 2, 15>(code);
}

// `code` holds one e2m1 value in its low 4 bits.
BSGEMM_HD inline float decode_e2m1(std::uint8_t code) { return detail::decode_finite<2, 1, 1>(code & 0xFu); }

BSGEMM_HD inline float decode_ue8m0(std::uint8_t code) {
  if (code == 0xFFu) return detail::bits_to_float(0x7FC00000u);
  if (code == 0) return detail::bits_to_float(0x00400000u);  // 2^-127, an fp32 subnormal
  return detail::bits_to_float(static_cast<std::uint32_t>(code) << 23);
}

// ue4m3 is e4m3 with the sign bit ignored (the NVFP4 block scale).
BSGEMM_HD inline float decode_ue4m3(std::uint8_t code) { return decode_e4m3(code & 0x7Fu); }

BSGEMM_HD inline float decode_bf16(std::uint16_t bits) { return detail::bits_to_float(static_cast<std::uint32_t>(bits) << 16); }

BSGEMM_HD inline float decode_f16(std::uint16_t bits) {
  if ((bits & 0x7C00u) == 0x7C00u) {
    const std::uint32_t sign = static_cast<std::uint32_t>(bits & 0x8000u) << 16;
    return detail::bits_to_float(((bits & 0x3FFu) ? 0x7FC00000u : 0x7F800000u) | sign);
  }
  return detail::decode_finite<5, 10, 15>(bits);
}

// ---- encode -----------------------------------------------------------------------------------

BSGEMM_HD inline std::uint8_t encode_e4m3(float x, Overflow overflow = Overflow::saturate) {
  const std::uint32_t u = detail::float_to_bits(x);
  const std::uint8_t sign = static_cast<std::uint8_t>((u >> 24) & 0x80u);
  const std::uint32_t mag = u & 0x7FFFFFFFu;
  if (mag > 0x7F800000u) return static_cast<std::uint8_t>(sign | 0x7Fu);
  const std::uint32_t code = mag == 0x7F800000u ? 0xFFu : detail::round_magnitude(mag, 3, 7);
  if (code > 0x7Eu) return static_cast<std::uint8_t>(sign | (overflow == Overflow::saturate ? 0x7Eu : 0x7Fu));
  return static_cast<std::uint8_t>(sign | code);
}

BSGEMM_HD inline std::uint8_t encode_e5m2(float x, Overflow overflow = Overflow::saturate) {
  const std::uint32_t u = detail::float_to_bits(x);
  const std::uint8_t sign = static_cast<std::uint8_t>((u >> 24) & 0x80u);
  const std::uint32_t mag = u & 0x7FFFFFFFu;
  if (mag > 0x7F800000u) return static_cast<std::uint8_t>(sign | 0x7Fu);
  const std::uint32_t code = mag == 0x7F800000u ? 0xFFu : detail::round_magnitude(mag, 2, 15);
  if (code > 0x7Bu) return static_cast<std::uint8_t>(sign | (overflow == Overflow::saturate ? 0x7Bu : 0x7Cu));
  return static_cast<std::uint8_t>(sign | code);
}

// Returns the 4-bit code in the low nibble.
BSGEMM_HD inline std::uint8_t encode_e2m1(float x) {
  const std::uint32_t u = detail::float_to_bits(x);
  const std::uint32_t mag = u & 0x7FFFFFFFu;
  if (mag > 0x7F800000u) return 0x7u;
  const std::uint8_t sign = static_cast<std::uint8_t>((u >> 28) & 0x8u);
  const std::uint32_t code = mag == 0x7F800000u ? 0xFu : detail::round_magnitude(mag, 1, 1);
  return static_cast<std::uint8_t>(sign | (code > 0x7u ? 0x7u : code));
}

// |x| as a power of two. NaN and inf give 0xFF (NaN); results are clamped to codes 0..254
// (2^-127 .. 2^127), so a finite input never produces NaN.
BSGEMM_HD inline std::uint8_t encode_ue8m0(float x, Ue8m0Rounding rounding = Ue8m0Rounding::floor) {
  const std::uint32_t mag = detail::float_to_bits(x) & 0x7FFFFFFFu;
  if (mag >= 0x7F800000u) return 0xFFu;
  if (mag == 0) return 0;
  // floor(log2 |x|) + 127 as an integer, for normal and subnormal fp32 alike.
  int code;
  std::uint32_t below;  // the part of |x| below 2^floor(log2 |x|), as bits under the leading one
  std::uint32_t half;   // that part's value at exactly half a step
  if ((mag >> 23) != 0) {
    code = static_cast<int>(mag >> 23);
    below = mag & 0x7FFFFFu;
    half = 0x400000u;
  } else {
    int top = 22;
    while (!((mag >> top) & 1u)) --top;
    code = top - 22;  // value in [2^(top-149), 2^(top-148))
    below = mag & ((1u << top) - 1u);
    half = top > 0 ? 1u << (top - 1) : 1u;
  }
  if (rounding == Ue8m0Rounding::ceil && below != 0) ++code;
  if (rounding == Ue8m0Rounding::nearest_up && below >= half && !(below == 0 && half == 1u)) ++code;
  if (code < 0) code = 0;
  if (code > 254) code = 254;
  return static_cast<std::uint8_t>(code);
}

BSGEMM_HD inline std::uint8_t encode_ue4m3(float x) {
  const std::uint32_t mag = detail::float_to_bits(x) & 0x7FFFFFFFu;
  return static_cast<std::uint8_t>(encode_e4m3(detail::bits_to_float(mag), Overflow::saturate) & 0x7Fu);
}

BSGEMM_HD inline std::uint16_t encode_bf16(float x) {
  const std::uint32_t u = detail::float_to_bits(x);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<std::uint16_t>(((u >> 16) & 0x8000u) | 0x7FC0u);
  return static_cast<std::uint16_t>((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

BSGEMM_HD inline std::uint16_t encode_f16(float x) {
  const std::uint32_t u = detail::float_to_bits(x);
  const std::uint16_t sign = static_cast<std::uint16_t>((u >> 16) & 0x8000u);
  const std::uint32_t mag = u & 0x7FFFFFFFu;
  if (mag > 0x7F800000u) return static_cast<std::uint16_t>(sign | 0x7E00u);
  const std::uint32_t code = mag == 0x7F800000u ? 0x7C00u : detail::round_magnitude(mag, 10, 15);
  return static_cast<std::uint16_t>(sign | (code > 0x7BFFu ? 0x7C00u : code));
}

// ---- by DataType --------------------------------------------------------------------------------

// Decodes one 8-bit (or, for e2m1, low-nibble) code of an element or scale format.
BSGEMM_HD inline float decode(DataType t, std::uint8_t code) {
  switch (t) {
    case DataType::e4m3: return decode_e4m3(code);
    case DataType::e5m2: return decode_e5m2(code);
    case DataType::e2m1: return decode_e2m1(code);
    case DataType::ue8m0: return decode_ue8m0(code);
    case DataType::ue4m3: return decode_ue4m3(code);
    default: return detail::bits_to_float(0x7FC00000u);
  }
}

// Encodes to an 8-bit (or, for e2m1, low-nibble) code with round-to-nearest-even and saturation.
BSGEMM_HD inline std::uint8_t encode(DataType t, float x) {
  switch (t) {
    case DataType::e4m3: return encode_e4m3(x);
    case DataType::e5m2: return encode_e5m2(x);
    case DataType::e2m1: return encode_e2m1(x);
    case DataType::ue8m0: return encode_ue8m0(x);
    case DataType::ue4m3: return encode_ue4m3(x);
    default: return 0;
  }
}

// Largest finite magnitude of an element or scale format.
BSGEMM_HD constexpr float max_finite(DataType t) {
  switch (t) {
    case DataType::e4m3:
    case DataType::ue4m3: return 448.0f;
    case DataType::e5m2: return 57344.0f;
    case DataType::e2m1: return 6.0f;
    case DataType::ue8m0: return 1.7014118346046923e38f;  // 2^127
    case DataType::f16: return 65504.0f;
    case DataType::bf16: return 3.3895313892515355e38f;
    default: return 3.4028234663852886e38f;
  }
}

// Reads element `index` of a packed tensor of type t (element or scale format) as its code.
BSGEMM_HD inline std::uint8_t load_code(DataType t, const void* base, std::int64_t index) {
  const auto* bytes = static_cast<const std::uint8_t*>(base);
  if (bits_of(t) == 4) return static_cast<std::uint8_t>((bytes[index >> 1] >> ((index & 1) * 4)) & 0xFu);
  return bytes[index];
}

// Writes element `index` of a packed tensor of type t; for e2m1 only its nibble changes.
BSGEMM_HD inline void store_code(DataType t, void* base, std::int64_t index, std::uint8_t code) {
  auto* bytes = static_cast<std::uint8_t*>(base);
  if (bits_of(t) == 4) {
    const int shift = static_cast<int>(index & 1) * 4;
    std::uint8_t& b = bytes[index >> 1];
    b = static_cast<std::uint8_t>((b & ~(0xFu << shift)) | ((code & 0xFu) << shift));
  } else {
    bytes[index] = code;
  }
}

// Reads element `index` of a tensor of any DataType as fp32 (scales: f32 or an 8-bit scale format;
// outputs: f32, f16, bf16).
BSGEMM_HD inline float load_value(DataType t, const void* base, std::int64_t index) {
  switch (t) {
    case DataType::f32: return static_cast<const float*>(base)[index];
    case DataType::f16: return decode_f16(static_cast<const std::uint16_t*>(base)[index]);
    case DataType::bf16: return decode_bf16(static_cast<const std::uint16_t*>(base)[index]);
    default: return decode(t, load_code(t, base, index));
  }
}

// Writes `x` rounded to nearest-even into element `index` of an output tensor (f32, f16, bf16).
BSGEMM_HD inline void store_value(DataType t, void* base, std::int64_t index, float x) {
  switch (t) {
    case DataType::f32: static_cast<float*>(base)[index] = x; break;
    case DataType::f16: static_cast<std::uint16_t*>(base)[index] = encode_f16(x); break;
    case DataType::bf16: static_cast<std::uint16_t*>(base)[index] = encode_bf16(x); break;
    default: store_code(t, base, index, encode(t, x)); break;
  }
}

}  // namespace bsgemm
