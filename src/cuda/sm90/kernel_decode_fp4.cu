// Instantiations of the decoding kernel for FP4 x FP4: nvfp4 (ue4m3 scales per 16) and mxfp4 (ue8m0 per 32).
#include "src/cuda/sm90/kernel_decode.cuh"

namespace bsgemm::cuda {

namespace {
using Nvfp4 = DecodeCombination<true, ScaleGranularity::nv16, true, ScaleGranularity::nv16>;
using Mxfp4 = DecodeCombination<true, ScaleGranularity::mx32, true, ScaleGranularity::mx32>;
}  // namespace

bool launch_decode_fp4(const KernelChoice& choice, const KernelParams& params, int grid, cudaStream_t stream,
                       cudaError_t* result) {
  return launch_first_match<Nvfp4, Mxfp4>(choice, params, grid, stream, result);
}

int decode_fp4_stages(const KernelChoice& choice) {
  return stages_of_first_match<Nvfp4, Mxfp4>(choice);
}

}  // namespace bsgemm::cuda
