// The staging pass of KernelPath::staged: one mxfp8 operand of the MoE forms rewritten as bf16 with its
// ue8m0 block scales folded in, so that the GEMM kernel runs BF16 wgmma over the whole K with nothing to
// promote (kernel_staged.cu).
//
// One thread per 32-element scale block of a row at a time: it reads the 32 codes (two 16-byte loads where
// the block is whole and aligned, else byte by byte), the block's scale, and writes 32 bf16 (four 16-byte
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

// The 32-element block at src (valid of them before K's end) times `scale`, as bf16 at dst.
__device__ __forceinline__ void stage_block(const std::uint8_t* src, std::uint16_t* dst, int valid, bool e5m2,
                                            float scale) {
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
    pairs[2 * w] = stage_pair(codes[w], e5m2, scale);
    pairs[2 * w + 1] = stage_pair(codes[w] >> 16, e5m2, scale);
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

// A CTA's 256 threads take rows side by side, each row's 32-element blocks spread over lanes_per_row
// threads (all 256 on one row when K has 256 blocks or more), so that a row's batch comes from one
// division per row instead of one per block.
__host__ __device__ inline int lanes_per_row(std::int64_t blocks_per_row) {
  return blocks_per_row >= 256 ? 256 : static_cast<int>(blocks_per_row);
}

__global__ void __launch_bounds__(256) stage_bf16_kernel(const StageOperand op) {
  const std::int64_t blocks_per_row = (op.k + 31) / 32;
  const int lanes = lanes_per_row(blocks_per_row);
  const int rows_per_cta = 256 / lanes;
  const int row_in_cta = static_cast<int>(threadIdx.x) / lanes, lane = static_cast<int>(threadIdx.x) % lanes;
  if (row_in_cta >= rows_per_cta) return;
  const std::int64_t total_rows = op.batches * op.rows;
  for (std::int64_t r = static_cast<std::int64_t>(blockIdx.x) * rows_per_cta + row_in_cta; r < total_rows;
       r += static_cast<std::int64_t>(gridDim.x) * rows_per_cta) {
    const std::int64_t batch = r / op.rows;
    const std::int64_t row = r - batch * op.rows;
    const std::uint8_t* src = op.src + batch * op.batch_stride + row * op.ld;
    std::uint16_t* dst = op.dst + batch * op.dst_batch_stride + row * op.dst_ld;
    const std::uint8_t* scales = op.scales + batch * op.scale_batch_stride;
    for (std::int64_t kb = lane; kb < blocks_per_row; kb += lanes) {
      const float scale = scale_value(__ldg(scales + scale_offset(op.scale_layout, row, kb, blocks_per_row, op.scale_ld)));
      const int valid = op.k - 32 * kb >= 32 ? 32 : static_cast<int>(op.k - 32 * kb);
      stage_block(src + 32 * kb, dst + 32 * kb, valid, op.e5m2, scale);
    }
  }
}

}  // namespace

cudaError_t launch_stage_bf16(const StageOperand& op, cudaStream_t stream) {
  const std::int64_t blocks_per_row = (op.k + 31) / 32;
  const std::int64_t total_rows = op.batches * op.rows;
  if (total_rows <= 0 || blocks_per_row <= 0) return cudaSuccess;
  int device = 0, sms = 0;
  cudaError_t e = cudaGetDevice(&device);
  if (e == cudaSuccess) e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  if (e != cudaSuccess) return e;
  // Enough CTAs to fill every SM several times over; the loop strides past the rest.
  const std::int64_t rows_per_cta = 256 / lanes_per_row(blocks_per_row);
  const std::int64_t wanted = (total_rows + rows_per_cta - 1) / rows_per_cta;
  const int grid = static_cast<int>(wanted < 8LL * sms ? wanted : 8LL * sms);
  stage_bf16_kernel<<<grid, 256, 0, stream>>>(op);
  return cudaGetLastError();
}

}  // namespace bsgemm::cuda
