// `bsgemm run`: one grouped block-scaled GEMM, drawn at random, run, checked and timed: the
// equivalent of the reference system's run() (CuTe DSL grouped_blockscaled_gemm.py).
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <limits>
#include <sstream>
#include <string>

#include "bsgemm/bsgemm.hpp"
#include "src/testing/json.hpp"
#include "tools/bsgemm/commands.hpp"
#include "tools/bsgemm/execution.hpp"
#include "tools/bsgemm/options.hpp"

namespace bsgemm::tool {

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Groups listed one per line up to this count; beyond it the first few and a summary.
constexpr std::size_t kGroupsListedInFull = 16;
constexpr std::size_t kGroupsListedInSummary = 8;

const char* reference_mode_name(ReferenceMode mode) {
  switch (mode) {
    case ReferenceMode::exact: return "exact";
    case ReferenceMode::fast: return "fast";
    case ReferenceMode::automatic: return "auto";
  }
  return "auto";
}

std::string describe_operand(const OperandType& type, Major major) {
  std::ostringstream out;
  out << to_string(type.recipe) << ": " << to_string(type.element) << " values, " << to_string(type.scale)
      << " scale per " << block_k(type.recipe) << " of K";
  if (type.recipe == Recipe::fp8_block128) out << " (B: per 128 x 128 block)";
  out << ", " << to_string(type.scale_layout) << " scale layout, " << to_string(major) << "-major";
  return out.str();
}

void print_configuration(const RunConfig& config, std::ostream& out) {
  const testing::WorkloadSpec& spec = config.spec;
  out << "bsgemm run: grouped block-scaled GEMM\n";
  out << "  groups        " << spec.groups.size() << ", " << to_string(spec.layout) << ", descriptions in "
      << (config.descriptions == MemoryLocation::host ? "host" : "device") << " memory\n";
  const bool list_all = spec.groups.size() <= kGroupsListedInFull;
  const std::size_t listed = list_all ? spec.groups.size() : kGroupsListedInSummary;
  for (std::size_t g = 0; g < listed; ++g) {
    const testing::GroupShape& s = spec.groups[g];
    out << "    group " << g << ": " << s.m << "x" << s.n << "x" << s.k << "x" << s.l << "  (MxNxKxL)\n";
  }
  if (!list_all) {
    std::int64_t total_m = 0;
    for (const testing::GroupShape& s : spec.groups) total_m += s.m;
    out << "    ... " << spec.groups.size() - listed << " more groups; sum of M over all groups " << total_m << "\n";
  }
  out << "  A             " << describe_operand(spec.a_type, spec.a_major) << "\n";
  out << "  B             " << describe_operand(spec.b_type, spec.b_major) << "\n";
  out << "  C, D          " << to_string(spec.d_type) << ", " << to_string(spec.d_major) << "-major; alpha " << spec.alpha
      << ", beta " << spec.beta << (spec.beta != 0 ? " (C is read)" : " (C is not read)") << "\n";
  if (config.run_options.path != KernelPath::automatic)
    out << "  kernel path   " << to_string(config.run_options.path) << "\n";
  if (config.run_options.tile_m != 0)
    out << "  mma tiler     " << config.run_options.tile_m << "," << config.run_options.tile_n << "\n";
  if (config.run_options.cluster_m != 1 || config.run_options.cluster_n != 1)
    out << "  cluster       " << config.run_options.cluster_m << "," << config.run_options.cluster_n << "\n";
  out << "  check         ";
  if (config.skip_ref_check) {
    out << "skipped (--skip-ref-check)\n";
  } else {
    out << "reference " << reference_mode_name(config.reference) << ", tolerance "
        << (config.tolerance ? format_number(*config.tolerance, "%.3g") : std::string("default for the output type")) << "\n";
  }
  out << "  timing        " << config.iterations << " iteration(s) after " << config.warmup_iterations
      << " warm-up, cold L2 " << (config.use_cold_l2 ? "on (the cuda back end's timing)" : "off") << "\n";
  out << "  seed          " << spec.seed << "\n";
  out.flush();
}

std::string groups_json(const testing::WorkloadSpec& spec) {
  std::string text = "[";
  for (std::size_t g = 0; g < spec.groups.size(); ++g) {
    const testing::GroupShape& s = spec.groups[g];
    text += (g ? ", [" : "[") + std::to_string(s.m) + ", " + std::to_string(s.n) + ", " + std::to_string(s.k) + ", " +
            std::to_string(s.l) + "]";
  }
  return text + "]";
}

// What one run measured; NaN where nothing was measured.
struct RunResult {
  std::string status = "UNCHECKED";
  Backend backend = Backend::cpu;
  std::string plan;
  std::string reference;  // "exact", "fast" or empty when unchecked
  double tolerance = kNaN, max_rel_err = kNaN, max_abs_err = kNaN;
  std::int64_t checked = 0, failures = 0;
  testing::Timing timing;
  double flops = 0, bytes = 0;
  double tflops() const { return timing.median_us > 0 ? flops / (timing.median_us * 1e-6) / 1e12 : kNaN; }
  double gbps() const { return timing.median_us > 0 ? bytes / (timing.median_us * 1e-6) / 1e9 : kNaN; }
};

std::string result_json(const RunConfig& config, const RunResult& result) {
  const testing::WorkloadSpec& spec = config.spec;
  const double median_us = result.timing.iterations > 0 ? result.timing.median_us : kNaN;
  JsonObject json;
  json.string("status", result.status)
      .string("backend", to_string(result.backend))
      .string("recipe", recipe_label(spec.a_type, spec.b_type))
      .string("a_recipe", to_string(spec.a_type.recipe))
      .string("b_recipe", to_string(spec.b_type.recipe))
      .string("a_dtype", to_string(spec.a_type.element))
      .string("b_dtype", to_string(spec.b_type.element))
      .string("sfa_dtype", to_string(spec.a_type.scale))
      .string("sfb_dtype", to_string(spec.b_type.scale))
      .string("sfa_layout", to_string(spec.a_type.scale_layout))
      .string("sfb_layout", to_string(spec.b_type.scale_layout))
      .string("c_dtype", to_string(spec.d_type))
      .string("a_major", to_string(spec.a_major))
      .string("b_major", to_string(spec.b_major))
      .string("c_major", to_string(spec.d_major))
      .string("layout", to_string(spec.layout))
      .string("descriptions", config.descriptions == MemoryLocation::host ? "host" : "device")
      .number("num_groups", static_cast<double>(spec.groups.size()))
      .raw("groups", groups_json(spec))
      .number("alpha", spec.alpha)
      .number("beta", spec.beta)
      .number("seed", static_cast<double>(spec.seed))
      .raw("reference", result.reference.empty() ? "null" : testing::json::quote(result.reference))
      .number("tolerance", result.tolerance)
      .number("max_rel_err", result.max_rel_err)
      .number("max_abs_err", result.max_abs_err)
      .number("checked", static_cast<double>(result.checked))
      .number("failures", static_cast<double>(result.failures))
      .number("warmup_iterations", config.warmup_iterations)
      .number("iterations", result.timing.iterations)
      .boolean("use_cold_l2", config.use_cold_l2)
      .number("median_us", median_us)
      .number("min_us", result.timing.iterations > 0 ? result.timing.min_us : kNaN)
      .number("max_us", result.timing.iterations > 0 ? result.timing.max_us : kNaN)
      .number("flops", result.flops)
      .number("bytes", result.bytes)
      .number("tflops", result.tflops())
      .number("gbps", result.gbps())
      .string("plan", result.plan);
  return json.render() + "\n";
}

}  // namespace

