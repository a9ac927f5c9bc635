// The spellings of every public enum, and Status::error.
//
// Each enum has one table of spellings. The first spelling of a value is its name (what
// to_string returns and what the tool prints); the others are accepted by parse() so that the
// spellings users already type elsewhere work: underscores for dashes, the reference system's CuTe
// type names, DeepSeek's name for its scale layout. Parsing is exact and case-sensitive, so a
// misspelled option fails loudly instead of silently meaning something else.
#include <cstddef>
#include <string>
#include <string_view>
#include <utility>

#include "bsgemm/formats.hpp"
#include "bsgemm/gemm.hpp"
#include "bsgemm/problem.hpp"
#include "bsgemm/recipe.hpp"
#include "bsgemm/status.hpp"

namespace bsgemm {
namespace {

template <typename Enum>
struct Spelling {
  const char* text;
  Enum value;
};

// What to_string gives for a value outside the enum (an integer cast to it).
constexpr const char* kUnknown = "unknown";

template <typename Enum, std::size_t N>
const char* name_of(const Spelling<Enum> (&table)[N], Enum value) {
  for (const Spelling<Enum>& s : table)
    if (s.value == value) return s.text;
  return kUnknown;
}

template <typename Enum, std::size_t N>
bool parse_with(const Spelling<Enum> (&table)[N], std::string_view text, Enum* out) {
  for (const Spelling<Enum>& s : table) {
    if (text == s.text) {
      *out = s.value;
      return true;
    }
  }
  return false;
}

constexpr Spelling<DataType> kDataTypes[] = {
    {"e4m3", DataType::e4m3},
    {"e5m2", DataType::e5m2},
    {"e2m1", DataType::e2m1},
    {"ue8m0", DataType::ue8m0},
    {"ue4m3", DataType::ue4m3},
    {"f32", DataType::f32},
    {"f16", DataType::f16},
    {"bf16", DataType::bf16},
    // The CuTe DSL names of the reference system's command line.
    {"Float8E4M3FN", DataType::e4m3},
    {"Float8E5M2", DataType::e5m2},
    {"Float4E2M1FN", DataType::e2m1},
    {"Float8E8M0FNU", DataType::ue8m0},
    {"Float32", DataType::f32},
    {"Float16", DataType::f16},
    {"BFloat16", DataType::bf16},
};

constexpr Spelling<Recipe> kRecipes[] = {
    {"mxfp8", Recipe::mxfp8},
    {"mxfp4", Recipe::mxfp4},
    {"nvfp4", Recipe::nvfp4},
    {"fp8-block128", Recipe::fp8_block128},
    {"fp8_block128", Recipe::fp8_block128},
};

constexpr Spelling<ScaleLayout> kScaleLayouts[] = {
    {"linear", ScaleLayout::linear},
    {"blocked128x4", ScaleLayout::blocked_128x4},
    {"blocked-128x4", ScaleLayout::blocked_128x4},
    {"blocked_128x4", ScaleLayout::blocked_128x4},
    {"mn-major", ScaleLayout::mn_major},
    {"mn_major", ScaleLayout::mn_major},
    {"deepseek", ScaleLayout::mn_major},
};

constexpr Spelling<Major> kMajors[] = {
    {"m", Major::m},
    {"n", Major::n},
    {"k", Major::k},
};

constexpr Spelling<GroupLayout> kGroupLayouts[] = {
    {"ptr-array", GroupLayout::pointer_array},
    {"pointer-array", GroupLayout::pointer_array},
    {"pointer_array", GroupLayout::pointer_array},
    {"contiguous", GroupLayout::contiguous},
    {"masked", GroupLayout::masked},
};

constexpr Spelling<Backend> kBackends[] = {
    {"auto", Backend::automatic},
    {"cpu", Backend::cpu},
    {"cuda", Backend::cuda},
};

constexpr Spelling<KernelPath> kKernelPaths[] = {
    {"auto", KernelPath::automatic},
    {"fp8", KernelPath::fp8},
    {"bf16", KernelPath::bf16},
    {"staged", KernelPath::staged},
};

constexpr Spelling<StatusCode> kStatusCodes[] = {
    {"success", StatusCode::success},
    {"invalid_argument", StatusCode::invalid_argument},
    {"not_supported", StatusCode::not_supported},
    {"cuda_error", StatusCode::cuda_error},
    {"device_error", StatusCode::device_error},
    {"internal_error", StatusCode::internal_error},
};

}  // namespace

const char* to_string(DataType t) { return name_of(kDataTypes, t); }
bool parse(std::string_view text, DataType* out) { return parse_with(kDataTypes, text, out); }

const char* to_string(Recipe r) { return name_of(kRecipes, r); }
bool parse(std::string_view text, Recipe* out) { return parse_with(kRecipes, text, out); }

const char* to_string(ScaleLayout l) { return name_of(kScaleLayouts, l); }
bool parse(std::string_view text, ScaleLayout* out) { return parse_with(kScaleLayouts, text, out); }

const char* to_string(Major m) { return name_of(kMajors, m); }
bool parse(std::string_view text, Major* out) { return parse_with(kMajors, text, out); }

const char* to_string(GroupLayout l) { return name_of(kGroupLayouts, l); }
bool parse(std::string_view text, GroupLayout* out) { return parse_with(kGroupLayouts, text, out); }

const char* to_string(Backend b) { return name_of(kBackends, b); }
bool parse(std::string_view text, Backend* out) { return parse_with(kBackends, text, out); }

const char* to_string(KernelPath p) { return name_of(kKernelPaths, p); }
bool parse(std::string_view text, KernelPath* out) { return parse_with(kKernelPaths, text, out); }

const char* to_string(StatusCode c) { return name_of(kStatusCodes, c); }

Status Status::error(StatusCode code, int group, std::string field, const std::string& explanation) {
  Status s;
  s.code = code;
  s.group = group;
  s.field = std::move(field);
  if (group >= 0) {
    s.message = "group " + std::to_string(group) + (s.field.empty() ? "" : ", " + s.field) + ": " + explanation;
  } else if (!s.field.empty()) {
    s.message = s.field + ": " + explanation;
  } else {
    s.message = explanation;
  }
  return s;
}

}  // namespace bsgemm
