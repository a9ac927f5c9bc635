// The staging pass of KernelPath::staged: one operand of the MoE forms (mxfp8, mxfp4 or nvfp4) rewritten as
// bf16 with its block scales folded in, so that the GEMM kernel runs BF16 wgmma over the whole K with nothing to
// promote (kernel_staged.cu).
//
// One thread per 32-element scale block of a row at a time: it reads the 32 codes (two 16-byte loads where
// the block is whole and aligned, else byte by byte), the block's scale, and writes 32 bf16 (four 16-byte
// stores, or element by element at the K tail). Neighbouring threads take neighbouring blocks of a row,
// so reads and writes are coalesced; the pass is bound by HBM bandwidth (1 byte read, 2 written per
// element, half a byte for FP4). Conversion: e2m1 -> e4m3 (exact), FP8 -> f16 (exact, hardware), f16 ->
// f32 (exact), times the scale (2^(code - 127) or a ue4m3 value: exact unless the product leaves fp32's
// range, since e2m1 and FP8 values carry at most 4 significant bits and ue4m3 4), -> bf16 with
// round-to-nearest-even (exact for every normal bf16; the README's accuracy section names where subnormals
// round).
#include <cstdint>

#include "bsgemm/formats.hpp"
#include "bsgemm/recipe.hpp"
#include "src/core/stage_bf16.hpp"
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

// `count` words of codes from src (16-byte loads where all `bytes` are there and src is aligned, else
// byte by byte, the missing bytes zero).
__device__ __forceinline__ void load_codes(const std::uint8_t* src, int bytes, std::uint32_t* words, int count) {
  if (bytes == 4 * count && (reinterpret_cast<std::uintptr_t>(src) & 15u) == 0) {
#pragma unroll
    for (int q = 0; q < count / 4; ++q) {
      const uint4 v = __ldg(reinterpret_cast<const uint4*>(src) + q);
      words[4 * q] = v.x, words[4 * q + 1] = v.y, words[4 * q + 2] = v.z, words[4 * q + 3] = v.w;
    }
  } else {
#pragma unroll
    for (int w = 0; w < count; ++w) {
      words[w] = 0;
#pragma unroll
      for (int j = 0; j < 4; ++j)
        if (4 * w + j < bytes) words[w] |= static_cast<std::uint32_t>(__ldg(src + 4 * w + j)) << (8 * j);
    }
  }
}

// The 32-element block at src (valid of them before K's end) times its scales (first for elements 0-15,
// second for 16-31), as bf16 at dst. FP4 codes are first widened to e4m3 (exact, fp4_to_fp8.hpp).
__device__ __forceinline__ void stage_block(const std::uint8_t* src, std::uint16_t* dst, int valid, DataType element,
                                            float first, float second) {
  std::uint32_t codes[8];  // 8-bit codes, four per word, in K order
  if (element == DataType::e2m1) {
    std::uint32_t packed[4];  // eight e2m1 codes per word
    load_codes(src, (valid + 1) / 2, packed, 4);
    core::widen_fp4_block(packed, codes);
  } else {
    load_codes(src, valid, codes, 8);
  }
  std::uint32_t pairs[16];
  core::stage_codes(codes, element == DataType::e5m2, first, second, pairs);
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
    const int shift = op.element == DataType::e2m1 ? 1 : 0;  // elements -> bytes
    const std::uint8_t* src = op.src + ((batch * op.batch_stride + row * op.ld) >> shift);
    std::uint16_t* dst = op.dst + batch * op.dst_batch_stride + row * op.dst_ld;
    const std::uint8_t* scales = op.scales + batch * op.scale_batch_stride;
    const std::int64_t scale_cols = op.nv16 ? (op.k + 15) / 16 : blocks_per_row;
    for (std::int64_t kb = lane; kb < blocks_per_row; kb += lanes) {
      const int valid = op.k - 32 * kb >= 32 ? 32 : static_cast<int>(op.k - 32 * kb);
      float first, second;
      if (op.nv16) {
        // Two ue4m3 scales per block (the sign bit ignored, as decode_ue4m3 does); a tail of at most 16
        // elements has only the first.
        const std::int64_t col = 2 * kb;
        first = decode_ue4m3(__ldg(scales + scale_offset(op.scale_layout, row, col, scale_cols, op.scale_ld)));
        second = valid > 16 ? decode_ue4m3(__ldg(scales + scale_offset(op.scale_layout, row, col + 1, scale_cols, op.scale_ld)))
                            : 0.0f;
      } else {
        first = second = scale_value(__ldg(scales + scale_offset(op.scale_layout, row, kb, scale_cols, op.scale_ld)));
      }
      stage_block(src + ((32 * kb) >> shift), dst + 32 * kb, valid, op.element, first, second);
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
