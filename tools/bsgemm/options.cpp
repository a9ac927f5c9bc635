// Command-line parsing for the bsgemm tool (see options.hpp).
#include "tools/bsgemm/options.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <limits>
#include <sstream>

namespace bsgemm::tool {

namespace {

std::string lowercase(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string_view trim(std::string_view text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front()))) text.remove_prefix(1);
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.remove_suffix(1);
  return text;
}

[[noreturn]] void bad_value(std::string_view option, std::string_view text, std::string_view expected) {
  throw UsageError("--" + std::string(option) + " '" + std::string(text) + "': expected " + std::string(expected));
}

// A name looked up case-insensitively, with '_' and '-' treated alike.
template <typename T>
struct NamedValue {
  std::string_view name;
  T value;
};

template <typename T, std::size_t N>
std::optional<T> lookup(const NamedValue<T> (&table)[N], std::string_view text) {
  std::string key = lowercase(trim(text));
  std::replace(key.begin(), key.end(), '_', '-');
  for (const auto& entry : table)
    if (entry.name == key) return entry.value;
  return std::nullopt;
}

// Element, scale and output types by CuTe name (lowercased) and by bsgemm's short name.
constexpr NamedValue<DataType> kTypeNames[] = {
    {"float4e2m1fn", DataType::e2m1}, {"e2m1", DataType::e2m1},       {"fp4", DataType::e2m1},
    {"float8e4m3fn", DataType::e4m3}, {"e4m3", DataType::e4m3},
    {"float8e5m2", DataType::e5m2},   {"e5m2", DataType::e5m2},
    {"float8e8m0fnu", DataType::ue8m0}, {"ue8m0", DataType::ue8m0}, {"e8m0", DataType::ue8m0},
    {"ue4m3", DataType::ue4m3},
    {"float32", DataType::f32},       {"f32", DataType::f32},         {"fp32", DataType::f32},
    {"float16", DataType::f16},       {"f16", DataType::f16},         {"fp16", DataType::f16},
    {"half", DataType::f16},
    {"bfloat16", DataType::bf16},     {"bf16", DataType::bf16},
};

DataType parse_any_type(std::string_view option, std::string_view text, std::string_view expected) {
  if (auto t = lookup(kTypeNames, text)) return *t;
  bad_value(option, text, expected);
}

constexpr NamedValue<Recipe> kRecipeNames[] = {
    {"mxfp8", Recipe::mxfp8},
    {"mxfp4", Recipe::mxfp4},
    {"nvfp4", Recipe::nvfp4},
    {"fp8-block128", Recipe::fp8_block128},
};

constexpr NamedValue<ScaleLayout> kScaleLayoutNames[] = {
    {"linear", ScaleLayout::linear},
    {"blocked128x4", ScaleLayout::blocked_128x4},
    {"blocked-128x4", ScaleLayout::blocked_128x4},
    {"mn-major", ScaleLayout::mn_major},
};

constexpr NamedValue<GroupLayout> kGroupLayoutNames[] = {
    {"ptr-array", GroupLayout::pointer_array},
    {"pointer-array", GroupLayout::pointer_array},
    {"contiguous", GroupLayout::contiguous},
    {"masked", GroupLayout::masked},
};

constexpr NamedValue<Backend> kBackendNames[] = {
    {"auto", Backend::automatic},
    {"cpu", Backend::cpu},
    {"cuda", Backend::cuda},
};

const OptionSpec* find_spec(std::span<const OptionSpec> specs, std::string_view name) {
  for (const OptionSpec& spec : specs)
    if (spec.name == name) return &spec;
  return nullptr;
}

// ---- recipes from element type, scale type and block size ------------------------------------------

// The combinations the tool accepts, in the order used to complete a partial description
// (--ab-dtype Float8E4M3FN alone means mxfp8, the reference system's format).
struct RecipeRule {
  Recipe recipe;
  std::vector<DataType> elements;
  std::vector<DataType> scales;
};

const std::vector<RecipeRule>& recipe_rules() {
  static const std::vector<RecipeRule> rules = {
      {Recipe::nvfp4, {DataType::e2m1}, {DataType::ue4m3}},
      {Recipe::mxfp8, {DataType::e4m3, DataType::e5m2}, {DataType::ue8m0}},
      {Recipe::mxfp4, {DataType::e2m1}, {DataType::ue8m0}},
      {Recipe::fp8_block128, {DataType::e4m3}, {DataType::f32, DataType::ue8m0}},
  };
  return rules;
}

