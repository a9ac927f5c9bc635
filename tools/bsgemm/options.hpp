// Command-line parsing for the bsgemm tool: a small option reader shared by every command, the value
// parsers (types, recipes, shapes), and the typed configurations of `bsgemm run` and `bsgemm bench`.
//
// Every parser reports a bad command line by throwing UsageError; main() prints its message as one
// line, "bsgemm: error: <message>", and exits with kExitUsage.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "bsgemm/gemm.hpp"
#include "bsgemm/problem.hpp"
#include "bsgemm/recipe.hpp"
#include "src/testing/workload.hpp"

namespace bsgemm::tool {

// Exit codes of every command.
inline constexpr int kExitPass = 0;     // PASS, or nothing to check
inline constexpr int kExitFail = 1;     // a result was checked and is wrong
inline constexpr int kExitUsage = 2;    // bad options, or the problem fails can_implement()
inline constexpr int kExitRuntime = 3;  // a call failed while running (CUDA error, out of memory)

class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// One option a command accepts. The canonical name uses dashes; the reader also accepts the
// reference system's underscores (--ab_dtype for --ab-dtype).
struct OptionSpec {
  std::string_view name;      // without the leading dashes: "ab-dtype"
  std::string_view argument;  // placeholder shown in the help ("TYPE"); empty for a flag
  std::string_view help;
};

// The options of one command line, by canonical name. An option given twice keeps its last
// value, as argparse (the reference system's parser) does.
class ParsedOptions {
 public:
  bool has(std::string_view name) const { return values_.find(name) != values_.end(); }
  // The value of an option that takes one, or nullptr when the option was not given.
  const std::string* find(std::string_view name) const;
  void set(std::string_view name, std::string value) { values_.insert_or_assign(std::string(name), std::move(value)); }

 private:
  std::map<std::string, std::string, std::less<>> values_;
};

// Reads `--name value`, `--name=value` and `--flag`; rejects unknown options, positional
// arguments, a missing value and a value given to a flag.
ParsedOptions parse_options(std::span<const std::string_view> args, std::span<const OptionSpec> specs);

// "usage" followed by one aligned line per option.
std::string format_help(std::string_view usage, std::span<const OptionSpec> specs);

// ---- value parsers (each names `option` in its error) -----------------------------------------------

std::int64_t parse_integer(std::string_view option, std::string_view text, std::int64_t min, std::int64_t max);
double parse_real(std::string_view option, std::string_view text);
// "M,N", "(M,N)" or "MxN".
std::pair<int, int> parse_pair(std::string_view option, std::string_view text);
// "(M,N,K,L),(M,N,K,L),..."; a tuple of three is (M,N,K) with L = 1.
std::vector<testing::GroupShape> parse_problem_sizes(std::string_view option, std::string_view text);
// Comma-separated items, empty items dropped.
std::vector<std::string> split_list(std::string_view text);

// Element types of A or B (CuTe names such as Float8E4M3FN, or e4m3, e5m2, e2m1).
DataType parse_element_type(std::string_view option, std::string_view text);
// Scale types (Float8E8M0FNU/ue8m0, Float8E4M3FN/ue4m3, Float32/f32). An e4m3 scale is the
// unsigned ue4m3 of NVFP4, as in the reference system.
DataType parse_scale_type(std::string_view option, std::string_view text);
// Output types: Float32/f32, Float16/f16, BFloat16/bf16.
DataType parse_output_type(std::string_view option, std::string_view text);
Recipe parse_recipe(std::string_view option, std::string_view text);
ScaleLayout parse_scale_layout(std::string_view option, std::string_view text);
GroupLayout parse_group_layout(std::string_view option, std::string_view text);
Backend parse_backend(std::string_view option, std::string_view text);
KernelPath parse_kernel_path(std::string_view option, std::string_view text);
// One of the two majors `first` and `second` allows (A: m|k, B: n|k, C/D: m|n).
Major parse_major(std::string_view option, std::string_view text, Major first, Major second);

// A and B of one problem. `text` is "RECIPE" (both operands) or "A_RECIPE:B_RECIPE" (mixed).
std::pair<OperandType, OperandType> parse_recipe_pair(std::string_view option, std::string_view text);

// "nvfp4" or "mxfp8 x mxfp4".
std::string recipe_label(const OperandType& a, const OperandType& b);

// Contiguous and masked groups must share N and K and have L = 1: checked here so that the
// user gets an error in terms of --problem-sizes-mnkl before anything is drawn.
void check_moe_shapes(GroupLayout layout, const std::vector<testing::GroupShape>& groups);

// ---- bsgemm run ----------------------------------------------------------------------------------

// How `bsgemm run` obtains expected values.
enum class ReferenceMode {
  exact,      // the fp64 reference (reference_gemm)
  fast,       // the CPU back end with fp32 output
  automatic,  // exact when the problem is small enough to check in a few seconds, else fast
};

struct RunConfig {
  testing::WorkloadSpec spec;  // recipes, types, majors, layout, groups, alpha, beta, seed, threads
  RunOptions run_options;      // back end, tile, cluster, CPU threads
  MemoryLocation descriptions = MemoryLocation::host;
  std::optional<double> tolerance;  // absent: check_output's default for the output type
  int warmup_iterations = 0;
  int iterations = 1;
  bool skip_ref_check = false;
  int list_failures = 0;  // failing elements the check prints (--list-failures)
  bool use_cold_l2 = false;
  ReferenceMode reference = ReferenceMode::automatic;
  std::string json_path;  // empty: no JSON
  bool help = false;
};

std::string run_help();
RunConfig parse_run_command(std::span<const std::string_view> args);

// ---- bsgemm bench --------------------------------------------------------------------------------

struct BenchConfig {
  std::string cases_path;      // empty: bench/cases.json found by find_default_cases()
  std::string cases_filter;    // only cases whose name contains it
  std::vector<std::string> recipes;  // for cases without their own "recipes"
  std::vector<GroupLayout> layouts;  // for MoE cases; groups_mnkl cases are pointer arrays
  ScaleLayout scale_layout = ScaleLayout::linear;
  RunOptions run_options;
  MemoryLocation descriptions = MemoryLocation::host;
  int warmup_iterations = 3;
  int iterations = 20;
  bool cold_l2 = true;
  bool check = false;
  std::uint64_t seed = 2025;
  std::string json_path;
  bool help = false;
};

std::string bench_help();
BenchConfig parse_bench_command(std::span<const std::string_view> args);

}  // namespace bsgemm::tool
