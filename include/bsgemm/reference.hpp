// The CPU reference and the output check every back end is measured against.
//
// reference_gemm() computes D from the definition (problem.hpp) with fp64 products and fp64
// accumulation: slow on purpose, simple enough to trust by reading.
//
// check_output() compares the D a back end wrote with expected values, element by element. The
// error of element (m, n) is normalised by the largest value its terms could reach:
//     err = |D - R| / (|alpha| * ||a_m||_2 * ||b_n||_2 + |beta * C| + 2^-126)
// where a_m and b_n are the decoded row of A and column of B. An fp32-accumulating back end has
// err <= K * 2^-24 at worst (~sqrt(K) * 2^-24 typically) plus the rounding of the output type
// (2^-9 for bf16, 2^-12 for f16), whatever the cancellation in the sum. NaN in D where R is
// finite, or a finite D where R is NaN, always fails.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "bsgemm/problem.hpp"
#include "bsgemm/status.hpp"

namespace bsgemm {

// Expected D of every group, fp64, laid out per group as [l][m][n] (row-major over m, n).
using ExpectedOutput = std::vector<std::vector<double>>;

// D from the definition, in fp64, for host-resident arguments. C is read when has_c is set.
// Fails (and leaves `out` empty) when can_implement would fail on the CPU back end.
Status reference_gemm(const GemmArguments& args, ExpectedOutput* out);

struct CheckOptions {
  double tolerance = 0;  // 0: default_tolerance(args)
  int threads = 0;       // 0: all hardware threads
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

  std::string summary() const;  // one line
};

// Compares D (host memory, as described by args) with `expected`.
CheckReport check_output(const GemmArguments& args, const ExpectedOutput& expected, const CheckOptions& options = {});

// The default bound of check_output for these arguments: the output type's rounding plus the
// accumulation error bsgemm's back ends are built to stay under (README "Accuracy").
double default_tolerance(const GemmArguments& args);

}  // namespace bsgemm