constexpr std::string_view kSupportedCombinations =
    "supported: e2m1+ue4m3/16 (nvfp4), e2m1+ue8m0/32 (mxfp4), e4m3|e5m2+ue8m0/32 (mxfp8), "
    "e4m3+f32|ue8m0/128 (fp8-block128)";

const RecipeRule& rule_of(Recipe recipe) {
  for (const RecipeRule& rule : recipe_rules())
    if (rule.recipe == recipe) return rule;
  return recipe_rules().front();
}

bool contains(const std::vector<DataType>& types, DataType t) { return std::find(types.begin(), types.end(), t) != types.end(); }

std::string join_types(const std::vector<DataType>& types) {
  std::string out;
  for (std::size_t i = 0; i < types.size(); ++i) out += (i ? " or " : "") + std::string(to_string(types[i]));
  return out;
}

// What the command line says about one operand.
struct OperandRequest {
  std::optional<Recipe> recipe;
  std::optional<DataType> element, scale;
  std::optional<int> block;
  bool empty() const { return !recipe && !element && !scale && !block; }
};

bool fits(const RecipeRule& rule, const OperandRequest& request) {
  return (!request.element || contains(rule.elements, *request.element)) &&
         (!request.scale || contains(rule.scales, *request.scale)) &&
         (!request.block || *request.block == block_k(rule.recipe));
}

// The operand type a request describes; nullopt when the request says nothing about it.
std::optional<OperandType> resolve_operand(const OperandRequest& request, std::string_view operand) {
  if (request.empty()) return std::nullopt;
  const std::string who(operand);
  const RecipeRule* rule = nullptr;
  if (request.recipe) {
    rule = &rule_of(*request.recipe);
    const std::string name = to_string(rule->recipe);
    if (request.element && !contains(rule->elements, *request.element))
      throw UsageError(who + ": " + name + " takes " + join_types(rule->elements) + " values, not " +
                       to_string(*request.element) + " (" + std::string(kSupportedCombinations) + ")");
    if (request.scale && !contains(rule->scales, *request.scale))
      throw UsageError(who + ": " + name + " takes " + join_types(rule->scales) + " scales, not " +
                       to_string(*request.scale) + " (" + std::string(kSupportedCombinations) + ")");
    if (request.block && *request.block != block_k(rule->recipe))
      throw UsageError(who + ": " + name + " has one scale per " + std::to_string(block_k(rule->recipe)) +
                       " of K, not " + std::to_string(*request.block) + " (--sf-vec-size)");
  } else {
    for (const RecipeRule& candidate : recipe_rules()) {
      if (fits(candidate, request)) {
        rule = &candidate;
        break;
      }
    }
    if (rule == nullptr)
      throw UsageError(who + ": no recipe takes " + (request.element ? to_string(*request.element) : "any") +
                       " values with " + (request.scale ? to_string(*request.scale) : "any") + " scales per " +
                       (request.block ? std::to_string(*request.block) : std::string("any block")) + " of K (" +
                       std::string(kSupportedCombinations) + ")");
  }
  OperandType type = make_operand_type(rule->recipe);
  if (request.element) type.element = *request.element;
  if (request.scale) type.scale = *request.scale;
  return type;
}

// The reference system's example (its README's command line): four ragged groups.
std::vector<testing::GroupShape> default_groups() {
  return {{8192, 1280, 32, 1}, {32, 384, 1536, 1}, {640, 1280, 32, 1}, {640, 160, 32, 1}};
}

// ---- the option tables ---------------------------------------------------------------------------

