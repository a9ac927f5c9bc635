// The sm_90a back end, seen from the dispatching API (src/core/api.cpp). Host code only.
#pragma once

#include <cstddef>
#include <string>

#include "bsgemm/gemm.hpp"

namespace bsgemm::cuda {

bool device_available();
// Back-end limits on top of core::validate(): majors, recipes, tile and cluster overrides.
Status can_implement(const GemmArguments& args, const RunOptions& options);
std::size_t workspace_size(const GemmArguments& args, const RunOptions& options);
Status run(const GemmArguments& args, const RunOptions& options, void* workspace, std::size_t workspace_bytes,
           cudaStream_t stream);
Status device_status(const void* workspace, cudaStream_t stream);
std::string describe_plan(const GemmArguments& args, const RunOptions& options);

}  // namespace bsgemm::cuda
