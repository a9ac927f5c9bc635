// `bsgemm bench`: the public benchmark cases (bench/cases.json), each recipe and layout timed on one
// back end, printed as a table and optionally written as JSON records.
//
// Case format: {"cases": [...]}, each case with a "name" and either
//   "groups_mnkl": [[M, N, K, L], ...]             run as a pointer array, or
//   "n", "k" and the rows per group: "m_list": [M_0, ...], or "m_per_group": "uniform" with
//   "groups" and "tokens" (tokens / groups rows each)   run as a MoE form (contiguous or masked).
// "recipes": [...] names the recipes of a case; otherwise --recipes applies.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <limits>
#include <string>
#include <system_error>
#include <tuple>
#include <vector>

#include <unistd.h>

#include "bsgemm/bsgemm.hpp"
#include "src/testing/json.hpp"
#include "tools/bsgemm/commands.hpp"
#include "tools/bsgemm/execution.hpp"
#include "tools/bsgemm/options.hpp"

namespace bsgemm::tool {

namespace {

namespace json = testing::json;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

struct BenchCase {
  std::string name;
  bool moe = false;  // shared N and K, one B per group: contiguous or masked forms
  std::vector<testing::GroupShape> groups;
  std::vector<std::string> recipes;  // empty: --recipes
};

// bench/cases.json of the source tree: from the working directory (a clone's root), or from the
// executable's directory when the build directory sits in the clone (build/bsgemm).
std::string find_default_cases() {
  const std::filesystem::path relative = std::filesystem::path("bench") / "cases.json";
  std::vector<std::filesystem::path> candidates = {relative};
  std::error_code error;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", error);
  if (!error) {
    candidates.push_back(exe.parent_path().parent_path() / relative);
    candidates.push_back(exe.parent_path() / relative);
  }
  for (const std::filesystem::path& candidate : candidates)
    if (std::filesystem::is_regular_file(candidate, error)) return candidate.string();
  throw UsageError("no bench/cases.json in the working directory or beside the build directory; give --cases FILE");
}

std::int32_t case_integer(const json::Value& value, const std::string& where, std::int64_t min) {
  if (!value.is_number() || value.number != std::floor(value.number) || value.number < static_cast<double>(min) ||
      value.number > std::numeric_limits<std::int32_t>::max())
    throw UsageError(where + ": expected an integer >= " + std::to_string(min));
  return static_cast<std::int32_t>(value.number);
}

const json::Value& member(const json::Value& object, std::string_view key, const std::string& where) {
  const json::Value* value = object.find(key);
  if (value == nullptr) throw UsageError(where + ": missing \"" + std::string(key) + "\"");
  return *value;
}

BenchCase parse_case(const json::Value& value, const std::string& file, std::size_t index) {
  std::string where = file + ": case " + std::to_string(index);
  if (!value.is_object()) throw UsageError(where + ": expected an object");
  BenchCase result;
  const json::Value& name = member(value, "name", where);
  if (!name.is_string() || name.string.empty()) throw UsageError(where + ": \"name\" must be a non-empty string");
  result.name = name.string;
  where = file + ": case " + result.name;

  if (const json::Value* recipes = value.find("recipes")) {
    if (!recipes->is_array()) throw UsageError(where + ": \"recipes\" must be a list of recipe names");
    for (const json::Value& recipe : recipes->array) {
      if (!recipe.is_string()) throw UsageError(where + ": \"recipes\" must be a list of recipe names");
      parse_recipe_pair("recipes of " + result.name, recipe.string);
      result.recipes.push_back(recipe.string);
    }
  }

  if (const json::Value* groups = value.find("groups_mnkl")) {
    if (!groups->is_array() || groups->array.empty()) throw UsageError(where + ": \"groups_mnkl\" must be a non-empty list");
    for (std::size_t g = 0; g < groups->array.size(); ++g) {
      const json::Value& tuple = groups->array[g];
      const std::string at = where + ", groups_mnkl[" + std::to_string(g) + "]";
      if (!tuple.is_array() || (tuple.array.size() != 3 && tuple.array.size() != 4))
        throw UsageError(at + ": expected [M, N, K, L]");
      testing::GroupShape shape;
      shape.m = case_integer(tuple.array[0], at + " M", 0);
      shape.n = case_integer(tuple.array[1], at + " N", 1);
      shape.k = case_integer(tuple.array[2], at + " K", 1);
      shape.l = tuple.array.size() == 4 ? case_integer(tuple.array[3], at + " L", 1) : 1;
      result.groups.push_back(shape);
    }
    return result;
  }

  result.moe = true;
  const std::int32_t n = case_integer(member(value, "n", where), where + ", n", 1);
  const std::int32_t k = case_integer(member(value, "k", where), where + ", k", 1);
  std::vector<std::int32_t> rows;
  if (const json::Value* m_list = value.find("m_list")) {
    if (!m_list->is_array() || m_list->array.empty()) throw UsageError(where + ": \"m_list\" must be a non-empty list");
    for (std::size_t g = 0; g < m_list->array.size(); ++g)
      rows.push_back(case_integer(m_list->array[g], where + ", m_list[" + std::to_string(g) + "]", 0));
  } else {
    const json::Value* distribution = value.find("m_per_group");
    if (distribution != nullptr && !(distribution->is_string() && distribution->string == "uniform"))
      throw UsageError(where + ": only \"uniform\" cases may leave out \"m_list\"");
    const std::int32_t groups = case_integer(member(value, "groups", where), where + ", groups", 1);
    const std::int32_t tokens = case_integer(member(value, "tokens", where), where + ", tokens", 0);
    // tokens / groups rows each; a remainder goes one row at a time to the first groups.
    for (std::int32_t g = 0; g < groups; ++g) rows.push_back(tokens / groups + (g < tokens % groups ? 1 : 0));
  }
  for (std::int32_t m : rows) result.groups.push_back({m, n, k, 1});
  return result;
}

std::vector<BenchCase> load_cases(const std::string& path) {
  json::Value document;
  if (Status s = json::parse_file(path, &document); !s.ok()) throw UsageError("--cases " + path + ": " + s.message);
  const json::Value* cases = document.find("cases");
  if (cases == nullptr || !cases->is_array()) throw UsageError("--cases " + path + ": expected an object with a \"cases\" list");
  std::vector<BenchCase> result;
  for (std::size_t i = 0; i < cases->array.size(); ++i) result.push_back(parse_case(cases->array[i], path, i));
  return result;
}

// One row of the table and one JSON record.
struct BenchRecord {
  std::string case_name, recipe, layout;
  std::string descriptions;  // where the group descriptions lived: host or device
  Backend backend = Backend::cpu;
  std::string check = "-";  // PASS, FAIL, ERROR, or "-" when not checked
  std::string error;
  testing::Timing timing;
  double flops = 0, bytes = 0;
  double median_ms() const { return timing.iterations > 0 ? timing.median_us * 1e-3 : kNaN; }
  double tflops() const { return timing.median_us > 0 ? flops / (timing.median_us * 1e-6) / 1e12 : kNaN; }
  double gbps() const { return timing.median_us > 0 ? bytes / (timing.median_us * 1e-6) / 1e9 : kNaN; }
};

void print_row(std::size_t name_width, const std::string& name, const std::string& recipe, const std::string& layout,
               const std::string& ms, const std::string& tflops, const std::string& gbps, const std::string& check) {
  std::printf("%-*s  %-20s  %-10s  %11s  %9s  %9s  %s\n", static_cast<int>(name_width), name.c_str(), recipe.c_str(),
              layout.c_str(), ms.c_str(), tflops.c_str(), gbps.c_str(), check.c_str());
  std::fflush(stdout);
}

// The room for one case's drawn values: a quarter of the machine's memory (the largest case's weights, 1.6 billion
// values, take 6.3 GiB), none where it cannot be told.
std::int64_t draw_cache_bytes() {
  const long pages = sysconf(_SC_PHYS_PAGES), page_bytes = sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page_bytes > 0 ? std::int64_t{pages} * page_bytes / 4 : 0;
}

// Quantizes, (checks,) and times one case in one recipe and layout; the case's earlier recipes and layouts left
// their drawn values in `draws`.
BenchRecord run_case(const BenchConfig& config, const BenchCase& bench_case, const std::string& recipe, GroupLayout layout,
                     testing::DrawCache& draws, Progress& progress) {
  BenchRecord record;
  record.case_name = bench_case.name;
  record.recipe = recipe;
  record.layout = to_string(layout);
  record.descriptions = config.descriptions == MemoryLocation::host ? "host" : "device";
  record.backend = resolve_backend(config.run_options.backend);

  testing::WorkloadSpec spec;
  std::tie(spec.a_type, spec.b_type) = parse_recipe_pair("recipes", recipe);
  spec.a_type.scale_layout = spec.b_type.scale_layout = config.scale_layout;
  spec.d_type = DataType::bf16;  // what the peer libraries write
  spec.layout = layout;
  spec.groups = bench_case.groups;
  spec.seed = config.seed;
  spec.threads = config.run_options.cpu_threads;

  const std::string label = bench_case.name + " " + recipe + " " + record.layout;
  const auto fail = [&](const Status& s) {
    progress.abandon();
    std::fprintf(stderr, "bsgemm: %s: %s\n", label.c_str(), s.message.c_str());
    record.check = "ERROR";
    record.error = s.message;
    return record;
  };

  progress.begin(label + ": drawing and quantizing inputs");
  testing::HostWorkload workload;
  if (Status s = testing::HostWorkload::create(spec, &workload, &draws); !s.ok()) return fail(s);
  record.flops = workload.flops();
  record.bytes = workload.min_bytes();
  const int copies =
      config.cold_l2 ? cold_l2_copies(workload_bytes(workload), config.warmup_iterations + config.iterations) : 1;
  Executor executor;
  if (Status s = Executor::create(&workload, config.run_options, config.descriptions, copies, AutoBackend::keep_cuda,
                                 &executor);
      !s.ok())
    return fail(s);
  record.backend = executor.backend();
  progress.end();

  if (config.check) {
    progress.begin(label + ": running once");
    if (Status s = executor.run_once(); !s.ok()) return fail(s);
    progress.end();
    CheckOutcome outcome;
    // The CPU back end is checked against the fp64 reference, never against itself.
    const bool exact = record.backend == Backend::cpu || exact_reference_is_quick(spec);
    if (Status s = check_workload(workload, exact, std::nullopt, spec.threads, 0, progress, &outcome);
        !s.ok())
      return fail(s);
    record.check = outcome.report.pass ? "PASS" : "FAIL";
    if (!outcome.report.pass) std::fprintf(stderr, "bsgemm: %s: %s\n", label.c_str(), outcome.report.summary().c_str());
  }

  progress.begin(label + ": timing");
  if (Status s = executor.time(config.warmup_iterations, config.iterations, config.cold_l2, &progress, &record.timing);
      !s.ok())
    return fail(s);
  progress.end();
  return record;
}

std::string records_json(const std::vector<BenchRecord>& records) {
  std::string text = "[";
  for (std::size_t i = 0; i < records.size(); ++i) {
    const BenchRecord& r = records[i];
    JsonObject object;
    object.string("case", r.case_name)
        .string("recipe", r.recipe)
        .string("layout", r.layout)
        .string("descriptions", r.descriptions)
        .string("backend", to_string(r.backend))
        .number("median_ms", r.median_ms())
        .number("min_ms", r.timing.iterations > 0 ? r.timing.min_us * 1e-3 : kNaN)
        .number("max_ms", r.timing.iterations > 0 ? r.timing.max_us * 1e-3 : kNaN)
        .number("iterations", r.timing.iterations)
        .number("tflops", r.tflops())
        .number("gbps", r.gbps())
        .number("flops", r.flops)
        .number("bytes", r.bytes)
        .raw("check", r.check == "-" ? "null" : json::quote(r.check));
    if (!r.error.empty()) object.string("error", r.error);
    text += (i ? ",\n  " : "\n  ") + object.render(2);
  }
  return text + (records.empty() ? "]\n" : "\n]\n");
}

}  // namespace

int bench_command(std::span<const std::string_view> args) {
  const BenchConfig config = parse_bench_command(args);
  if (config.help) {
    std::cout << bench_help();
    return kExitPass;
  }
  const std::string path = config.cases_path.empty() ? find_default_cases() : config.cases_path;
  std::vector<BenchCase> cases = load_cases(path);
  std::erase_if(cases, [&](const BenchCase& c) { return c.name.find(config.cases_filter) == std::string::npos; });
  if (cases.empty()) throw UsageError("no case of " + path + " matches --cases-filter '" + config.cases_filter + "'");

  const Backend backend = resolve_backend(config.run_options.backend);
  std::size_t name_width = 4;
  for (const BenchCase& c : cases) name_width = std::max(name_width, c.name.size());
  std::printf("bsgemm bench: %s, %s back end, %d iteration(s) after %d warm-up, %s L2, bf16 output\n", path.c_str(),
              to_string(backend), config.iterations, config.warmup_iterations,
              backend == Backend::cuda && config.cold_l2 ? "cold" : "warm");
  print_row(name_width, "case", "recipe", "layout", "median ms", "TFLOP/s", "GB/s", "check");

  Progress progress;
  std::vector<BenchRecord> records;
  for (const BenchCase& bench_case : cases) {
    const std::vector<std::string>& recipes = bench_case.recipes.empty() ? config.recipes : bench_case.recipes;
    const std::vector<GroupLayout> layouts =
        bench_case.moe ? config.layouts : std::vector<GroupLayout>{GroupLayout::pointer_array};
    // Every recipe and layout of a case quantizes the same values (testing::DrawCache): drawn once, dropped after it.
    testing::DrawCache draws(draw_cache_bytes());
    for (const std::string& recipe : recipes) {
      for (GroupLayout layout : layouts) {
        const BenchRecord r = run_case(config, bench_case, recipe, layout, draws, progress);
        print_row(name_width, r.case_name, r.recipe, r.layout, format_number(r.median_ms(), "%.4f"), format_number(r.tflops(), "%.2f"),
                  format_number(r.gbps(), "%.1f"), r.check);
        records.push_back(r);
      }
    }
  }

  if (!config.json_path.empty() && !write_text_file(config.json_path, records_json(records))) {
    std::fprintf(stderr, "bsgemm: error: --json %s: cannot write the file\n", config.json_path.c_str());
    return kExitRuntime;
  }
  const bool all_good = std::none_of(records.begin(), records.end(),
                                     [](const BenchRecord& r) { return r.check == "FAIL" || r.check == "ERROR"; });
  return all_good ? kExitPass : kExitFail;
}

}  // namespace bsgemm::tool