constexpr OptionSpec kRunOptions[] = {
    {"recipe", "NAME", "recipe of A and B: nvfp4 (default), mxfp4, mxfp8, fp8-block128"},
    {"a-recipe", "NAME", "recipe of A alone (mixed recipes, e.g. --a-recipe mxfp8 --b-recipe mxfp4)"},
    {"b-recipe", "NAME", "recipe of B alone"},
    {"ab-dtype", "TYPE", "element type of A and B (Float4E2M1FN, Float8E4M3FN, Float8E5M2 or e2m1, e4m3, e5m2)"},
    {"sf-dtype", "TYPE", "scale type (Float8E8M0FNU, Float8E4M3FN = ue4m3, Float32 or ue8m0, ue4m3, f32)"},
    {"sf-vec-size", "N", "elements of K per scale: 16, 32 or 128; with --ab-dtype/--sf-dtype picks the recipe"},
    {"a-dtype", "TYPE", "element type of A alone (e.g. e5m2 with mxfp8)"},
    {"b-dtype", "TYPE", "element type of B alone"},
    {"c-dtype", "TYPE", "output type of D (and C): Float16 (default), BFloat16, Float32 or f16, bf16, f32"},
    {"a-major", "m|k", "contiguous dimension of A (default k; FP4 operands must be k-major)"},
    {"b-major", "n|k", "contiguous dimension of B (default k)"},
    {"c-major", "m|n", "contiguous dimension of C and D (default n)"},
    {"problem-sizes-mnkl", "LIST", "groups as \"(M,N,K,L),(M,N,K,L),...\" (default: the reference system's example)"},
    {"num-groups", "G", "number of groups; must match --problem-sizes-mnkl when both are given"},
    {"layout", "FORM", "group description: ptr-array (default), contiguous or masked (these need shared N, K and L = 1)"},
    {"scale-layout", "LAYOUT", "scale layout of A and B: linear (default), blocked128x4, mn-major"},
    {"sfa-layout", "LAYOUT", "scale layout of A alone"},
    {"sfb-layout", "LAYOUT", "scale layout of B alone"},
    {"mx-scale-rounding", "floor|ceil", "how mxfp8/mxfp4 quantizers round the block scale (default floor, the OCP rule)"},
    {"alpha", "X", "alpha of every group (default 1; nvfp4 global scales are folded in)"},
    {"beta", "X", "beta of every group (default 0; nonzero draws C and reads it)"},
    {"padded-strides", "", "use leading dimensions and batch strides larger than needed"},
    {"tolerance", "X", "bound on check_output's normalised error (default: the output type's bound)"},
    {"ref", "MODE", "expected values: exact (fp64 reference), fast (CPU back end, fp32 output) or auto (default: exact when\n                                  small); runs on the cpu back end always use the fp64 reference"},
    {"skip-ref-check", "", "do not check the result"},
    {"list-failures", "N", "print the first N elements above the bound (by group, batch, row, column; default 0)"},
    {"warmup-iterations", "N", "untimed runs before timing (default 0)"},
    {"iterations", "N", "timed runs; the median is reported (default 1; 0 skips timing)"},
    {"use-cold-l2", "", "cuda: rotate through copies of the inputs so that every timed run starts with a cold L2"},
    {"backend", "NAME", "auto (default: cuda when an sm_90 GPU is usable, else cpu), cpu or cuda"},
    {"descriptions", "WHERE", "cuda: group descriptions in host (default) or device memory"},
    {"kernel-path", "PATH", "cuda: fp8 (FP8 wgmma + fp32 promotion), bf16 (FP4 decoded to bf16) or staged (A and B staged as bf16 in the workspace; with tile 16,256, 32,256 or 32,384 the tokens alone); default auto"},
    {"mma-tiler-mn", "M,N", "cuda: output tile per CTA (default: the planner's choice)"},
    {"cluster-shape-mn", "X,Y", "cuda: thread-block cluster shape (default 1,1)"},
    {"threads", "N", "CPU threads for quantizing, the CPU back end and checking (default 0: all)"},
    {"seed", "N", "random seed of the inputs (default 2025)"},
    {"json", "FILE", "also write the configuration and results as one JSON object"},
    {"help", "", "show this help"},
};

constexpr OptionSpec kBenchOptions[] = {
    {"cases", "FILE", "benchmark cases (default: bench/cases.json)"},
    {"cases-filter", "TEXT", "only the cases whose name contains TEXT"},
    {"recipes", "LIST", "recipes of cases that name none (default fp8-block128,mxfp8; A:B for mixed, e.g. mxfp8:mxfp4)"},
    {"layouts", "LIST", "forms of the MoE cases: contiguous (default), masked, ptr-array"},
    {"scale-layout", "LAYOUT", "scale layout of A and B: linear (default), blocked128x4, mn-major"},
    {"backend", "NAME", "auto (default), cpu or cuda"},
    {"warmup-iterations", "N", "untimed runs per case (default 3)"},
    {"iterations", "N", "timed runs per case; the median is reported (default 20)"},
    {"warm-l2", "", "cuda: reuse one copy of the inputs (default: rotate copies so that L2 is cold)"},
    {"check", "", "check every case (expected values: exact when small, else the CPU back end)"},
    {"kernel-path", "PATH", "cuda: fp8, bf16 or staged (default auto)"},
    {"mma-tiler-mn", "M,N", "cuda: output tile per CTA"},
    {"cluster-shape-mn", "X,Y", "cuda: thread-block cluster shape"},
    {"descriptions", "WHERE", "cuda: group descriptions in host (default) or device memory"},
    {"threads", "N", "CPU threads (default 0: all)"},
    {"seed", "N", "random seed of the inputs (default 2025)"},
    {"json", "FILE", "also write one JSON record per case and recipe"},
    {"help", "", "show this help"},
};

