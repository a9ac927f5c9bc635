// The staging pass of KernelPath::staged: one mxfp8 operand of the MoE forms rewritten as bf16 with its
// ue8m0 block scales folded in, so that the GEMM kernel runs BF16 wgmma over the whole K with nothing to
// promote (kernel_staged.cu).
//
// One thread per 32-element scale block of one row: it reads the 32 codes (two 16-byte loads where the
// block is whole and aligned, else byte by byte), the block's scale, and writes 32 bf16 (four 16-byte
// stores, or element by element at the K tail). Neighbouring threads take neighbouring blocks of a row,
// so reads and writes are coalesced; the pass is bound by HBM bandwidth (1 byte read, 2 written per
// element). Conversion: FP8 -> f16 (exact, hardware), f16 -> f32 (exact), times 2^(code - 127) (exact
// unless the product leaves fp32's range), -> bf16 with round-to-nearest-even (exact for every normal
// bf16; the README's accuracy section names where subnormals round).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>

#include "bsgemm/recipe.hpp"
#include "src/cuda/sm90/launch.hpp"

namespace bsgemm::cuda {

namespace {

// ue8m0 code -> fp32 (formats.hpp's decode_ue8m0): 2^(code - 127), code 0 the subnormal 2^-127, 0xFF NaN.
__device__ __forceinline__ float scale_value(std::uint32_t code) {
  std::uint32_t bits = code << 23;
  bits = code == 0 ? 0x00400000u : bits;
  bits = code == 0xFFu ? 0x7FC00000u : bits;
  return __uint_as_float(bits);
}

// Two FP8 codes (low byte first) times `scale`, as a bf16 pair (low half first).
__device__ __forceinline__ std::uint32_t stage_pair(std::uint32_t codes, bool e5m2, float scale) {
  const __half2_raw h = __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(codes & 0xFFFFu),
                                                   e5m2 ? __NV_E5M2 : __NV_E4M3);
  const float2 f = __half22float2(*reinterpret_cast<const __half2*>(&h));
  const __nv_bfloat162 b = __floats2bfloat162_rn(f.x * scale, f.y * scale);
  return *reinterpret_cast<const std::uint32_t*>(&b);
}

__global__ void __launch_bounds__(256) stage_bf16_kernel(const StageOperand op) {
  const std::int64_t blocks_per_row = (op.k + 31) / 32;
  const std::int64_t total = op.batches * op.rows * blocks_per_row;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += stride) {
    const std::int64_t kb = i % blocks_per_row;
    const std::int64_t row = (i / blocks_per_row) % op.rows;
    const std::int64_t batch = i / (blocks_per_row * op.rows);
    const std::uint8_t* src = op.src + batch * op.batch_stride + row * op.ld + 32 * kb;
    std::uint16_t* dst = op.dst + batch * op.dst_batch_stride + row * op.dst_ld + 32 * kb;
    const float scale = scale_value(
        __ldg(op.scales + batch * op.scale_batch_stride + scale_offset(op.scale_layout, row, kb, blocks_per_row, op.scale_ld)));
    const int valid = op.k - 32 * kb >= 32 ? 32 : static_cast<int>(op.k - 32 * kb);
    std::uint32_t codes[8];  // four codes per word, in K order
    if (valid == 32 && (reinterpret_cast<std::uintptr_t>(src) & 15u) == 0) {
      const uint4 lo = __ldg(reinterpret_cast<const uint4*>(src));
      const uint4 hi = __ldg(reinterpret_cast<const uint4*>(src) + 1);
      codes[0] = lo.x, codes[1] = lo.y, codes[2] = lo.z, codes[3] = lo.w;
      codes[4] = hi.x, codes[5] = hi.y, codes[6] = hi.z, codes[7] = hi.w;
    } else {
#pragma unroll
      for (int w = 0; w < 8; ++w) {
        codes[w] = 0;
#pragma unroll
        for (int j = 0; j < 4; ++j)
          if (4 * w + j < valid) codes[w] |= static_cast<std::uint32_t>(__ldg(src + 4 * w + j)) << (8 * j);
      }
    }
    std::uint32_t pairs[16];
#pragma unroll
    for (int w = 0; w < 8; ++w) {
      pairs[2 * w] = stage_pair(codes[w], op.e5m2, scale);
      pairs[2 * w + 1] = stage_pair(codes[w] >> 16, op.e5m2, scale);
    }
    if (valid == 32) {
      // dst_ld is a multiple of 8 and the buffer 256-byte aligned: every block's 64 bytes are 16-byte aligned.
#pragma unroll
      for (int q = 0; q < 4; ++q)
        reinterpret_cast<uint4*>(dst)[q] = make_uint4(pairs[4 * q], pairs[4 * q + 1], pairs[4 * q + 2], pairs[4 * q + 3]);
    } else {
#pragma unroll
      for (int e = 0; e < 32; ++e)
        if (e < valid) dst[e] = static_cast<std::uint16_t>(pairs[e / 2] >> (16 * (e % 2)));
    }
  }
}

}  // namespace

cudaError_t launch_stage_bf16(const StageOperand& op, cudaStream_t stream) {
  const std::int64_t total = op.batches * op.rows * ((op.k + 31) / 32);
  if (total <= 0) return cudaSuccess;
  int device = 0, sms = 0;
  cudaError_t e = cudaGetDevice(&device);
  if (e == cudaSuccess) e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  if (e != cudaSuccess) return e;
  // Enough blocks of 256 threads to fill every SM several times over; the loop strides past the rest.
  const std::int64_t wanted = (total + 255) / 256;
  const int grid = static_cast<int>(wanted < 8LL * sms ? wanted : 8LL * sms);
  stage_bf16_kernel<<<grid, 256, 0, stream>>>(op);
  return cudaGetLastError();
}

}  // namespace bsgemm::cuda
