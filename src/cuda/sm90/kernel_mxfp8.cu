// Instantiations of the FP8 kernel for mxfp8: e4m3 or e5m2 for each of A and B, ue8m0 scales per 32 of K.
#include "src/cuda/sm90/kernel_fp8.cuh"
#include "src/cuda/sm90/launch.hpp"

namespace bsgemm::cuda {

namespace {

template <ptx::Fp8Kind A, ptx::Fp8Kind B, int BlockM, int BlockN>
using MxTraits = Fp8KernelTraits<A, B, ScaleGranularity::mx32, BlockM, BlockN>;

template <ptx::Fp8Kind A, ptx::Fp8Kind B>
cudaError_t launch_tile(const Fp8KernelChoice& choice, const KernelParams& params, int grid, cudaStream_t stream) {
  if (choice.block_m == 128 && choice.block_n == 128) return launch_fp8_kernel<MxTraits<A, B, 128, 128>>(params, grid, stream);
  if (choice.block_m == 128 && choice.block_n == 64) return launch_fp8_kernel<MxTraits<A, B, 128, 64>>(params, grid, stream);
  if (choice.block_m == 64 && choice.block_n == 256) return launch_fp8_kernel<MxTraits<A, B, 64, 256>>(params, grid, stream);
  if (choice.block_m == 64 && choice.block_n == 128) return launch_fp8_kernel<MxTraits<A, B, 64, 128>>(params, grid, stream);
  return cudaErrorInvalidValue;
}

template <ScaleGranularity Scales, int BlockM, int BlockN, bool APacked, bool BPacked>
constexpr int stages_of() {
  return Fp8KernelTraits<ptx::Fp8Kind::e4m3, ptx::Fp8Kind::e4m3, Scales, BlockM, BlockN, APacked, BPacked>::kStages;
}

template <ScaleGranularity Scales, bool APacked = false, bool BPacked = false>
int stages_for_tile(int block_m, int block_n) {
  if (block_m == 128 && block_n == 128) return stages_of<Scales, 128, 128, APacked, BPacked>();
  if (block_m == 128 && block_n == 64) return stages_of<Scales, 128, 64, APacked, BPacked>();
  if (block_m == 64 && block_n == 256) return stages_of<Scales, 64, 256, APacked, BPacked>();
  if (block_m == 64 && block_n == 128) return stages_of<Scales, 64, 128, APacked, BPacked>();
  return 0;
}

}  // namespace

int fp8_kernel_stages(const Fp8KernelChoice& choice) {
  if (choice.scales == ScaleGranularity::block128)
    return stages_for_tile<ScaleGranularity::block128>(choice.block_m, choice.block_n);
  if (choice.a_packed) return stages_for_tile<ScaleGranularity::mx32, true, true>(choice.block_m, choice.block_n);
  if (choice.b_packed) return stages_for_tile<ScaleGranularity::mx32, false, true>(choice.block_m, choice.block_n);
  return stages_for_tile<ScaleGranularity::mx32>(choice.block_m, choice.block_n);
}

cudaError_t launch_mxfp8(const Fp8KernelChoice& choice, const KernelParams& params, int grid, cudaStream_t stream) {
  using ptx::Fp8Kind;
  if (choice.a_packed || choice.b_packed) return cudaErrorInvalidValue;
  if (choice.a == Fp8Kind::e4m3 && choice.b == Fp8Kind::e4m3) return launch_tile<Fp8Kind::e4m3, Fp8Kind::e4m3>(choice, params, grid, stream);
  if (choice.a == Fp8Kind::e4m3 && choice.b == Fp8Kind::e5m2) return launch_tile<Fp8Kind::e4m3, Fp8Kind::e5m2>(choice, params, grid, stream);
  if (choice.a == Fp8Kind::e5m2 && choice.b == Fp8Kind::e4m3) return launch_tile<Fp8Kind::e5m2, Fp8Kind::e4m3>(choice, params, grid, stream);
  return launch_tile<Fp8Kind::e5m2, Fp8Kind::e5m2>(choice, params, grid, stream);
}

}  // namespace bsgemm::cuda