MemoryLocation parse_descriptions(const std::string& text) {
  const std::string where = lowercase(trim(text));
  if (where == "host") return MemoryLocation::host;
  if (where != "device") bad_value("descriptions", text, "host or device");
  return MemoryLocation::device;
}

int parse_count(const ParsedOptions& options, std::string_view name, int fallback, int min) {
  const std::string* text = options.find(name);
  return text ? static_cast<int>(parse_integer(name, *text, min, std::numeric_limits<int>::max())) : fallback;
}

void parse_tile_options(const ParsedOptions& options, RunOptions* run_options) {
  if (const std::string* text = options.find("mma-tiler-mn")) {
    const auto [m, n] = parse_pair("mma-tiler-mn", *text);
    run_options->tile_m = m;
    run_options->tile_n = n;
  }
  if (const std::string* text = options.find("cluster-shape-mn")) {
    const auto [x, y] = parse_pair("cluster-shape-mn", *text);
    run_options->cluster_m = x;
    run_options->cluster_n = y;
  }
  if (const std::string* text = options.find("backend")) run_options->backend = parse_backend("backend", *text);
  if (const std::string* text = options.find("kernel-path")) run_options->path = parse_kernel_path("kernel-path", *text);
  run_options->cpu_threads = parse_count(options, "threads", 0, 0);
}

}  // namespace

// ---- the option reader -------------------------------------------------------------------------------

const std::string* ParsedOptions::find(std::string_view name) const {
  const auto it = values_.find(name);
  return it == values_.end() ? nullptr : &it->second;
}

ParsedOptions parse_options(std::span<const std::string_view> args, std::span<const OptionSpec> specs) {
  ParsedOptions parsed;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string_view arg = args[i];
    if (arg == "-h") {
      parsed.set("help", "");
      continue;
    }
    if (arg.size() < 3 || arg.substr(0, 2) != "--") throw UsageError("unexpected argument '" + std::string(arg) + "'");
    std::string_view body = arg.substr(2);
    std::optional<std::string_view> inline_value;
    if (const auto eq = body.find('='); eq != std::string_view::npos) {
      inline_value = body.substr(eq + 1);
      body = body.substr(0, eq);
    }
    std::string name(body);
    std::replace(name.begin(), name.end(), '_', '-');
    const OptionSpec* spec = find_spec(specs, name);
    if (spec == nullptr) throw UsageError("unknown option '--" + std::string(body) + "' (see --help)");
    if (spec->argument.empty()) {
      if (inline_value) throw UsageError("--" + name + " takes no value");
      parsed.set(name, "");
    } else if (inline_value) {
      parsed.set(name, std::string(*inline_value));
    } else {
      // A following "--option" is a forgotten value, not a value (negative numbers start with one dash).
      if (i + 1 >= args.size() || args[i + 1].substr(0, 2) == "--")
        throw UsageError("--" + name + " needs a value (" + std::string(spec->argument) + ")");
      parsed.set(name, std::string(args[++i]));
    }
  }
  return parsed;
}

std::string format_help(std::string_view usage, std::span<const OptionSpec> specs) {
  std::size_t width = 0;
  for (const OptionSpec& spec : specs) width = std::max(width, spec.name.size() + spec.argument.size() + 3);
  std::ostringstream out;
  out << usage << "\n\noptions (--name value, --name=value; --name_with_underscores is accepted too):\n";
  for (const OptionSpec& spec : specs) {
    std::string left("--");
    left += spec.name;
    if (!spec.argument.empty()) {
      left += ' ';
      left += spec.argument;
    }
    out << "  " << left << std::string(width + 2 - left.size(), ' ') << spec.help << "\n";
  }
  return out.str();
}

// ---- value parsers -------------------------------------------------------------------------------

std::int64_t parse_integer(std::string_view option, std::string_view text, std::int64_t min, std::int64_t max) {
  const std::string_view t = trim(text);
  std::int64_t value = 0;
  const auto [end, error] = std::from_chars(t.data(), t.data() + t.size(), value);
  if (t.empty() || error != std::errc() || end != t.data() + t.size()) bad_value(option, text, "an integer");
  if (value < min || value > max)
    throw UsageError("--" + std::string(option) + " " + std::string(t) + ": must be in [" + std::to_string(min) + ", " +
                     std::to_string(max) + "]");
  return value;
}

