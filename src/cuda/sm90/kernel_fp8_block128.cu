// Instantiations of the FP8 kernel for fp8-block128 (e4m3 x e4m3, fp32 or ue8m0 scales).
#include "src/cuda/sm90/kernel_fp8.cuh"
#include "src/cuda/sm90/launch.hpp"

namespace bsgemm::cuda {

namespace {

template <int BlockM, int BlockN>
using Block128Traits = Fp8KernelTraits<ptx::Fp8Kind::e4m3, ptx::Fp8Kind::e4m3, ScaleGranularity::block128, BlockM, BlockN>;

}  // namespace

cudaError_t launch_fp8_block128(const KernelChoice& choice, const KernelParams& params, int grid, cudaStream_t stream) {
  if (choice.a != ptx::Fp8Kind::e4m3 || choice.b != ptx::Fp8Kind::e4m3) return cudaErrorInvalidValue;
  return launch_for_tile<Block128Traits>(choice, params, grid, stream);
}

}  // namespace bsgemm::cuda
