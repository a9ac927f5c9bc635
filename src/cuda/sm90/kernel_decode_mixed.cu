// Instantiations of the decoding kernel with FP8 activations: mxfp8 or fp8-block128 A with mxfp4 or
// nvfp4 B (FP4 weights), and mxfp8 x mxfp8 (--kernel-path bf16).
#include "src/cuda/sm90/kernel_decode.cuh"

namespace bsgemm::cuda {

namespace {
using G = ScaleGranularity;
using Mx8Mx4 = DecodeCombination<false, G::mx32, true, G::mx32>;
using Mx8Nv4 = DecodeCombination<false, G::mx32, true, G::nv16>;
using Block128Mx4 = DecodeCombination<false, G::block128, true, G::mx32>;
using Block128Nv4 = DecodeCombination<false, G::block128, true, G::nv16>;
using Mx8Mx8 = DecodeCombination<false, G::mx32, false, G::mx32>;

}  // namespace

bool launch_decode_mixed(const KernelChoice& choice, const KernelParams& params, int grid, cudaStream_t stream,
                         cudaError_t* result) {
  return launch_first_match<Mx8Mx4, Mx8Nv4, Block128Mx4, Block128Nv4, Mx8Mx8>(choice, params, grid, stream, result);
}

int decode_mixed_stages(const KernelChoice& choice) {
  return stages_of_first_match<Mx8Mx4, Mx8Nv4, Block128Mx4, Block128Nv4, Mx8Mx8>(choice);
}

}  // namespace bsgemm::cuda