double parse_real(std::string_view option, std::string_view text) {
  const std::string_view t = trim(text);
  double value = 0;
  const auto [end, error] = std::from_chars(t.data(), t.data() + t.size(), value);
  if (t.empty() || error != std::errc() || end != t.data() + t.size() || !std::isfinite(value))
    bad_value(option, text, "a finite number");
  return value;
}

std::pair<int, int> parse_pair(std::string_view option, std::string_view text) {
  std::string t(trim(text));
  if (t.size() >= 2 && t.front() == '(' && t.back() == ')') t = t.substr(1, t.size() - 2);
  std::replace(t.begin(), t.end(), 'x', ',');
  const std::vector<std::string> parts = split_list(t);
  if (parts.size() != 2 || std::count(t.begin(), t.end(), ',') != 1) bad_value(option, text, "two integers \"X,Y\"");
  const int max = std::numeric_limits<int>::max();
  return {static_cast<int>(parse_integer(option, parts[0], 1, max)), static_cast<int>(parse_integer(option, parts[1], 1, max))};
}

std::vector<testing::GroupShape> parse_problem_sizes(std::string_view option, std::string_view text) {
  constexpr std::string_view expected = "tuples \"(M,N,K,L),(M,N,K,L),...\"";
  std::vector<testing::GroupShape> groups;
  std::string_view rest = trim(text);
  while (!rest.empty()) {
    if (rest.front() != '(') bad_value(option, text, expected);
    const auto close = rest.find(')');
    if (close == std::string_view::npos) bad_value(option, text, expected);
    const std::string_view tuple = rest.substr(1, close - 1);
    rest = trim(rest.substr(close + 1));
    if (!rest.empty()) {
      if (rest.front() != ',') bad_value(option, text, expected);
      rest = trim(rest.substr(1));
      if (rest.empty()) bad_value(option, text, expected);
    }
    std::vector<std::string_view> fields;
    std::size_t start = 0;
    for (std::size_t i = 0; i <= tuple.size(); ++i) {
      if (i == tuple.size() || tuple[i] == ',') {
        fields.push_back(tuple.substr(start, i - start));
        start = i + 1;
      }
    }
    if (fields.size() != 3 && fields.size() != 4) bad_value(option, text, expected);
    const int max = std::numeric_limits<std::int32_t>::max();
    const std::string group_option = std::string(option) + " group " + std::to_string(groups.size());
    testing::GroupShape shape;
    shape.m = static_cast<std::int32_t>(parse_integer(group_option + " M", fields[0], 0, max));
    shape.n = static_cast<std::int32_t>(parse_integer(group_option + " N", fields[1], 1, max));
    shape.k = static_cast<std::int32_t>(parse_integer(group_option + " K", fields[2], 1, max));
    shape.l = fields.size() == 4 ? static_cast<std::int32_t>(parse_integer(group_option + " L", fields[3], 1, max)) : 1;
    groups.push_back(shape);
  }
  if (groups.empty()) bad_value(option, text, expected);
  return groups;
}

std::vector<std::string> split_list(std::string_view text) {
  std::vector<std::string> items;
  std::size_t start = 0;
  for (std::size_t i = 0; i <= text.size(); ++i) {
    if (i == text.size() || text[i] == ',') {
      const std::string_view item = trim(text.substr(start, i - start));
      if (!item.empty()) items.emplace_back(item);
      start = i + 1;
    }
  }
  return items;
}

DataType parse_element_type(std::string_view option, std::string_view text) {
  const DataType t = parse_any_type(option, text, "an element type: Float4E2M1FN, Float8E4M3FN, Float8E5M2 (e2m1, e4m3, e5m2)");
  if (t != DataType::e2m1 && t != DataType::e4m3 && t != DataType::e5m2)
    throw UsageError("--" + std::string(option) + " " + std::string(text) + ": A and B hold e2m1, e4m3 or e5m2 values");
  return t;
}

DataType parse_scale_type(std::string_view option, std::string_view text) {
  DataType t = parse_any_type(option, text, "a scale type: Float8E8M0FNU, Float8E4M3FN, Float32 (ue8m0, ue4m3, f32)");
  if (t == DataType::e4m3) t = DataType::ue4m3;  // NVFP4's scale, written Float8E4M3FN by the reference system
  if (t != DataType::ue8m0 && t != DataType::ue4m3 && t != DataType::f32)
    throw UsageError("--" + std::string(option) + " " + std::string(text) + ": scales are ue8m0, ue4m3 or f32");
  return t;
}

