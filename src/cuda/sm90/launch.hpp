// Host-side entry points of the sm_90a kernels (defined in the .cu files of this folder).
#pragma once

#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>

#include "bsgemm/recipe.hpp"
#include "src/cuda/ptx/fp8_kind.hpp"
#include "src/cuda/sm90/params.hpp"

namespace bsgemm::cuda {

// One kernel instantiation: the FP8 kernel, or the decoding kernel when `decode` is set.
struct KernelChoice {
  ScaleGranularity scales = ScaleGranularity::block128;
  ptx::Fp8Kind a = ptx::Fp8Kind::e4m3, b = ptx::Fp8Kind::e4m3;
  bool a_packed = false, b_packed = false;  // e2m1 in memory
  int block_m = 128, block_n = 128;
  // The decoding kernel (kernel_decode.cuh): operands decoded to bf16 with each operand's own scales.
  // Without it, FP4 operands are widened to e4m3 for the FP8 kernel (mx32 scales only).
  bool decode = false;
  ScaleGranularity a_scales = ScaleGranularity::mx32, b_scales = ScaleGranularity::mx32;
  // The register-operand kernel (kernel_swapped.cuh): decode-sized groups with FP4 weights; block_m is
  // the tokens per tile (32 or 64), block_n the weights (256, or 384 with 32 tokens).
  bool swapped = false;
  // Its instantiation whose walk splits the last round's tiles over K (kernel_traits_swapped.cuh's kStreamK):
  // staged-token tiles 256 weights wide, set at launch where core::plan_stream_k splits the host's tile count.
  bool stream_k = false;
};

// The tile shapes both kernels are built for (block_m x block_n).
inline constexpr int kTiles[][2] = {{128, 128}, {128, 64}, {64, 256}, {64, 128}};

// fp8-block128's 128 x 192 tile (the FP8 kernel only): a sixth fewer bytes of A and B per multiply-add
// than 128 x 128, for consumers holding 192 fp32 registers of results and partial sums
// (kernel_traits.cuh).
inline bool block128_wide_tile(int block_m, int block_n) { return block_m == 128 && block_n == 192; }

// The staged path's 128 x 256 tile (the FP8 kernel's staged instantiation only): two consumer warpgroups of
// 64 x 256, 128 fp32 result registers each and no partial sums; bf16 operands move twice the bytes of FP8
// per multiply-add, so the widest tile keeps L2's share down.
inline bool staged_wide_tile(int block_m, int block_n) { return block_m == 128 && block_n == 256; }

// The output tiles of a problem at 128 rows per tile, counted for 128 and 192 columns, to choose between
// fp8-block128's 128 x 128 and 128 x 192 tiles (add() once per group, or per `count` alike groups).
struct Block128TileWork {
  std::int64_t tiles128 = 0;    // 128 x 128 tiles
  std::int64_t stages128 = 0;   // their 128-deep k-blocks
  std::int64_t columns128 = 0;  // row blocks x padded columns, for 128 and 192 columns per tile
  std::int64_t columns192 = 0;
  void add(std::int64_t m, std::int64_t n, std::int64_t k, std::int64_t count = 1) {
    if (m <= 0 || n <= 0 || k <= 0) return;
    const std::int64_t row_blocks = (m + 127) / 128 * count;
    const std::int64_t tiles = row_blocks * ((n + 127) / 128);
    tiles128 += tiles;
    stages128 += tiles * ((k + 127) / 128);
    columns128 += row_blocks * round_up(n, 128);
    columns192 += row_blocks * round_up(n, 192);
  }
  // 128 x 192 moves a sixth fewer bytes of A and B per multiply-add (+2-5% on the H200's prefill cases,
  // bench/NOTES.md version 13) but pads N to a multiple of 192 and makes fewer, longer tiles. Taken where the
  // padding adds at most 5%, the 128 x 128 tiles would fill the `sms` multiprocessors four times over and
  // run 1024 deep on average: on the reference example (K = 32 in most tiles) it was 8% slower.
  bool wide_pays(int sms) const {
    return tiles128 >= 4 * static_cast<std::int64_t>(sms) && stages128 >= 8 * tiles128 &&
           100 * columns192 <= 105 * columns128;
  }
};

// The register-operand kernel's tiles (tokens x weights); 32 x 256 and 32 x 384 may be forced with
// --mma-tiler-mn, 64 x 256 is the planner's for 33-64 tokens.
inline bool swapped_tile(int block_m, int block_n) {
  return (block_m == 32 && (block_n == 256 || block_n == 384)) || (block_m == 64 && block_n == 256);
}
inline bool forcible_swapped_tile(int block_m, int block_n) { return block_m == 32 && swapped_tile(block_m, block_n); }
// Its 16-token tile, built for staged tokens only (four consumer warpgroups of one 64-weight slab): the
// planner's choice for groups of at most 16 rows, or kernel path staged with --mma-tiler-mn 16,256.
inline bool staged_tokens_tile(int block_m, int block_n) { return block_m == 16 && block_n == 256; }

// The register-operand kernel's weights per tile for `tokens` per tile, groups of up to n_max weights
// (D's columns) and the weights' scale granularity: three slabs per consumer warpgroup (384) where the
// tile holds 32 tokens, the weights carry mx32 scales and the padding past n_max stays within 1/32 of
// n_max more than 256's, else two (256). The third slab spreads a stage's fixed cost (waits, token decode,
// addressing) over 1.5x the weights: decode-G128-M16 -8.5% (mxfp4) and -6.4% (mxfp8:mxfp4) on the H200,
// but +7% for nvfp4 and +0.3% for mxfp8:nvfp4 (nv16 weights: why is not yet separated, bench/NOTES.md
// version 12).
inline int swapped_tile_weights(int tokens, std::int64_t n_max, ScaleGranularity weight_scales) {
  if (tokens != 32 || n_max <= 0 || weight_scales != ScaleGranularity::mx32) return 256;
  const std::int64_t pad384 = round_up(n_max, 384) - n_max, pad256 = round_up(n_max, 256) - n_max;
  return pad384 <= pad256 + n_max / 32 ? 384 : 256;
}

inline bool tile_supported(int block_m, int block_n) {
  for (const auto& tile : kTiles)
    if (tile[0] == block_m && tile[1] == block_n) return true;
  return false;
}
// Pipeline stages and dynamic shared memory of an instantiation (for describe_plan).
int fp8_kernel_stages(const KernelChoice& choice);
// Launches the persistent kernel on `grid` CTAs.
cudaError_t launch_fp8_block128(const KernelChoice& choice, const KernelParams& params, int grid, cudaStream_t stream);
cudaError_t launch_mxfp8(const KernelChoice& choice, const KernelParams& params, int grid, cudaStream_t stream);
// The staged path (KernelPath::staged): the FP8 kernel's BF16 instantiation over operands that
// launch_stage_bf16 wrote into the workspace.
cudaError_t launch_staged(const KernelChoice& choice, const KernelParams& params, int grid, cudaStream_t stream);
int staged_kernel_stages(const KernelChoice& choice);

// One operand of the MoE forms staged as bf16 with its block scales folded in: dst[batch][row][k] =
// src[batch][row][k] * scale(batch, row, k), ue8m0 per 32 of K (mxfp8, mxfp4) or ue4m3 per 16 (nvfp4;
// its global scale stays in alpha). Exact in bf16 for every e2m1 value at every scale, and for e4m3 / e5m2
// down to scales of 2^-124 / 2^-117 (below, the smallest elements round; the decoding kernel's rule).
// fp8-block128 tokens (block128_f16) are staged as f16 instead: each row times its f32 (or ue8m0) scales per 128
// of K and divided by a power of two of its own, rounded to f16, the power of two into factors[batch * rows + row]
// (core::block128_row_exponent: from the bound its scales give, or its largest value where that lies far below).
struct StageOperand {
  const std::uint8_t* src = nullptr;  // K-major elements
  DataType element = DataType::e4m3;  // e4m3, e5m2 or e2m1 (two per byte, the low nibble first)
  bool nv16 = false;                  // ue4m3 scales per 16 of K instead of ue8m0 per 32
  bool block128_f16 = false;          // fp8-block128 tokens as f16, in the weights' f16 order
  std::int64_t rows = 0, k = 0, ld = 0, batches = 1, batch_stride = 0;  // in elements
  const std::uint8_t* scales = nullptr;  // the scales: 8-bit codes, or block128_f16's f32 or ue8m0 (scale_type)
  DataType scale_type = DataType::ue8m0;
  ScaleLayout scale_layout = ScaleLayout::linear;
  std::int64_t scale_ld = 0, scale_batch_stride = 0;  // in scales
  std::uint16_t* dst = nullptr;  // bf16 bits (f16 for block128_f16)
  std::int64_t dst_ld = 0, dst_batch_stride = 0;
  float* factors = nullptr;  // block128_f16: each row's power of two
  // Each 64-deep slice of a row written in the register-operand kernel's K order (core::weights_order_slot, or
  // weights_order_slot_f16 for block128_f16), the last slice padded with zeros (dst_ld is then weights_order_ld(k)).
  bool weights_order = false;
  // Flags the pass zeroes before the GEMM kernel that follows it reads them (KernelParams::partial_flags).
  std::int32_t* flags_to_zero = nullptr;
  int flag_count = 0;
};
// The workspace a staged-token call keeps for the register-operand kernel's stream-K partials and their flags
// (KernelParams::partials), with `sms` multiprocessors (at least one): kStreamKPartialFloats fp32 each, a
// multiple of 256 bytes in all, then a 4-byte flag each.
// stream_k_flags_offset: where the flags begin, counted from the partials'.
inline std::size_t stream_k_flags_offset(int sms) {
  const std::size_t n = static_cast<std::size_t>(sms > 0 ? sms : 1);
  return (n * kStreamKPartialFloats * sizeof(float) + 255) / 256 * 256;
}
inline std::size_t stream_k_workspace(int sms) {
  return stream_k_flags_offset(sms) + static_cast<std::size_t>(sms > 0 ? sms : 1) * sizeof(std::int32_t);
}
// Elements of K a staged row holds (16-byte aligned rows, as TMA needs).
inline std::int64_t staged_ld(std::int64_t k) { return round_up(k > 0 ? k : 1, 8); }
// ... and a row staged in the weights' K order: whole 64-deep slices.
inline std::int64_t weights_order_ld(std::int64_t k) { return round_up(k > 0 ? k : 1, 64); }
// Stages A and B (either may have no rows) in one launch over `sms` multiprocessors.
cudaError_t launch_stage_bf16(const StageOperand& a, const StageOperand& b, int sms, cudaStream_t stream);

// mxfp4 x mxfp4 and mxfp8 x mxfp4: the MX kernel with FP4 operands widened on chip.
cudaError_t launch_mxfp4(const KernelChoice& choice, const KernelParams& params, int grid, cudaStream_t stream);

// The decoding kernel: FP4 x FP4 (kernel_decode_fp4.cu), and FP8 activations with FP4 weights
// (kernel_decode_mixed.cu). false when the file has no instantiation for the choice.
bool launch_decode_fp4(const KernelChoice& choice, const KernelParams& params, int grid, cudaStream_t stream,
                       cudaError_t* result);
bool launch_decode_mixed(const KernelChoice& choice, const KernelParams& params, int grid, cudaStream_t stream,
                         cudaError_t* result);
bool launch_swapped(const KernelChoice& choice, const KernelParams& params, int grid, cudaStream_t stream,
                    cudaError_t* result);
int decode_fp4_stages(const KernelChoice& choice);
int swapped_stages(const KernelChoice& choice);
int swapped_consumers(const KernelChoice& choice);  // consumer warpgroups of its instantiation
int decode_mixed_stages(const KernelChoice& choice);

// cudaFuncSetAttribute(MaxDynamicSharedMemorySize) for the kernel of instantiation Tag, once per device
// (the attribute stays with the function; setting it on every launch costs a driver call each time).
template <class Tag>
cudaError_t allow_dynamic_shared_memory(const void* kernel, int bytes) {
  static std::atomic<std::uint64_t> done{0};  // bit d: set on device d (devices 0-63; others every time)
  int device = 0;
  cudaError_t e = cudaGetDevice(&device);
  if (e != cudaSuccess) return e;
  const std::uint64_t bit = device >= 0 && device < 64 ? std::uint64_t{1} << device : 0;
  if ((done.load(std::memory_order_acquire) & bit) != 0) return cudaSuccess;
  e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
  if (e == cudaSuccess) done.fetch_or(bit, std::memory_order_release);
  return e;
}

// Resolves, validates and counts the tiles of every group (one CTA), writing the workspace.
cudaError_t launch_prepare_groups(const PrepareParams& params, cudaStream_t stream);

}  // namespace bsgemm::cuda
