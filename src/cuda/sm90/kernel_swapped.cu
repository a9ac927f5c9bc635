// Instantiations of the register-operand kernel: FP4 weights (mxfp4, nvfp4) with mxfp8 or same-recipe
// FP4 tokens, decoded on chip or staged as bf16, or fp8-block128 tokens staged as f16 with their scales
// folded in (F16 wgmma); 16, 32 or 64 tokens per tile.
#include "src/cuda/sm90/kernel_swapped.cuh"

namespace bsgemm::cuda {

namespace {
using G = ScaleGranularity;
using Nvfp4 = SwappedCombination<true, G::nv16, G::nv16>;
using Mxfp4 = SwappedCombination<true, G::mx32, G::mx32>;
using Mx8Mx4 = SwappedCombination<false, G::mx32, G::mx32>;
using Mx8Nv4 = SwappedCombination<false, G::mx32, G::nv16>;
// Tokens of any of those recipes staged as bf16 in the weights' K order (stage_bf16.cu).
using StagedMx4 = SwappedCombination<false, G::staged, G::mx32>;
using StagedNv4 = SwappedCombination<false, G::staged, G::nv16>;
// fp8-block128 tokens staged as f16 with their scales folded in.
using Block128Mx4 = SwappedCombination<false, G::block128, G::mx32>;
using Block128Nv4 = SwappedCombination<false, G::block128, G::nv16>;
}  // namespace

bool launch_swapped(const KernelChoice& choice, const KernelParams& params, int grid, cudaStream_t stream,
                    cudaError_t* result) {
  return launch_first_match<Nvfp4, Mxfp4, Mx8Mx4, Mx8Nv4, StagedMx4, StagedNv4, Block128Mx4, Block128Nv4>(
      choice, params, grid, stream, result);
}

int swapped_consumers(const KernelChoice& choice) {
  return value_of_first_match<Nvfp4, Mxfp4, Mx8Mx4, Mx8Nv4, StagedMx4, StagedNv4, Block128Mx4, Block128Nv4>(
      choice, [&](auto combination) { return decltype(combination)::consumers(choice.block_m, choice.block_n); });
}

int swapped_stages(const KernelChoice& choice) {
  return stages_of_first_match<Nvfp4, Mxfp4, Mx8Mx4, Mx8Nv4, StagedMx4, StagedNv4, Block128Mx4, Block128Nv4>(choice);
}

}  // namespace bsgemm::cuda