DataType parse_output_type(std::string_view option, std::string_view text) {
  const DataType t = parse_any_type(option, text, "an output type: Float32, Float16, BFloat16 (f32, f16, bf16)");
  if (t != DataType::f32 && t != DataType::f16 && t != DataType::bf16)
    throw UsageError("--" + std::string(option) + " " + std::string(text) + ": bsgemm writes D as f32, f16 or bf16");
  return t;
}

Recipe parse_recipe(std::string_view option, std::string_view text) {
  if (auto r = lookup(kRecipeNames, text)) return *r;
  bad_value(option, text, "a recipe: mxfp8, mxfp4, nvfp4, fp8-block128");
}

ScaleLayout parse_scale_layout(std::string_view option, std::string_view text) {
  if (auto l = lookup(kScaleLayoutNames, text)) return *l;
  bad_value(option, text, "a scale layout: linear, blocked128x4, mn-major");
}

GroupLayout parse_group_layout(std::string_view option, std::string_view text) {
  if (auto l = lookup(kGroupLayoutNames, text)) return *l;
  bad_value(option, text, "a group layout: ptr-array, contiguous, masked");
}

Backend parse_backend(std::string_view option, std::string_view text) {
  if (auto b = lookup(kBackendNames, text)) return *b;
  bad_value(option, text, "a back end: auto, cpu, cuda");
}

KernelPath parse_kernel_path(std::string_view option, std::string_view text) {
  KernelPath path;
  if (parse(lowercase(trim(text)), &path)) return path;
  bad_value(option, text, "a kernel path: auto, fp8, bf16");
}

Major parse_major(std::string_view option, std::string_view text, Major first, Major second) {
  const std::string key = lowercase(trim(text));
  for (Major major : {first, second})
    if (key == to_string(major)) return major;
  bad_value(option, text, std::string(to_string(first)) + " or " + to_string(second));
}

std::pair<OperandType, OperandType> parse_recipe_pair(std::string_view option, std::string_view text) {
  const auto colon = text.find(':');
  if (colon == std::string_view::npos) {
    const OperandType type = make_operand_type(parse_recipe(option, text));
    return {type, type};
  }
  return {make_operand_type(parse_recipe(option, text.substr(0, colon))),
          make_operand_type(parse_recipe(option, text.substr(colon + 1)))};
}

std::string recipe_label(const OperandType& a, const OperandType& b) {
  if (a.recipe == b.recipe) return to_string(a.recipe);
  return std::string(to_string(a.recipe)) + " x " + to_string(b.recipe);
}

void check_moe_shapes(GroupLayout layout, const std::vector<testing::GroupShape>& groups) {
  if (layout == GroupLayout::pointer_array) return;
  const std::string form = to_string(layout);
  for (std::size_t g = 0; g < groups.size(); ++g) {
    const testing::GroupShape& s = groups[g];
    const std::string where = "--layout " + form + ": group " + std::to_string(g);
    if (s.n != groups[0].n)
      throw UsageError(where + " has N = " + std::to_string(s.n) + " but group 0 has N = " + std::to_string(groups[0].n) +
                       "; every group of this form shares N and K (use --layout ptr-array)");
    if (s.k != groups[0].k)
      throw UsageError(where + " has K = " + std::to_string(s.k) + " but group 0 has K = " + std::to_string(groups[0].k) +
                       "; every group of this form shares N and K (use --layout ptr-array)");
    if (s.l != 1) throw UsageError(where + " has L = " + std::to_string(s.l) + "; this form needs L = 1 (use --layout ptr-array)");
  }
}

// ---- bsgemm run -------------------------------------------------------------------------------------

std::string run_help() {
  return format_help(
      "usage: bsgemm run [options]\n\n"
      "Draws random inputs for a grouped block-scaled GEMM, quantizes them, runs it, checks every element of D\n"
      "against the reference and reports the error, PASS or FAIL, the median time, TFLOP/s and GB/s.\n"
      "With no options it runs the reference system's example: nvfp4, groups (8192,1280,32,1),(32,384,1536,1),\n"
      "(640,1280,32,1),(640,160,32,1), f16 output.\n"
      "Exit status: 0 PASS (or unchecked), 1 FAIL, 2 bad options or a problem bsgemm cannot run, 3 a runtime error.",
      kRunOptions);
}

