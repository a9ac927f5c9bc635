// Instantiations of the FP8 kernel for mxfp8: e4m3 or e5m2 for each of A and B, ue8m0 scales per 32 of K.
#include "src/cuda/sm90/kernel_fp8.cuh"
#include "src/cuda/sm90/launch.hpp"

namespace bsgemm::cuda {

namespace {

template <ptx::Fp8Kind A, ptx::Fp8Kind B>
struct MxTile {
  template <int BlockM, int BlockN>
  using Traits = Fp8KernelTraits<A, B, ScaleGranularity::mx32, BlockM, BlockN>;
};

template <ptx::Fp8Kind A, ptx::Fp8Kind B>
cudaError_t launch_tile(const KernelChoice& choice, const KernelParams& params, int grid, cudaStream_t stream) {
  return launch_for_tile<MxTile<A, B>::template Traits>(choice, params, grid, stream);
}

// The pipeline depth does not depend on the FP8 kinds.
template <ScaleGranularity Scales, bool APacked, bool BPacked>
struct DepthOf {
  template <int BlockM, int BlockN>
  using Traits = Fp8KernelTraits<ptx::Fp8Kind::e4m3, ptx::Fp8Kind::e4m3, Scales, BlockM, BlockN, APacked, BPacked>;
};

}  // namespace

int fp8_kernel_stages(const KernelChoice& choice) {
  const int m = choice.block_m, n = choice.block_n;
  if (choice.scales == ScaleGranularity::staged) return staged_kernel_stages(choice);
  if (choice.scales == ScaleGranularity::block128)
    return stages_for_tile<DepthOf<ScaleGranularity::block128, false, false>::Traits>(m, n);
  if (choice.a_packed) return stages_for_tile<DepthOf<ScaleGranularity::mx32, true, true>::Traits>(m, n);
  if (choice.b_packed) return stages_for_tile<DepthOf<ScaleGranularity::mx32, false, true>::Traits>(m, n);
  return stages_for_tile<DepthOf<ScaleGranularity::mx32, false, false>::Traits>(m, n);
}

cudaError_t launch_mxfp8(const KernelChoice& choice, const KernelParams& params, int grid, cudaStream_t stream) {
  using ptx::Fp8Kind;
  if (choice.a_packed || choice.b_packed) return cudaErrorInvalidValue;
  if (choice.a == Fp8Kind::e4m3 && choice.b == Fp8Kind::e4m3) return launch_tile<Fp8Kind::e4m3, Fp8Kind::e4m3>(choice, params, grid, stream);
  if (choice.a == Fp8Kind::e4m3 && choice.b == Fp8Kind::e5m2) return launch_tile<Fp8Kind::e4m3, Fp8Kind::e5m2>(choice, params, grid, stream);
  if (choice.a == Fp8Kind::e5m2 && choice.b == Fp8Kind::e4m3) return launch_tile<Fp8Kind::e5m2, Fp8Kind::e4m3>(choice, params, grid, stream);
  return launch_tile<Fp8Kind::e5m2, Fp8Kind::e5m2>(choice, params, grid, stream);
}

}  // namespace bsgemm::cuda
