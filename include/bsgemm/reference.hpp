// The CPU reference and the output check every back end is measured against.
//
// reference_gemm() computes D from the definition (problem.hpp) with fp64 products and fp64
// accumulation over K in order: no tiling of K, no reordered sums, nothing a back end does to be
// fast, so that it can be trusted by reading. It runs on all hardware threads.
//
// check_output() compares the D a back end wrote with expected values, element by element. The
// error of element (m, n) is normalised by the largest value its terms could reach:
//     err = |D - R| / (|alpha| * ||a_m||_2 * ||b_n||_2 + |beta * C| + 2^-126)
// where a_m and b_n are the decoded row of A and column of B (so that |R| never exceeds the
// denominator). An fp32-accumulating back end has err <= K * 2^-24 at worst (~sqrt(K) * 2^-24
// typically) plus the rounding of the output type (unit roundoff 2^-9 for bf16, 2^-11 for f16),
// whatever the cancellation in the sum. NaN in D where R is finite, or a finite D where R is NaN,
// always fails (its error counts as infinite); NaN where R is NaN, and an infinity equal to R,
// pass.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "bsgemm/problem.hpp"
#include "bsgemm/status.hpp"

namespace bsgemm {

// Expected D of every group, fp64, laid out per group as [l][m][n] (row-major over m, n) for the
// group's own rows only: M_g rows for the pointer-array and contiguous forms, masked_m[g] rows
// for the masked form. An empty group has an empty vector; the outer vector has one entry per
// group.
using ExpectedOutput = std::vector<std::vector<double>>;

// D from the definition, in fp64, for host-resident arguments: each element the fp64 sum of its K
// products of decoded elements and scales, in K order (bit for bit the same as decoding both factors
// at every product). C is read when has_c is set (beta * C is added even when beta is 0, as the
// definition says). Fails (and leaves `out` empty) when can_implement would fail on the CPU back
// end, or with internal_error when the host's memory runs out.
Status reference_gemm(const GemmArguments& args, ExpectedOutput* out);

struct CheckOptions {
  double tolerance = 0;  // 0: default_tolerance(args)
  int threads = 0;       // 0: all hardware threads
  int list_failures = 0;  // how many failing elements CheckReport::listed keeps (the first by position)
};

// One element above the bound: where it is, what was written and what was expected.
struct FailedElement {
  int group = 0;
  std::int64_t l = 0, m = 0, n = 0;
  double value = 0, expected = 0, error = 0;  // error: the normalised error
};

struct CheckReport {
  bool pass = false;
  double tolerance = 0;
  double max_rel_err = 0;  // the normalised error above, maximum over all elements
  double max_abs_err = 0;  // max |D - R|
  std::int64_t checked = 0;
  std::int64_t failures = 0;  // elements above tolerance, NaN mismatches included
  // The worst element: group, batch, row, column, value written and value expected.
  int worst_group = -1;
  std::int64_t worst_l = 0, worst_m = 0, worst_n = 0;
  double worst_value = 0, worst_expected = 0;
  // The first CheckOptions::list_failures failing elements, by group, batch, row and column.
  std::vector<FailedElement> listed;
  // Why nothing was compared (invalid arguments, or `expected` not shaped like the arguments'
  // groups); empty when the comparison ran.
  std::string error;

  std::string summary() const;  // one line
};

// Compares D (host memory, as described by args) with `expected`, every element of every group's
// own rows (those `expected` holds; other rows of D are not read), on options.threads threads.
CheckReport check_output(const GemmArguments& args, const ExpectedOutput& expected, const CheckOptions& options = {});

// The default bound of check_output for these arguments: the output type's rounding (2^-8 for
// bf16, 2^-10 for f16, twice their unit roundoff; 0 for f32) plus an accumulation allowance that the
// GPU's FP8 tensor-core accumulation with promotion to fp32 stays under (README "Accuracy"): 2^-10
// when a 128-deep fp8-block128 block is accumulated in the tensor cores, 2^-12 for the 32-deep MX
// blocks. The CPU back end's fp32 accumulation is far tighter (K * 2^-24 at worst).
double default_tolerance(const GemmArguments& args);

}  // namespace bsgemm