RunConfig parse_run_command(std::span<const std::string_view> args) {
  const ParsedOptions options = parse_options(args, kRunOptions);
  RunConfig config;
  config.help = options.has("help");
  if (config.help) return config;

  testing::WorkloadSpec& spec = config.spec;
  const auto value = [&](std::string_view name) { return options.find(name); };

  // Operand types: explicit recipes first, then element/scale/block completed by the table above.
  OperandRequest a, b;
  if (const std::string* t = value("recipe")) a.recipe = b.recipe = parse_recipe("recipe", *t);
  if (const std::string* t = value("a-recipe")) a.recipe = parse_recipe("a-recipe", *t);
  if (const std::string* t = value("b-recipe")) b.recipe = parse_recipe("b-recipe", *t);
  if (const std::string* t = value("ab-dtype")) a.element = b.element = parse_element_type("ab-dtype", *t);
  if (const std::string* t = value("a-dtype")) a.element = parse_element_type("a-dtype", *t);
  if (const std::string* t = value("b-dtype")) b.element = parse_element_type("b-dtype", *t);
  if (const std::string* t = value("sf-dtype")) a.scale = b.scale = parse_scale_type("sf-dtype", *t);
  if (const std::string* t = value("sf-vec-size"))
    a.block = b.block = static_cast<int>(parse_integer("sf-vec-size", *t, 1, 1 << 20));
  std::optional<OperandType> a_type = resolve_operand(a, "A");
  std::optional<OperandType> b_type = resolve_operand(b, "B");
  // An operand the command line says nothing about follows the other one, and both default to nvfp4.
  if (!a_type && !b_type) a_type = b_type = make_operand_type(Recipe::nvfp4);
  if (!a_type) a_type = make_operand_type(b_type->recipe);
  if (!b_type) b_type = make_operand_type(a_type->recipe);
  spec.a_type = *a_type;
  spec.b_type = *b_type;
  if (const std::string* t = value("scale-layout"))
    spec.a_type.scale_layout = spec.b_type.scale_layout = parse_scale_layout("scale-layout", *t);
  if (const std::string* t = value("sfa-layout")) spec.a_type.scale_layout = parse_scale_layout("sfa-layout", *t);
  if (const std::string* t = value("sfb-layout")) spec.b_type.scale_layout = parse_scale_layout("sfb-layout", *t);
  if (const std::string* t = value("mx-scale-rounding")) {
    const std::string rounding = lowercase(trim(*t));
    if (rounding == "floor") spec.quantize.mx_scale_rounding = Ue8m0Rounding::floor;
    else if (rounding == "ceil") spec.quantize.mx_scale_rounding = Ue8m0Rounding::ceil;
    else bad_value("mx-scale-rounding", *t, "floor or ceil");
  }

  spec.d_type = DataType::f16;  // the reference system's default
  if (const std::string* t = value("c-dtype")) spec.d_type = parse_output_type("c-dtype", *t);
  if (const std::string* t = value("a-major")) spec.a_major = parse_major("a-major", *t, Major::m, Major::k);
  if (const std::string* t = value("b-major")) spec.b_major = parse_major("b-major", *t, Major::n, Major::k);
  if (const std::string* t = value("c-major")) spec.d_major = parse_major("c-major", *t, Major::m, Major::n);

  spec.groups = default_groups();
  const std::string* sizes = value("problem-sizes-mnkl");
  if (sizes) spec.groups = parse_problem_sizes("problem-sizes-mnkl", *sizes);
  if (const std::string* t = value("num-groups")) {
    const std::int64_t count = parse_integer("num-groups", *t, 1, std::numeric_limits<std::int32_t>::max());
    if (count != static_cast<std::int64_t>(spec.groups.size()))
      throw UsageError("--num-groups " + std::to_string(count) + " does not match the " + std::to_string(spec.groups.size()) +
                       " groups of --problem-sizes-mnkl" + (sizes ? "" : " (the default example)"));
  }
  if (const std::string* t = value("layout")) spec.layout = parse_group_layout("layout", *t);
  check_moe_shapes(spec.layout, spec.groups);

  if (const std::string* t = value("alpha")) spec.alpha = static_cast<float>(parse_real("alpha", *t));
  if (const std::string* t = value("beta")) spec.beta = static_cast<float>(parse_real("beta", *t));
  spec.padded_strides = options.has("padded-strides");
  spec.seed = 2025;  // the reference system's torch.manual_seed(2025)
  if (const std::string* t = value("seed"))
    spec.seed = static_cast<std::uint64_t>(parse_integer("seed", *t, 0, std::numeric_limits<std::int64_t>::max()));

  if (const std::string* t = value("tolerance")) {
    const double tolerance = parse_real("tolerance", *t);
    if (tolerance < 0) throw UsageError("--tolerance " + *t + ": must not be negative");
    config.tolerance = tolerance;
  }
  if (const std::string* t = value("ref")) {
    const std::string mode = lowercase(trim(*t));
    if (mode == "exact") config.reference = ReferenceMode::exact;
    else if (mode == "fast") config.reference = ReferenceMode::fast;
    else if (mode == "auto") config.reference = ReferenceMode::automatic;
    else bad_value("ref", *t, "exact, fast or auto");
  }
  config.skip_ref_check = options.has("skip-ref-check");
  config.list_failures = parse_count(options, "list-failures", 0, 0);
  config.warmup_iterations = parse_count(options, "warmup-iterations", 0, 0);
  config.iterations = parse_count(options, "iterations", 1, 0);
  config.use_cold_l2 = options.has("use-cold-l2");

  parse_tile_options(options, &config.run_options);
  spec.threads = config.run_options.cpu_threads;
  if (const std::string* t = value("descriptions")) config.descriptions = parse_descriptions(*t);
  if (const std::string* t = value("json")) {
    if (t->empty()) throw UsageError("--json needs a file name");
    config.json_path = *t;
  }
  return config;
}

