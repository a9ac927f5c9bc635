// Instantiations of the MX kernel with FP4 operands: mxfp4 x mxfp4 (both widened on chip) and mxfp8 x
// mxfp4 (FP8 activations, e4m3 or e5m2, with FP4 weights). ue8m0 scales per 32 of K as for mxfp8.
#include "src/cuda/sm90/kernel_fp8.cuh"
#include "src/cuda/sm90/launch.hpp"

namespace bsgemm::cuda {

namespace {

template <ptx::Fp8Kind A, bool APacked>
struct Mx4Tile {
  template <int BlockM, int BlockN>
  using Traits = Fp8KernelTraits<A, ptx::Fp8Kind::e4m3, ScaleGranularity::mx32, BlockM, BlockN, APacked, true>;
};

template <ptx::Fp8Kind A, bool APacked>
cudaError_t launch_tile(const KernelChoice& choice, const KernelParams& params, int grid, cudaStream_t stream) {
  return launch_for_tile<Mx4Tile<A, APacked>::template Traits>(choice, params, grid, stream);
}

}  // namespace

cudaError_t launch_mxfp4(const KernelChoice& choice, const KernelParams& params, int grid, cudaStream_t stream) {
  using ptx::Fp8Kind;
  if (choice.scales != ScaleGranularity::mx32 || !choice.b_packed || choice.b != Fp8Kind::e4m3) return cudaErrorInvalidValue;
  if (choice.a_packed) {
    if (choice.a != Fp8Kind::e4m3) return cudaErrorInvalidValue;
    return launch_tile<Fp8Kind::e4m3, true>(choice, params, grid, stream);
  }
  if (choice.a == Fp8Kind::e4m3) return launch_tile<Fp8Kind::e4m3, false>(choice, params, grid, stream);
  return launch_tile<Fp8Kind::e5m2, false>(choice, params, grid, stream);
}

}  // namespace bsgemm::cuda
