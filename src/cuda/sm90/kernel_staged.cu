// Instantiations of the FP8 kernel for staged operands (mxfp8, mxfp4, nvfp4): bf16 operands with their
// scales folded in (stage_bf16.cu), BF16 wgmma, no scale loaders and no promotion (KernelPath::staged).
#include "src/cuda/sm90/kernel_fp8.cuh"
#include "src/cuda/sm90/launch.hpp"

namespace bsgemm::cuda {

namespace {

// The element kinds only name the unused FP8 wgmma type of the traits; staged operands are bf16.
template <int BlockM, int BlockN>
using StagedTraits = Fp8KernelTraits<ptx::Fp8Kind::e4m3, ptx::Fp8Kind::e4m3, ScaleGranularity::staged, BlockM, BlockN>;

}  // namespace

cudaError_t launch_staged(const KernelChoice& choice, const KernelParams& params, int grid, cudaStream_t stream) {
  if (choice.scales != ScaleGranularity::staged) return cudaErrorInvalidValue;
  return launch_for_tile<StagedTraits>(choice, params, grid, stream);
}

int staged_kernel_stages(const KernelChoice& choice) {
  return stages_for_tile<StagedTraits>(choice.block_m, choice.block_n);
}

}  // namespace bsgemm::cuda