// ---- bsgemm bench -----------------------------------------------------------------------------------

std::string bench_help() {
  return format_help(
      "usage: bsgemm bench [--cases FILE] [options]\n\n"
      "Runs the benchmark cases of FILE (the public format of bench/cases.json): MoE cases as contiguous (or\n"
      "masked) grouped GEMMs with shared N and K, groups_mnkl cases as pointer arrays; bf16 output. Prints one\n"
      "row per case, recipe and layout: median time, TFLOP/s, GB/s and, with --check, PASS or FAIL.\n"
      "A case's random values are drawn once and quantized for each of its recipes and layouts (kept in up to\n"
      "a quarter of the machine's memory while the case runs).\n"
      "Exit status: 0 every case ran (and passed), 1 a check failed or a case could not run, 2 bad options,\n"
      "3 a runtime error (such as the --json file not being writable).",
      kBenchOptions);
}

BenchConfig parse_bench_command(std::span<const std::string_view> args) {
  const ParsedOptions options = parse_options(args, kBenchOptions);
  BenchConfig config;
  config.help = options.has("help");
  if (config.help) return config;

  if (const std::string* t = options.find("cases")) config.cases_path = *t;
  if (const std::string* t = options.find("cases-filter")) config.cases_filter = *t;
  config.recipes = {"fp8-block128", "mxfp8"};
  if (const std::string* t = options.find("recipes")) {
    config.recipes = split_list(*t);
    if (config.recipes.empty()) bad_value("recipes", *t, "a comma-separated list of recipes");
    for (const std::string& recipe : config.recipes) parse_recipe_pair("recipes", recipe);
  }
  config.layouts = {GroupLayout::contiguous};
  if (const std::string* t = options.find("layouts")) {
    config.layouts.clear();
    for (const std::string& layout : split_list(*t)) config.layouts.push_back(parse_group_layout("layouts", layout));
    if (config.layouts.empty()) bad_value("layouts", *t, "a comma-separated list of layouts");
  }
  if (const std::string* t = options.find("scale-layout")) config.scale_layout = parse_scale_layout("scale-layout", *t);
  parse_tile_options(options, &config.run_options);
  if (const std::string* t = options.find("descriptions")) config.descriptions = parse_descriptions(*t);
  config.warmup_iterations = parse_count(options, "warmup-iterations", config.warmup_iterations, 0);
  config.iterations = parse_count(options, "iterations", config.iterations, 1);
  config.cold_l2 = !options.has("warm-l2");
  config.check = options.has("check");
  if (const std::string* t = options.find("seed"))
    config.seed = static_cast<std::uint64_t>(parse_integer("seed", *t, 0, std::numeric_limits<std::int64_t>::max()));
  if (const std::string* t = options.find("json")) {
    if (t->empty()) throw UsageError("--json needs a file name");
    config.json_path = *t;
  }
  return config;
}

}  // namespace bsgemm::tool
