// The multithreaded CPU back end: what runs when no GPU is present.
#pragma once

#include "bsgemm/problem.hpp"
#include "bsgemm/status.hpp"

namespace bsgemm::cpu {

// Runs a validated, host-resident grouped GEMM. Each operand block is decoded once into fp32
// panels, products are accumulated in fp32, and D is written with round-to-nearest-even.
// threads = 0 uses every hardware thread.
Status run(const GemmArguments& args, int threads);

}  // namespace bsgemm::cpu