int run_command(std::span<const std::string_view> args) {
  const RunConfig config = parse_run_command(args);
  if (config.help) {
    std::cout << run_help();
    return kExitPass;
  }
  Progress progress;
  // Open the JSON file first, so that a bad path fails before a long run rather than after it.
  std::ofstream json_file;
  if (!config.json_path.empty()) {
    json_file.open(config.json_path, std::ios::binary | std::ios::trunc);
    if (!json_file) {
      print_error(progress, "--json " + config.json_path + ": cannot open the file for writing");
      return kExitUsage;
    }
  }
  print_configuration(config, std::cout);

  progress.begin("drawing and quantizing inputs");
  testing::HostWorkload workload;
  if (Status s = testing::HostWorkload::create(config.spec, &workload); !s.ok()) {
    print_error(progress, s.message);
    return exit_code_for(s);
  }
  const int copies =
      config.use_cold_l2 ? cold_l2_copies(workload_bytes(workload), config.warmup_iterations + config.iterations) : 1;
  Executor executor;
  if (Status s = Executor::create(&workload, config.run_options, config.descriptions, copies,
                                 AutoBackend::fall_back_to_cpu, &executor);
      !s.ok()) {
    print_error(progress, s.message);
    return exit_code_for(s);
  }
  progress.end();

  RunResult result;
  result.backend = executor.backend();
  result.plan = describe_plan(executor.args(), executor.options());
  result.flops = workload.flops();
  result.bytes = workload.min_bytes();
  std::cout << "  back end      " << to_string(result.backend) << " (--backend " << to_string(config.run_options.backend)
            << ")\n";
  if (!executor.note().empty()) std::cout << "                " << executor.note() << "\n";
  std::cout << "  plan          " << result.plan << "\n" << std::flush;

  progress.begin(std::string("running on the ") + to_string(result.backend) + " back end");
  if (Status s = executor.run_once(); !s.ok()) {
    print_error(progress, s.message);
    return exit_code_for(s);
  }
  progress.end();

  if (!config.skip_ref_check) {
    // The CPU back end cannot vouch for itself: its output is always checked against the fp64 reference.
    const bool exact = result.backend == Backend::cpu || config.reference == ReferenceMode::exact ||
                       (config.reference == ReferenceMode::automatic && exact_reference_is_quick(config.spec));
    CheckOutcome outcome;
    if (Status s = check_workload(workload, exact, config.tolerance, config.run_options.cpu_threads, config.list_failures, progress,
                                  &outcome);
        !s.ok()) {
      print_error(progress, s.message);
      return exit_code_for(s);
    }
    const CheckReport& report = outcome.report;
    result.status = report.pass ? "PASS" : "FAIL";
    result.reference = exact ? "exact" : "fast";
    result.tolerance = report.tolerance;
    result.max_rel_err = report.max_rel_err;
    result.max_abs_err = report.max_abs_err;
    result.checked = report.checked;
    result.failures = report.failures;
    std::cout << "check: " << report.checked << " elements against "
              << (exact ? "the fp64 reference" : "the CPU back end (fp32 output)") << "\n"
              << "  max abs err   " << format_number(report.max_abs_err, "%.4g") << "\n"
              << "  max rel err   " << format_number(report.max_rel_err, "%.4g") << "  (|D - R| / (|alpha| |a_m| |b_n| + |beta C|))\n"
              << "  tolerance     " << format_number(report.tolerance, "%.4g") << "\n"
              << "  " << report.summary() << "\n";
    for (const FailedElement& f : report.listed)
      std::cout << "  failed: group " << f.group << ", batch " << f.l << ", row " << f.m << ", column " << f.n << ": wrote "
                << format_number(f.value, "%.9g") << ", expected " << format_number(f.expected, "%.9g") << " (error "
                << format_number(f.error, "%.3g") << ")\n";
    std::cout << std::flush;
  }

  if (config.iterations > 0) {
    progress.begin("timing " + std::to_string(config.iterations) + " run(s) after " +
                   std::to_string(config.warmup_iterations) + " warm-up");
    if (Status s = executor.time(config.warmup_iterations, config.iterations, config.use_cold_l2, &progress, &result.timing);
        !s.ok()) {
      print_error(progress, s.message);
      return exit_code_for(s);
    }
    progress.end();
    const testing::Timing& t = result.timing;
    std::cout << "time: median " << format_number(t.median_us, "%.2f") << " us (min " << format_number(t.min_us, "%.2f")
              << ", max " << format_number(t.max_us, "%.2f") << ") over " << t.iterations << " iteration(s)\n"
              << "  " << format_number(result.tflops(), "%.4g") << " TFLOP/s, " << format_number(result.gbps(), "%.4g")
              << " GB/s (" << format_number(result.flops, "%.4g") << " flop, " << format_number(result.bytes, "%.4g")
              << " bytes moved at least)\n";
  }

  std::cout << result.status << "\n" << std::flush;
  if (json_file.is_open()) {
    json_file << result_json(config, result);
    json_file.close();
    if (json_file.fail()) {
      print_error(progress, "--json " + config.json_path + ": writing the file failed");
      return kExitRuntime;
    }
  }
  return result.status == "FAIL" ? kExitFail : kExitPass;
}

}  // namespace bsgemm::tool
