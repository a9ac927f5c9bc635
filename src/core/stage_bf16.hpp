// The staging pass's arithmetic (KernelPath::staged, src/cuda/sm90/stage_bf16.cu): one 32-element block of
// FP8 or FP4 codes times its block scales, as bf16 pairs. __host__ __device__ so that
// tests/cpu/test_formats.cpp checks the element order and the exactness on the CPU; on the device the FP8
// codes go through the hardware's exact FP8 -> f16 conversion, on the host through formats.hpp's decoders.
#pragma once

#include <cstdint>

#include "bsgemm/config.hpp"
#include "bsgemm/formats.hpp"
#include "src/core/fp4_to_fp8.hpp"
#if defined(__CUDACC__)
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#endif

namespace bsgemm::core {

// Two FP8 codes (the low two bytes, the lower first) times `scale`, as a bf16 pair (the lower half first),
// rounded to nearest even: exact wherever the product is a normal bf16, since an FP8 value has at most 4
// significant bits and a scale (2^k or a ue4m3 value) at most 4.
BSGEMM_HD inline std::uint32_t stage_pair(std::uint32_t codes, bool e5m2, float scale) {
#if defined(__CUDA_ARCH__)
  const __half2_raw h = __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(codes & 0xFFFFu),
                                                   e5m2 ? __NV_E5M2 : __NV_E4M3);
  const float2 f = __half22float2(*reinterpret_cast<const __half2*>(&h));
  const __nv_bfloat162 b = __floats2bfloat162_rn(f.x * scale, f.y * scale);
  return *reinterpret_cast<const std::uint32_t*>(&b);
#else
  const auto decode = [e5m2](std::uint32_t c) {
    return e5m2 ? decode_e5m2(static_cast<std::uint8_t>(c)) : decode_e4m3(static_cast<std::uint8_t>(c));
  };
  return static_cast<std::uint32_t>(encode_bf16(decode(codes & 0xFFu) * scale)) |
         static_cast<std::uint32_t>(encode_bf16(decode((codes >> 8) & 0xFFu) * scale)) << 16;
#endif
}

// A block of 32 FP8 codes (four per word, in K order) times `first` (elements 0-15) and `second` (16-31):
// element e lands in half e % 2 of pairs[e / 2].
BSGEMM_HD inline void stage_codes(const std::uint32_t (&codes)[8], bool e5m2, float first, float second,
                                  std::uint32_t (&pairs)[16]) {
  for (int w = 0; w < 8; ++w) {
    const float scale = w < 4 ? first : second;
    pairs[2 * w] = stage_pair(codes[w], e5m2, scale);
    pairs[2 * w + 1] = stage_pair(codes[w] >> 16, e5m2, scale);
  }
}

// A block of 32 e2m1 codes (eight per word, the low nibble first) as e4m3 codes in stage_codes' order
// (exact: every e2m1 value is an e4m3 value).
BSGEMM_HD inline void widen_fp4_block(const std::uint32_t (&packed)[4], std::uint32_t (&codes)[8]) {
  for (int w = 0; w < 4; ++w) e2m1x8_to_e4m3x8(packed[w], &codes[2 * w], &codes[2 * w + 1]);
}

}  // namespace bsgemm::core
