// Validation and names: every invalid description is rejected before anything runs, with its
// status code, the group and the field it concerns and a message that says why; valid
// descriptions of every shape, major, recipe pair and layout pass.
//
// The arguments are built by hand over aligned host buffers, with layouts computed here from the
// definitions in problem.hpp and recipe.hpp (not with the library's own helpers), and checked the
// way a user would: through bsgemm::can_implement on the CPU back end. Every such call also runs
// core::validate directly and requires the same answer.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "bsgemm/bsgemm.hpp"
#include "src/core/validate.hpp"

namespace bsgemm {
namespace {

constexpr std::int64_t kTwoTo48 = std::int64_t{1} << 48;

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }
std::int64_t round_to(std::int64_t a, std::int64_t b) { return ceil_div(a, b) * b; }

// Block size along K of each recipe (design.md section 1).
std::int64_t block_of(Recipe r) {
  switch (r) {
    case Recipe::nvfp4: return 16;
    case Recipe::fp8_block128: return 128;
    default: return 32;
  }
}

// Elements of a data type in 16 bytes: the multiple every data stride must be.
std::int64_t per_16_bytes(DataType t) {
  switch (t) {
    case DataType::e2m1: return 32;
    case DataType::f32: return 4;
    case DataType::f16:
    case DataType::bf16: return 8;
    default: return 16;
  }
}

std::int64_t bytes_of(DataType t, std::int64_t elements) {
  switch (t) {
    case DataType::e2m1: return (elements + 1) / 2;
    case DataType::f32: return 4 * elements;
    case DataType::f16:
    case DataType::bf16: return 2 * elements;
    default: return elements;
  }
}

std::int64_t scale_bytes_of(DataType t, std::int64_t elements) { return t == DataType::f32 ? 4 * elements : elements; }

// Zeroed host memory at 64-byte aligned addresses, alive as long as the arena. Validation reads
// only the group tables, offsets and masked_m, but every tensor gets its real size all the same.
class Arena {
 public:
  void* allocate(std::int64_t bytes) {
    blocks_.emplace_back(static_cast<std::size_t>(ceil_div(std::max<std::int64_t>(bytes, 1), 64)));
    return blocks_.back().data();
  }

 private:
  struct alignas(64) Block {
    std::uint8_t bytes[64] = {};
  };
  std::deque<std::vector<Block>> blocks_;
};

// Leading dimension, batch stride and total elements of one strided tensor.
struct Strided {
  std::int64_t ld = 0, batch_stride = 0, elements = 0;
};

// A rows x cols matrix whose columns (col_contiguous) or rows are contiguous, with the leading
// dimension rounded up to 16 bytes (plus `padding` more 16-byte units) and `batches` batches
// packed back to back.
Strided plan_matrix(DataType t, bool col_contiguous, std::int64_t rows, std::int64_t cols, std::int64_t batches,
                    std::int64_t padding = 0) {
  const std::int64_t inner = col_contiguous ? cols : rows, outer = col_contiguous ? rows : cols;
  Strided s;
  s.ld = round_to(std::max<std::int64_t>(inner, 1), per_16_bytes(t)) + padding * per_16_bytes(t);
  s.batch_stride = outer * s.ld;
  s.elements = batches * s.batch_stride;
  return s;
}

// The scale matrix of an operand with `rows` rows (M for A, N for B) and K columns of elements:
// one row per row (per 128 rows for fp8-block128's B) and one column per block of K.
Strided plan_scales(const OperandType& type, bool is_b, std::int64_t rows, std::int64_t k, std::int64_t batches) {
  const std::int64_t scale_rows = (is_b && type.recipe == Recipe::fp8_block128) ? ceil_div(rows, 128) : rows;
  const std::int64_t scale_cols = ceil_div(k, block_of(type.recipe));
  Strided s;
  switch (type.scale_layout) {
    case ScaleLayout::linear:
      s.ld = scale_cols;
      s.batch_stride = scale_rows * scale_cols;
      break;
    case ScaleLayout::mn_major:
      s.ld = round_to(std::max<std::int64_t>(scale_rows, 1), 4);  // DeepSeek's "TMA-aligned" rows
      s.batch_stride = scale_cols * s.ld;
      break;
    case ScaleLayout::blocked_128x4:
      s.ld = 0;
      s.batch_stride = round_to(scale_rows, 128) * round_to(scale_cols, 4);
      break;
  }
  s.elements = batches * s.batch_stride;
  return s;
}

// The call-level part of the arguments.
struct Types {
  OperandType a_type = make_operand_type(Recipe::mxfp8);
  OperandType b_type = make_operand_type(Recipe::mxfp8);
  Major a_major = Major::k, b_major = Major::k, d_major = Major::n;
  DataType d_type = DataType::bf16;
  bool has_c = false;
};

GemmArguments base_args(const Types& t) {
  GemmArguments args;
  args.a_type = t.a_type;
  args.b_type = t.b_type;
  args.a_major = t.a_major;
  args.b_major = t.b_major;
  args.d_major = t.d_major;
  args.d_type = t.d_type;
  args.has_c = t.has_c;
  return args;
}

// A pointer-array description whose groups each own their tensors.
class PointerArray {
 public:
  explicit PointerArray(Types t = {}) : types(t) {}
  PointerArray(const PointerArray&) = delete;  // the groups point into this object's arena
  PointerArray& operator=(const PointerArray&) = delete;

  // Appends a valid group of m x n x k with l batches, every stride given explicitly.
  GroupProblem& add(int m, int n, int k, int l = 1) {
    GroupProblem g;
    g.m = m;
    g.n = n;
    g.k = k;
    g.l = l;
    const Strided a = plan_matrix(types.a_type.element, types.a_major == Major::k, m, k, l, ld_padding);
    const Strided b = plan_matrix(types.b_type.element, types.b_major == Major::k, n, k, l, ld_padding);
    const Strided d = plan_matrix(types.d_type, types.d_major == Major::n, m, n, l, ld_padding);
    const Strided sfa = plan_scales(types.a_type, false, m, k, l);
    const Strided sfb = plan_scales(types.b_type, true, n, k, l);
    g.a = arena_.allocate(bytes_of(types.a_type.element, a.elements));
    g.b = arena_.allocate(bytes_of(types.b_type.element, b.elements));
    g.d = arena_.allocate(bytes_of(types.d_type, d.elements));
    g.sfa = arena_.allocate(scale_bytes_of(types.a_type.scale, sfa.elements));
    g.sfb = arena_.allocate(scale_bytes_of(types.b_type.scale, sfb.elements));
    g.lda = a.ld;
    g.ldb = b.ld;
    g.ldd = d.ld;
    g.batch_stride_a = a.batch_stride;
    g.batch_stride_b = b.batch_stride;
    g.batch_stride_d = d.batch_stride;
    g.sfa_ld = sfa.ld;
    g.sfb_ld = sfb.ld;
    g.sfa_batch_stride = sfa.batch_stride;
    g.sfb_batch_stride = sfb.batch_stride;
    if (types.has_c) {
      g.c = arena_.allocate(bytes_of(types.d_type, d.elements));
      g.ldc = d.ld;
      g.batch_stride_c = d.batch_stride;
      g.beta = 0.5f;
    }
    groups.push_back(g);
    return groups.back();
  }

  GemmArguments args() const {
    GemmArguments args = base_args(types);
    args.layout = GroupLayout::pointer_array;
    args.num_groups = static_cast<std::int32_t>(groups.size());
    args.groups = groups.data();
    return args;
  }

  Types types;
  std::int64_t ld_padding = 0;  // 16-byte units added to the leading dimensions of A, B, C, D
  std::vector<GroupProblem> groups;

 private:
  Arena arena_;
};

// A contiguous or masked description: A, C, D of `rows` rows (per group when masked), one B per group.
class Moe {
 public:
  Moe(const Moe&) = delete;  // the description points into this object's arena and vectors
  Moe& operator=(const Moe&) = delete;
  Moe(Types t, GroupLayout layout, int num_groups, int n, int k, std::int64_t rows) : types(t), layout_(layout) {
    const bool masked = layout == GroupLayout::masked;
    const std::int64_t per_row_batches = masked ? num_groups : 1;
    moe.num_groups = num_groups;
    moe.n = n;
    moe.k = k;
    moe.rows = rows;
    const Strided a = plan_matrix(types.a_type.element, types.a_major == Major::k, rows, k, per_row_batches);
    const Strided b = plan_matrix(types.b_type.element, types.b_major == Major::k, n, k, num_groups);
    const Strided d = plan_matrix(types.d_type, types.d_major == Major::n, rows, n, per_row_batches);
    Strided sfa = plan_scales(types.a_type, false, rows, k, per_row_batches);
    if (!masked && types.a_type.scale_layout == ScaleLayout::blocked_128x4) {
      // Each group's SFA block starts on a 128-row boundary: up to 128 more rows per group.
      sfa.elements = plan_scales(types.a_type, false, rows + 128 * num_groups, k, 1).elements;
    }
    const Strided sfb = plan_scales(types.b_type, true, n, k, num_groups);
    moe.a = arena_.allocate(bytes_of(types.a_type.element, a.elements));
    moe.b = arena_.allocate(bytes_of(types.b_type.element, b.elements));
    moe.d = arena_.allocate(bytes_of(types.d_type, d.elements));
    moe.sfa = arena_.allocate(scale_bytes_of(types.a_type.scale, sfa.elements));
    moe.sfb = arena_.allocate(scale_bytes_of(types.b_type.scale, sfb.elements));
    moe.lda = a.ld;
    moe.ldb = b.ld;
    moe.ldd = d.ld;
    moe.batch_stride_a = masked ? a.batch_stride : 0;
    moe.batch_stride_b = b.batch_stride;
    moe.batch_stride_d = masked ? d.batch_stride : 0;
    moe.sfa_ld = sfa.ld;
    moe.sfb_ld = sfb.ld;
    moe.sfa_batch_stride = masked ? sfa.batch_stride : 0;
    moe.sfb_batch_stride = sfb.batch_stride;
    if (types.has_c) {
      moe.c = arena_.allocate(bytes_of(types.d_type, d.elements));
      moe.ldc = d.ld;
      moe.batch_stride_c = masked ? d.batch_stride : 0;
      moe.beta_value = 0.5f;
    }
  }

  // PyTorch's `offs`: G cumulative end rows, int32.
  void set_ends(std::vector<std::int32_t> ends) {
    ends32_ = std::move(ends);
    moe.offsets = ends32_.data();
    moe.offsets_type = IndexType::i32;
    moe.offsets_start_with_zero = false;
  }

  // G + 1 prefix sums that start at 0, int64.
  void set_prefix_sums(std::vector<std::int64_t> sums) {
    sums64_ = std::move(sums);
    moe.offsets = sums64_.data();
    moe.offsets_type = IndexType::i64;
    moe.offsets_start_with_zero = true;
  }

  void set_masked_m(std::vector<std::int32_t> masked_m) {
    masked_m_ = std::move(masked_m);
    moe.masked_m = masked_m_.data();
  }

  GemmArguments args() const {
    GemmArguments args = base_args(types);
    args.layout = layout_;
    args.moe = moe;
    return args;
  }

  Types types;
  MoeGroups moe;

 private:
  GroupLayout layout_;
  Arena arena_;
  std::vector<std::int32_t> ends32_, masked_m_;
  std::vector<std::int64_t> sums64_;
};

// can_implement on the CPU back end, as a user calls it; core::validate must agree.
Status check(const GemmArguments& args) {
  const Status status = can_implement(args, RunOptions{Backend::cpu});
  const Status direct = core::validate(args);
  EXPECT_EQ(direct.code, status.code);
  EXPECT_EQ(direct.message, status.message);
  return status;
}

::testing::AssertionResult IsOk(const Status& s) {
  if (s.ok()) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << to_string(s.code) << ": " << s.message;
}

// The status has this code, group and field, and its message starts with "group G, FIELD: "
// (or "FIELD: " when no group is concerned) followed by an explanation.
::testing::AssertionResult IsError(const Status& s, StatusCode code, int group, const std::string& field) {
  if (s.code != code)
    return ::testing::AssertionFailure() << "code " << to_string(s.code) << ", expected " << to_string(code) << ": "
                                         << s.message;
  if (s.group != group)
    return ::testing::AssertionFailure() << "group " << s.group << ", expected " << group << ": " << s.message;
  if (s.field != field)
    return ::testing::AssertionFailure() << "field '" << s.field << "', expected '" << field << "': " << s.message;
  const std::string prefix = group >= 0 ? "group " + std::to_string(group) + ", " + field + ": " : field + ": ";
  if (s.message.rfind(prefix, 0) != 0 || s.message.size() <= prefix.size() + 5)
    return ::testing::AssertionFailure() << "message does not start with '" << prefix << "' and explain: " << s.message;
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult IsInvalid(const Status& s, int group, const std::string& field) {
  return IsError(s, StatusCode::invalid_argument, group, field);
}

Types types_of(Recipe a, Recipe b) {
  Types t;
  t.a_type = make_operand_type(a);
  t.b_type = make_operand_type(b);
  return t;
}

// ---- names -----------------------------------------------------------------------------------------

template <typename Enum>
void expect_round_trip(std::initializer_list<Enum> values) {
  std::set<std::string> names;
  for (Enum v : values) {
    const std::string name = to_string(v);
    EXPECT_TRUE(names.insert(name).second) << "duplicate name " << name;
    Enum parsed{};
    ASSERT_TRUE(parse(name, &parsed)) << name;
    EXPECT_EQ(parsed, v) << name;
  }
}

TEST(Names, CanonicalSpellings) {
  EXPECT_STREQ(to_string(DataType::e4m3), "e4m3");
  EXPECT_STREQ(to_string(DataType::e5m2), "e5m2");
  EXPECT_STREQ(to_string(DataType::e2m1), "e2m1");
  EXPECT_STREQ(to_string(DataType::ue8m0), "ue8m0");
  EXPECT_STREQ(to_string(DataType::ue4m3), "ue4m3");
  EXPECT_STREQ(to_string(DataType::f32), "f32");
  EXPECT_STREQ(to_string(DataType::f16), "f16");
  EXPECT_STREQ(to_string(DataType::bf16), "bf16");
  EXPECT_STREQ(to_string(Recipe::mxfp8), "mxfp8");
  EXPECT_STREQ(to_string(Recipe::mxfp4), "mxfp4");
  EXPECT_STREQ(to_string(Recipe::nvfp4), "nvfp4");
  EXPECT_STREQ(to_string(Recipe::fp8_block128), "fp8-block128");
  EXPECT_STREQ(to_string(ScaleLayout::linear), "linear");
  EXPECT_STREQ(to_string(ScaleLayout::blocked_128x4), "blocked128x4");
  EXPECT_STREQ(to_string(ScaleLayout::mn_major), "mn-major");
  EXPECT_STREQ(to_string(Major::m), "m");
  EXPECT_STREQ(to_string(Major::n), "n");
  EXPECT_STREQ(to_string(Major::k), "k");
  EXPECT_STREQ(to_string(GroupLayout::pointer_array), "ptr-array");
  EXPECT_STREQ(to_string(GroupLayout::contiguous), "contiguous");
  EXPECT_STREQ(to_string(GroupLayout::masked), "masked");
  EXPECT_STREQ(to_string(Backend::automatic), "auto");
  EXPECT_STREQ(to_string(Backend::cpu), "cpu");
  EXPECT_STREQ(to_string(Backend::cuda), "cuda");
  EXPECT_STREQ(to_string(StatusCode::success), "success");
  EXPECT_STREQ(to_string(StatusCode::invalid_argument), "invalid_argument");
  EXPECT_STREQ(to_string(StatusCode::not_supported), "not_supported");
  EXPECT_STREQ(to_string(StatusCode::cuda_error), "cuda_error");
  EXPECT_STREQ(to_string(StatusCode::device_error), "device_error");
  EXPECT_STREQ(to_string(StatusCode::internal_error), "internal_error");
}

TEST(Names, EveryNameParsesBackToItsValue) {
  expect_round_trip({DataType::e4m3, DataType::e5m2, DataType::e2m1, DataType::ue8m0, DataType::ue4m3, DataType::f32,
                     DataType::f16, DataType::bf16});
  expect_round_trip({Recipe::mxfp8, Recipe::mxfp4, Recipe::nvfp4, Recipe::fp8_block128});
  expect_round_trip({ScaleLayout::linear, ScaleLayout::blocked_128x4, ScaleLayout::mn_major});
  expect_round_trip({Major::m, Major::n, Major::k});
  expect_round_trip({GroupLayout::pointer_array, GroupLayout::contiguous, GroupLayout::masked});
  expect_round_trip({Backend::automatic, Backend::cpu, Backend::cuda});
}

TEST(Names, AlternativeSpellings) {
  Recipe recipe{};
  ASSERT_TRUE(parse("fp8_block128", &recipe));
  EXPECT_EQ(recipe, Recipe::fp8_block128);

  const std::pair<const char*, GroupLayout> layouts[] = {{"pointer-array", GroupLayout::pointer_array},
                                                         {"pointer_array", GroupLayout::pointer_array}};
  for (const auto& [text, expected] : layouts) {
    GroupLayout parsed = GroupLayout::masked;
    ASSERT_TRUE(parse(text, &parsed)) << text;
    EXPECT_EQ(parsed, expected) << text;
  }

  const std::pair<const char*, ScaleLayout> scale_layouts[] = {{"blocked-128x4", ScaleLayout::blocked_128x4},
                                                               {"blocked_128x4", ScaleLayout::blocked_128x4},
                                                               {"mn_major", ScaleLayout::mn_major},
                                                               {"deepseek", ScaleLayout::mn_major}};
  for (const auto& [text, expected] : scale_layouts) {
    ScaleLayout parsed = ScaleLayout::linear;
    ASSERT_TRUE(parse(text, &parsed)) << text;
    EXPECT_EQ(parsed, expected) << text;
  }

  // The CuTe DSL type names of the reference system's command line.
  const std::pair<const char*, DataType> cute[] = {
      {"Float8E4M3FN", DataType::e4m3},   {"Float8E5M2", DataType::e5m2}, {"Float4E2M1FN", DataType::e2m1},
      {"Float8E8M0FNU", DataType::ue8m0}, {"Float32", DataType::f32},     {"Float16", DataType::f16},
      {"BFloat16", DataType::bf16},
  };
  for (const auto& [text, expected] : cute) {
    DataType parsed = DataType::ue4m3;
    ASSERT_TRUE(parse(text, &parsed)) << text;
    EXPECT_EQ(parsed, expected) << text;
  }
}

TEST(Names, RejectsOtherSpellingsAndLeavesTheOutputAlone) {
  for (const char* text : {"", "MXFP8", "mxfp6", "fp8block128", "fp8-block-128", " nvfp4", "nvfp4 "}) {
    Recipe parsed = Recipe::mxfp4;
    EXPECT_FALSE(parse(text, &parsed)) << "'" << text << "'";
    EXPECT_EQ(parsed, Recipe::mxfp4);
  }
  for (const char* text : {"float8e4m3fn", "FLOAT32", "fp32", "e4m3fn", "E4M3", "bfloat16"}) {
    DataType parsed = DataType::ue4m3;
    EXPECT_FALSE(parse(text, &parsed)) << text;
    EXPECT_EQ(parsed, DataType::ue4m3);
  }
  for (const char* text : {"blocked", "128x4", "Linear", "mnmajor"}) {
    ScaleLayout parsed = ScaleLayout::linear;
    EXPECT_FALSE(parse(text, &parsed)) << text;
    EXPECT_EQ(parsed, ScaleLayout::linear);
  }
  for (const char* text : {"M", "K", "mk", "row"}) {
    Major parsed = Major::n;
    EXPECT_FALSE(parse(text, &parsed)) << text;
    EXPECT_EQ(parsed, Major::n);
  }
  for (const char* text : {"ptr_array", "grouped", "Masked"}) {
    GroupLayout parsed = GroupLayout::contiguous;
    EXPECT_FALSE(parse(text, &parsed)) << text;
    EXPECT_EQ(parsed, GroupLayout::contiguous);
  }
  for (const char* text : {"automatic", "gpu", "CPU"}) {
    Backend parsed = Backend::cuda;
    EXPECT_FALSE(parse(text, &parsed)) << text;
    EXPECT_EQ(parsed, Backend::cuda);
  }
}

TEST(Names, ValuesOutsideTheEnumHaveAPrintableName) {
  EXPECT_STREQ(to_string(static_cast<Recipe>(9)), "unknown");
  EXPECT_STREQ(to_string(static_cast<DataType>(200)), "unknown");
  EXPECT_STREQ(to_string(static_cast<StatusCode>(77)), "unknown");
}

TEST(Names, StatusErrorPrefixesGroupAndField) {
  const Status s = Status::error(StatusCode::invalid_argument, 3, "lda", "100 is smaller than 128");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code, StatusCode::invalid_argument);
  EXPECT_EQ(s.group, 3);
  EXPECT_EQ(s.field, "lda");
  EXPECT_EQ(s.message, "group 3, lda: 100 is smaller than 128");

  const Status call_level = Status::error(StatusCode::not_supported, -1, "b_type.recipe", "no such pair");
  EXPECT_EQ(call_level.group, -1);
  EXPECT_EQ(call_level.message, "b_type.recipe: no such pair");

  const Status bare = Status::error(StatusCode::internal_error, -1, "", "something broke");
  EXPECT_EQ(bare.field, "");
  EXPECT_EQ(bare.message, "something broke");

  EXPECT_EQ(Status::error(StatusCode::device_error, 0, "", "x").message, "group 0: x");
  EXPECT_TRUE(Status::success().ok());
}

TEST(Names, EveryFieldHasItsOwnName) {
  std::set<std::string> names;
  for (int i = static_cast<int>(core::Field::m); i <= static_cast<int>(core::Field::masked_m); ++i) {
    const std::string name = core::field_name(static_cast<core::Field>(i));
    EXPECT_FALSE(name.empty()) << i;
    EXPECT_NE(name, "unknown field") << i;
    EXPECT_TRUE(names.insert(name).second) << "duplicate " << name;
  }
  EXPECT_STREQ(core::field_name(core::Field::none), "");
  EXPECT_STREQ(core::field_name(core::Field::batch_stride_c), "batch_stride_c");
  EXPECT_STREQ(core::field_name(core::Field::sfb_ld), "sfb_ld");
}

// ---- call-level rules: operand types, recipe pairs, majors, output type ------------------------------

TEST(ValidateTypes, ElementMustBeTheRecipes) {
  const std::pair<Recipe, DataType> wrong[] = {{Recipe::mxfp8, DataType::e2m1},
                                               {Recipe::mxfp4, DataType::e4m3},
                                               {Recipe::nvfp4, DataType::e5m2},
                                               {Recipe::fp8_block128, DataType::e5m2},
                                               {Recipe::mxfp8, DataType::bf16}};
  for (const auto& [recipe, element] : wrong) {
    PointerArray p(types_of(recipe, recipe));
    p.add(8, 32, 64);
    p.types.a_type.element = element;
    EXPECT_TRUE(IsInvalid(check(p.args()), -1, "a_type.element")) << to_string(recipe) << " " << to_string(element);
  }
  PointerArray p(types_of(Recipe::mxfp8, Recipe::mxfp8));
  p.add(8, 32, 64);
  p.types.a_type.element = DataType::e2m1;
  EXPECT_EQ(check(p.args()).message, "a_type.element: e2m1 is not an element type of mxfp8, which stores e4m3 or e5m2");

  p.types.a_type.element = DataType::e4m3;
  p.types.b_type.element = DataType::f16;
  EXPECT_TRUE(IsInvalid(check(p.args()), -1, "b_type.element"));
}

TEST(ValidateTypes, ScaleMustBeTheRecipes) {
  const std::pair<Recipe, DataType> wrong[] = {{Recipe::mxfp8, DataType::f32},
                                               {Recipe::mxfp4, DataType::ue4m3},
                                               {Recipe::nvfp4, DataType::ue8m0},
                                               {Recipe::fp8_block128, DataType::ue4m3},
                                               {Recipe::fp8_block128, DataType::bf16}};
  for (const auto& [recipe, scale] : wrong) {
    PointerArray p(types_of(recipe, recipe));
    p.add(8, 32, 64);
    p.types.b_type.scale = scale;
    EXPECT_TRUE(IsInvalid(check(p.args()), -1, "b_type.scale")) << to_string(recipe) << " " << to_string(scale);
  }
  PointerArray p(types_of(Recipe::nvfp4, Recipe::nvfp4));
  p.add(8, 32, 64);
  p.types.b_type.scale = DataType::ue8m0;
  EXPECT_EQ(check(p.args()).message, "b_type.scale: ue8m0 is not a scale type of nvfp4, which scales with ue4m3");
}

TEST(ValidateTypes, UnknownEnumValuesAreRejected) {
  PointerArray p;
  p.add(8, 32, 64);

  GemmArguments args = p.args();
  args.a_type.recipe = static_cast<Recipe>(9);
  const Status recipe = check(args);
  EXPECT_TRUE(IsInvalid(recipe, -1, "a_type.recipe"));
  EXPECT_EQ(recipe.message,
            "a_type.recipe: an unknown value (9) is not a recipe; expected mxfp8, mxfp4, nvfp4 or fp8-block128");

  args = p.args();
  args.b_type.element = static_cast<DataType>(200);
  EXPECT_TRUE(IsInvalid(check(args), -1, "b_type.element"));
  EXPECT_NE(check(args).message.find("unknown value (200)"), std::string::npos);

  args = p.args();
  args.a_type.scale = static_cast<DataType>(31);
  EXPECT_TRUE(IsInvalid(check(args), -1, "a_type.scale"));

  args = p.args();
  args.b_type.scale_layout = static_cast<ScaleLayout>(5);
  EXPECT_TRUE(IsInvalid(check(args), -1, "b_type.scale_layout"));

  args = p.args();
  args.a_major = static_cast<Major>(7);
  EXPECT_TRUE(IsInvalid(check(args), -1, "a_major"));

  args = p.args();
  args.d_type = static_cast<DataType>(99);
  EXPECT_TRUE(IsInvalid(check(args), -1, "d_type"));

  args = p.args();
  args.layout = static_cast<GroupLayout>(3);
  EXPECT_TRUE(IsInvalid(check(args), -1, "layout"));

  args = p.args();
  args.descriptions = static_cast<MemoryLocation>(2);
  EXPECT_TRUE(IsInvalid(check(args), -1, "descriptions"));

  Moe moe(Types{}, GroupLayout::contiguous, 2, 32, 64, 16);
  moe.set_ends({8, 16});
  moe.moe.offsets_type = static_cast<IndexType>(4);
  EXPECT_TRUE(IsInvalid(check(moe.args()), -1, "offsets_type"));
}

TEST(ValidateTypes, UnsupportedRecipePairs) {
  const std::pair<Recipe, Recipe> unsupported[] = {
      {Recipe::nvfp4, Recipe::mxfp8},        {Recipe::mxfp4, Recipe::fp8_block128},
      {Recipe::mxfp8, Recipe::fp8_block128}, {Recipe::fp8_block128, Recipe::mxfp8},
      {Recipe::mxfp4, Recipe::nvfp4},        {Recipe::nvfp4, Recipe::mxfp4},
  };
  for (const auto& [a, b] : unsupported) {
    PointerArray p(types_of(a, b));
    p.add(8, 32, 64);
    const Status s = check(p.args());
    EXPECT_TRUE(IsError(s, StatusCode::not_supported, -1, "b_type.recipe")) << to_string(a) << " x " << to_string(b);
    // The message says what was given and lists what is supported.
    EXPECT_NE(s.message.find(std::string("A is ") + to_string(a) + " and B is " + to_string(b)), std::string::npos)
        << s.message;
    EXPECT_NE(s.message.find("A mxfp8 or fp8-block128, B mxfp4 or nvfp4"), std::string::npos) << s.message;
  }
}

TEST(ValidateTypes, Fp4OperandsMustBeKMajor) {
  Types t = types_of(Recipe::nvfp4, Recipe::nvfp4);
  t.a_major = Major::m;
  PointerArray p(t);
  p.add(64, 32, 64);
  const Status s = check(p.args());
  EXPECT_TRUE(IsInvalid(s, -1, "a_major"));
  EXPECT_EQ(s.message, "a_major: A holds e2m1 (FP4), which packs two values per byte along K, so it must be k-major");

  Types w = types_of(Recipe::mxfp8, Recipe::mxfp4);
  w.b_major = Major::n;
  PointerArray q(w);
  q.add(16, 64, 64);
  EXPECT_TRUE(IsInvalid(check(q.args()), -1, "b_major"));
}

TEST(ValidateTypes, MajorMustBeADimensionOfTheMatrix) {
  const struct {
    Major a, b, d;
    const char* field;
  } bad[] = {{Major::n, Major::k, Major::n, "a_major"},
             {Major::k, Major::m, Major::n, "b_major"},
             {Major::k, Major::k, Major::k, "d_major"},
             {Major::m, Major::n, static_cast<Major>(3), "d_major"}};
  for (const auto& c : bad) {
    Types t;
    t.a_major = c.a;
    t.b_major = c.b;
    t.d_major = c.d;
    PointerArray p(t);
    p.add(16, 32, 64);
    EXPECT_TRUE(IsInvalid(check(p.args()), -1, c.field)) << c.field;
  }
  Types t;
  t.b_major = Major::m;
  PointerArray p(t);
  p.add(16, 32, 64);
  EXPECT_EQ(check(p.args()).message, "b_major: m is not a dimension of B, which is N x K: b_major is n or k");
}

TEST(ValidateTypes, OutputTypeIsF32F16OrBf16) {
  for (DataType d : {DataType::e4m3, DataType::e5m2, DataType::e2m1, DataType::ue8m0, DataType::ue4m3}) {
    Types t;
    t.d_type = d;
    PointerArray p(t);
    p.add(16, 32, 64);
    EXPECT_TRUE(IsInvalid(check(p.args()), -1, "d_type")) << to_string(d);
  }
  Types t;
  t.d_type = DataType::e4m3;
  PointerArray p(t);
  p.add(16, 32, 64);
  EXPECT_EQ(check(p.args()).message, "d_type: e4m3 is not an output type; D (and C) are f32, f16 or bf16");
}

TEST(ValidateTypes, ExpectedMMustNotBeNegative) {
  PointerArray p;
  p.add(16, 32, 64);
  GemmArguments args = p.args();
  args.expected_m = -5;
  EXPECT_TRUE(IsInvalid(check(args), -1, "expected_m"));
  args.expected_m = 64;
  EXPECT_TRUE(IsOk(check(args)));
}

// ---- pointer array: layout-level fields ----------------------------------------------------------------

TEST(ValidatePointerArray, NeedsAtLeastOneGroup) {
  PointerArray p;
  p.add(16, 32, 64);
  GemmArguments args = p.args();
  args.num_groups = 0;
  const Status zero = check(args);
  EXPECT_TRUE(IsInvalid(zero, -1, "num_groups"));
  EXPECT_EQ(zero.message, "num_groups: 0 is smaller than 1: a call needs at least one group");
  args.num_groups = -2;
  EXPECT_TRUE(IsInvalid(check(args), -1, "num_groups"));
}

TEST(ValidatePointerArray, GroupsMustNotBeNull) {
  PointerArray p;
  p.add(16, 32, 64);
  GemmArguments args = p.args();
  args.groups = nullptr;
  EXPECT_TRUE(IsInvalid(check(args), -1, "groups"));
}

// ---- pointer array: shapes ---------------------------------------------------------------------------------

TEST(ValidateShapes, NZero) {
  PointerArray p;
  p.add(8, 32, 64).n = 0;
  const Status s = check(p.args());
  EXPECT_TRUE(IsInvalid(s, 0, "n"));
  EXPECT_EQ(s.message,
            "group 0, n: 0 is smaller than 1: N must be at least 1 (a group with nothing to compute has M = 0)");
}

TEST(ValidateShapes, KZero) {
  PointerArray p;
  p.add(8, 32, 64);
  p.add(8, 32, 64).k = 0;
  const Status s = check(p.args());
  EXPECT_TRUE(IsInvalid(s, 1, "k"));
  EXPECT_EQ(s.message, "group 1, k: 0 is smaller than 1: K must be at least 1");
}

TEST(ValidateShapes, MNegative) {
  PointerArray p;
  p.add(8, 32, 64).m = -3;
  const Status s = check(p.args());
  EXPECT_TRUE(IsInvalid(s, 0, "m"));
  EXPECT_EQ(s.message, "group 0, m: -3 is negative (M = 0 describes an empty group)");
}

TEST(ValidateShapes, LZero) {
  PointerArray p;
  p.add(8, 32, 64).l = 0;
  EXPECT_TRUE(IsInvalid(check(p.args()), 0, "l"));
  p.groups[0].l = -1;
  EXPECT_TRUE(IsInvalid(check(p.args()), 0, "l"));
}

// ---- pointer array: pointers -------------------------------------------------------------------------------

TEST(ValidatePointers, NullOperands) {
  const struct {
    const char* field;
    void (*clear)(GroupProblem&);
  } cases[] = {
      {"a", [](GroupProblem& g) { g.a = nullptr; }},     {"b", [](GroupProblem& g) { g.b = nullptr; }},
      {"d", [](GroupProblem& g) { g.d = nullptr; }},     {"sfa", [](GroupProblem& g) { g.sfa = nullptr; }},
      {"sfb", [](GroupProblem& g) { g.sfb = nullptr; }},
  };
  for (const auto& c : cases) {
    PointerArray p;
    p.add(8, 32, 64);
    p.add(8, 32, 64);
    c.clear(p.groups[1]);
    EXPECT_TRUE(IsInvalid(check(p.args()), 1, c.field)) << c.field;
  }
  PointerArray p;
  p.add(8, 32, 64).a = nullptr;
  EXPECT_EQ(check(p.args()).message, "group 0, a: null pointer; A is read by every group with M > 0");
}

TEST(ValidatePointers, NullCWhenHasC) {
  Types t;
  t.has_c = true;
  PointerArray p(t);
  p.add(8, 32, 64).c = nullptr;
  const Status s = check(p.args());
  EXPECT_TRUE(IsInvalid(s, 0, "c"));
  EXPECT_EQ(s.message, "group 0, c: null pointer, but has_c is set, so C is read");

  // Without has_c, C is never read and may be null.
  p.types.has_c = false;
  EXPECT_TRUE(IsOk(check(p.args())));
}

TEST(ValidatePointers, MisalignedDataPointers) {
  PointerArray p;
  GroupProblem& g = p.add(8, 32, 64);
  g.a = static_cast<const std::uint8_t*>(g.a) + 8;
  const Status s = check(p.args());
  EXPECT_TRUE(IsInvalid(s, 0, "a"));
  EXPECT_EQ(s.message, "group 0, a: not 16-byte aligned (address % 16 = 8); TMA needs 16-byte aligned tensors");

  PointerArray q;
  GroupProblem& h = q.add(8, 32, 64);
  h.d = static_cast<std::uint8_t*>(h.d) + 2;  // two bytes: one bf16 element, still misaligned
  EXPECT_TRUE(IsInvalid(check(q.args()), 0, "d"));
}

TEST(ValidatePointers, ScalePointersNeedTheirNaturalAlignment) {
  PointerArray p(types_of(Recipe::fp8_block128, Recipe::fp8_block128));
  GroupProblem& g = p.add(8, 256, 256);
  g.sfb = static_cast<const std::uint8_t*>(g.sfb) + 2;
  const Status s = check(p.args());
  EXPECT_TRUE(IsInvalid(s, 0, "sfb"));
  EXPECT_EQ(s.message, "group 0, sfb: not 4-byte aligned (address % 4 = 2); f32 scales need 4-byte alignment");

  // One-byte scales may start at any address.
  PointerArray q;
  GroupProblem& h = q.add(8, 32, 64);
  h.sfa = static_cast<const std::uint8_t*>(h.sfa) + 1;
  h.sfb = static_cast<const std::uint8_t*>(h.sfb) + 3;
  EXPECT_TRUE(IsOk(check(q.args())));
}

// ---- pointer array: leading dimensions ------------------------------------------------------------------

TEST(ValidateStrides, LdaSmallerThanK) {
  PointerArray p;
  p.add(8, 32, 64).lda = 48;
  const Status s = check(p.args());
  EXPECT_TRUE(IsInvalid(s, 0, "lda"));
  EXPECT_EQ(s.message,
            "group 0, lda: 48 is smaller than 64, the extent of the contiguous dimension (K, since A is k-major)");
}

TEST(ValidateStrides, LdaSmallerThanMWhenMMajor) {
  Types t;
  t.a_major = Major::m;
  PointerArray p(t);
  p.add(40, 32, 64).lda = 32;
  const Status s = check(p.args());
  EXPECT_TRUE(IsInvalid(s, 0, "lda"));
  EXPECT_EQ(s.message,
            "group 0, lda: 32 is smaller than 40, the extent of the contiguous dimension (M, since A is m-major)");
}

TEST(ValidateStrides, LdbSmallerThanNWhenNMajor) {
  Types t;
  t.b_major = Major::n;
  PointerArray p(t);
  p.add(8, 48, 64).ldb = 32;
  EXPECT_TRUE(IsInvalid(check(p.args()), 0, "ldb"));
}

TEST(ValidateStrides, LdaNotAMultipleOf16Bytes) {
  PointerArray p;
  p.add(8, 32, 64).lda = 72;
  const Status s = check(p.args());
  EXPECT_TRUE(IsInvalid(s, 0, "lda"));
  EXPECT_EQ(s.message,
            "group 0, lda: 72 elements is not a multiple of 16 bytes (16 elements of e4m3); TMA needs 16-byte aligned "
            "strides");
}

TEST(ValidateStrides, Fp4LdNotAMultipleOf32) {
  PointerArray p(types_of(Recipe::nvfp4, Recipe::nvfp4));
  p.add(8, 32, 64).ldb = 80;  // 40 bytes
  const Status s = check(p.args());
  EXPECT_TRUE(IsInvalid(s, 0, "ldb"));
  EXPECT_EQ(s.message,
            "group 0, ldb: 80 elements is not a multiple of 16 bytes (32 elements of e2m1); TMA needs 16-byte aligned "
            "strides");
}

TEST(ValidateStrides, ZeroLdMeansDense) {
  // K = 40 of FP4 is 20 bytes: the dense lda (0 means K) is not a multiple of 16 bytes.
  PointerArray p(types_of(Recipe::mxfp4, Recipe::mxfp4));
  p.add(8, 32, 40).lda = 0;
  const Status s = check(p.args());
  EXPECT_TRUE(IsInvalid(s, 0, "lda"));
  EXPECT_NE(s.message.find("40 elements is not a multiple of 16 bytes (32 elements of e2m1)"), std::string::npos)
      << s.message;

  // With K = 64 every dense default is aligned: all strides 0 is valid, with batches too.
  PointerArray q;
  GroupProblem& g = q.add(16, 32, 64, 3);
  g.lda = g.ldb = g.ldd = g.sfa_ld = g.sfb_ld = 0;
  g.batch_stride_a = g.batch_stride_b = g.batch_stride_d = g.sfa_batch_stride = g.sfb_batch_stride = 0;
  EXPECT_TRUE(IsOk(check(q.args())));
}

TEST(ValidateStrides, LddSmallerThanNWhenNMajor) {
  PointerArray p;
  p.add(8, 32, 64).ldd = 24;
  const Status s = check(p.args());
  EXPECT_TRUE(IsInvalid(s, 0, "ldd"));
  EXPECT_EQ(s.message,
            "group 0, ldd: 24 is smaller than 32, the extent of the contiguous dimension (N, since D is n-major)");
}

TEST(ValidateStrides, LddSmallerThanMWhenMMajor) {
  Types t;
  t.d_major = Major::m;
  PointerArray p(t);
  p.add(24, 32, 64).ldd = 16;
  const Status s = check(p.args());
  EXPECT_TRUE(IsInvalid(s, 0, "ldd"));
  EXPECT_EQ(s.message,
            "group 0, ldd: 16 is smaller than 24, the extent of the contiguous dimension (M, since D is m-major)");
}

TEST(ValidateStrides, LdcIsCheckedWhenHasC) {
  Types t;
  t.has_c = true;
  PointerArray p(t);
  p.add(8, 32, 64).ldc = 20;  // >= N would be needed; 20 is also not a multiple of 8 bf16
  EXPECT_TRUE(IsInvalid(check(p.args()), 0, "ldc"));
}

TEST(ValidateStrides, NegativeStride) {
  PointerArray p;
  p.add(8, 32, 64).ldb = -64;
  const Status s = check(p.args());
  EXPECT_TRUE(IsInvalid(s, 0, "ldb"));
  EXPECT_EQ(s.message, "group 0, ldb: -64 is negative; strides count forward (0 means dense)");
}

TEST(ValidateStrides, BatchStrideTooSmallWithSeveralBatches) {
  PointerArray p;
  p.add(8, 32, 64, 2).batch_stride_a = 496;  // one batch of A spans 7 * 64 + 64 = 512 elements
  const Status s = check(p.args());
  EXPECT_TRUE(IsInvalid(s, 0, "batch_stride_a"));
  EXPECT_EQ(
      s.message,
      "group 0, batch_stride_a: 496 is smaller than 512, the elements one batch of A spans, so consecutive batches "
      "would overlap");

  PointerArray q;
  q.add(8, 32, 64, 2).batch_stride_d = 31 * 32;  // D spans 7 * 32 + 32 = 256; 992 is enough
  q.add(8, 32, 64, 2).batch_stride_d = 248;
  EXPECT_TRUE(IsInvalid(check(q.args()), 1, "batch_stride_d"));

  // The same too-small stride is never used with a single batch.
  PointerArray r;
  r.add(8, 32, 64, 1).batch_stride_a = 496;
  EXPECT_TRUE(IsOk(check(r.args())));
}

TEST(ValidateStrides, ScaleBatchStrideTooSmall) {
  PointerArray p;
  p.add(8, 32, 64, 2).sfb_batch_stride = 60;  // SFB is 32 rows x 2 columns: 64 elements
  const Status s = check(p.args());
  EXPECT_TRUE(IsInvalid(s, 0, "sfb_batch_stride"));
  EXPECT_NE(s.message.find("60 is smaller than 64, the elements one batch of SFB spans"), std::string::npos)
      << s.message;
}

TEST(ValidateStrides, LinearScaleLdTooSmall) {
  PointerArray p;
  p.add(8, 32, 64).sfa_ld = 1;  // K = 64 has two blocks of 32
  const Status s = check(p.args());
  EXPECT_TRUE(IsInvalid(s, 0, "sfa_ld"));
  EXPECT_EQ(s.message, "group 0, sfa_ld: 1 is smaller than 2, the scale columns, ceil(K / 32), in the linear layout");

  // nvfp4 blocks are 16 long: K = 64 needs 4 columns.
  PointerArray q(types_of(Recipe::nvfp4, Recipe::nvfp4));
  q.add(8, 32, 64).sfb_ld = 3;
  const Status t = check(q.args());
  EXPECT_TRUE(IsInvalid(t, 0, "sfb_ld"));
  EXPECT_EQ(t.message, "group 0, sfb_ld: 3 is smaller than 4, the scale columns, ceil(K / 16), in the linear layout");
}

TEST(ValidateStrides, MnMajorScaleLdTooSmall) {
  Types t = types_of(Recipe::fp8_block128, Recipe::fp8_block128);
  t.a_type.scale_layout = ScaleLayout::mn_major;
  t.b_type.scale_layout = ScaleLayout::mn_major;
  PointerArray p(t);
  p.add(8, 300, 256).sfa_ld = 4;
  const Status s = check(p.args());
  EXPECT_TRUE(IsInvalid(s, 0, "sfa_ld"));
  EXPECT_EQ(s.message, "group 0, sfa_ld: 4 is smaller than 8, the scale rows, M, in the mn-major layout");

  // B of fp8-block128 has one scale row per 128 rows of N: 300 rows need 3.
  PointerArray q(t);
  q.add(8, 300, 256).sfb_ld = 2;
  const Status u = check(q.args());
  EXPECT_TRUE(IsInvalid(u, 0, "sfb_ld"));
  EXPECT_EQ(u.message, "group 0, sfb_ld: 2 is smaller than 3, the scale rows, ceil(N / 128), in the mn-major layout");
  q.groups[0].sfb_ld = 3;
  EXPECT_TRUE(IsOk(check(q.args())));
}

// ---- pointer array: sizes beyond 2^48 elements --------------------------------------------------------------

TEST(ValidateSizes, LdLargerThanAnyAcceptedStride) {
  PointerArray p;
  p.add(8, 32, 64).lda = std::int64_t{1} << 50;
  const Status s = check(p.args());
  EXPECT_TRUE(IsInvalid(s, 0, "lda"));
  EXPECT_EQ(s.message,
            "group 0, lda: 1125899906842624 is larger than 2^48 = 281474976710656, the largest stride bsgemm accepts");

  // Far beyond: the extent arithmetic itself must not overflow on the way to this answer.
  p.groups[0].lda = std::int64_t{1} << 62;
  p.groups[0].batch_stride_a = 0;
  EXPECT_TRUE(IsInvalid(check(p.args()), 0, "lda"));
}

TEST(ValidateSizes, MatrixSpanOverflow) {
  // 1024 rows of A, 2^40 apart: (1024 - 1) * 2^40 + 64 > 2^48.
  PointerArray p;
  p.add(1024, 32, 64).lda = std::int64_t{1} << 40;
  const Status s = check(p.args());
  EXPECT_TRUE(IsInvalid(s, 0, "lda"));
  const std::int64_t largest = (kTwoTo48 - 64) / 1023;
  EXPECT_EQ(s.message,
            "group 0, lda: 1099511627776 is too large: one A matrix would span more than 2^48 elements (the most "
            "this shape allows is " +
                std::to_string(largest) + ")");
  // The largest accepted lda that is a multiple of 16 elements passes.
  p.groups[0].lda = largest / 16 * 16;
  p.groups[0].batch_stride_a = 0;
  EXPECT_TRUE(IsOk(check(p.args())));
}

TEST(ValidateSizes, BatchSpanOverflow) {
  PointerArray p;
  p.add(8, 32, 64, 2).batch_stride_b = std::int64_t{1} << 60;
  const Status s = check(p.args());
  EXPECT_TRUE(IsInvalid(s, 0, "batch_stride_b"));
  // One batch of B spans 31 * 64 + 64 = 2048 elements; two batches fit when the stride is at most 2^48 - 2048.
  EXPECT_NE(s.message.find("the batches of B would span more than 2^48 elements (the most this shape allows is " +
                           std::to_string(kTwoTo48 - 2048) + ")"),
            std::string::npos)
      << s.message;
}

TEST(ValidateSizes, ScaleSpanOverflow) {
  PointerArray p;
  p.add(1024, 32, 64).sfa_ld = std::int64_t{1} << 40;
  const Status s = check(p.args());
  EXPECT_TRUE(IsInvalid(s, 0, "sfa_ld"));
  EXPECT_NE(s.message.find("(the most this shape allows is " + std::to_string((kTwoTo48 - 2) / 1023) + ")"),
            std::string::npos)
      << s.message;
}

// ---- pointer array: many groups ------------------------------------------------------------------------------

TEST(ValidatePointerArray, BadGroupInTheMiddleIsNamed) {
  PointerArray p(types_of(Recipe::fp8_block128, Recipe::fp8_block128));
  const int shapes[][3] = {{16, 128, 256}, {0, 128, 256}, {1, 256, 128},   {40, 384, 512}, {8, 128, 200},
                           {24, 256, 384}, {3, 128, 128}, {64, 512, 1024}, {5, 128, 256}};
  for (const auto& s : shapes) p.add(s[0], s[1], s[2]);
  ASSERT_TRUE(IsOk(check(p.args())));

  p.groups[5].sfb = static_cast<const std::uint8_t*>(p.groups[5].sfb) + 2;
  p.groups[7].n = 0;  // a later failure: the first one is reported
  const Status s = check(p.args());
  EXPECT_TRUE(IsInvalid(s, 5, "sfb"));
  EXPECT_EQ(s.message.rfind("group 5, sfb: ", 0), 0u) << s.message;

  p.groups[5].sfb = static_cast<const std::uint8_t*>(p.groups[5].sfb) - 2;
  EXPECT_TRUE(IsInvalid(check(p.args()), 7, "n"));
}

// ---- contiguous --------------------------------------------------------------------------------------------------

Moe contiguous(int groups = 4, std::int64_t rows = 64, Types t = {}) {
  return Moe(t, GroupLayout::contiguous, groups, 32, 64, rows);
}

TEST(ValidateContiguous, DecreasingOffsets) {
  Moe moe = contiguous();
  moe.set_ends({10, 30, 20, 40});
  const Status s = check(moe.args());
  EXPECT_TRUE(IsInvalid(s, 2, "offsets"));
  EXPECT_EQ(s.message, "group 2, offsets: group ends at row 20, before it begins at row 30");
}

TEST(ValidateContiguous, OffsetsBeyondRows) {
  Moe moe = contiguous();
  moe.set_ends({10, 20, 30, 70});
  const Status s = check(moe.args());
  EXPECT_TRUE(IsInvalid(s, 3, "offsets"));
  EXPECT_EQ(s.message, "group 3, offsets: group ends at row 70, beyond the 64 rows of A and D (rows)");

  Moe sums = contiguous();
  sums.set_prefix_sums({0, 10, 65, 65, 65});
  EXPECT_TRUE(IsInvalid(check(sums.args()), 1, "offsets"));
}

TEST(ValidateContiguous, NegativeFirstOffset) {
  Moe moe = contiguous();
  moe.set_prefix_sums({-4, 10, 20, 30, 40});
  const Status s = check(moe.args());
  EXPECT_TRUE(IsInvalid(s, 0, "offsets"));
  EXPECT_EQ(s.message, "group 0, offsets: group begins at row -4, and rows cannot be negative");

  // With end offsets, group 0 begins at row 0, so a negative first end makes it decrease.
  Moe ends = contiguous();
  ends.set_ends({-4, 10, 20, 30});
  const Status e = check(ends.args());
  EXPECT_TRUE(IsInvalid(e, 0, "offsets"));
  EXPECT_EQ(e.message, "group 0, offsets: group ends at row -4, before it begins at row 0");
}

TEST(ValidateContiguous, NullOffsets) {
  Moe moe = contiguous();
  const Status s = check(moe.args());
  EXPECT_TRUE(IsInvalid(s, -1, "offsets"));
  EXPECT_EQ(s.message, "offsets: null pointer; the contiguous layout needs the group offsets");
}

TEST(ValidateContiguous, SharedTensorsAreCheckedOnce) {
  Moe moe = contiguous();
  moe.set_ends({10, 20, 30, 40});
  moe.moe.ldb = 48;
  const Status s = check(moe.args());
  EXPECT_TRUE(IsInvalid(s, -1, "ldb"));
  EXPECT_EQ(s.message, "ldb: 48 is smaller than 64, the extent of the contiguous dimension (K, since B is k-major)");

  // B holds one N x K matrix per group: the groups must not overlap.
  Moe overlap = contiguous();
  overlap.set_ends({10, 20, 30, 40});
  overlap.moe.batch_stride_b = 31 * 64;
  const Status o = check(overlap.args());
  EXPECT_TRUE(IsInvalid(o, -1, "batch_stride_b"));
  EXPECT_NE(o.message.find("the elements one group of B spans, so consecutive groups would overlap"), std::string::npos)
      << o.message;

  Moe no_d = contiguous();
  no_d.set_ends({10, 20, 30, 40});
  no_d.moe.d = nullptr;
  EXPECT_TRUE(IsInvalid(check(no_d.args()), -1, "d"));

  Moe shapes = contiguous();
  shapes.set_ends({10, 20, 30, 40});
  shapes.moe.n = 0;
  EXPECT_TRUE(IsInvalid(check(shapes.args()), -1, "n"));
  shapes.moe.n = 32;
  shapes.moe.rows = -1;
  EXPECT_TRUE(IsInvalid(check(shapes.args()), -1, "rows"));
  shapes.moe.rows = 64;
  shapes.moe.num_groups = 0;
  EXPECT_TRUE(IsInvalid(check(shapes.args()), -1, "num_groups"));
}

// ---- masked ------------------------------------------------------------------------------------------------------

Moe masked(int groups = 4, std::int64_t max_m = 64, Types t = {}) {
  return Moe(t, GroupLayout::masked, groups, 32, 64, max_m);
}

TEST(ValidateMasked, MaskedMLargerThanMaxM) {
  Moe moe = masked();
  moe.set_masked_m({3, 70, 0, 1});
  const Status s = check(moe.args());
  EXPECT_TRUE(IsInvalid(s, 1, "masked_m"));
  EXPECT_EQ(s.message, "group 1, masked_m: 70 is larger than max_m = 64, the rows of each group's A and D (rows)");
}

TEST(ValidateMasked, NegativeMaskedM) {
  Moe moe = masked();
  moe.set_masked_m({3, 5, -1, 2});
  const Status s = check(moe.args());
  EXPECT_TRUE(IsInvalid(s, 2, "masked_m"));
  EXPECT_EQ(s.message, "group 2, masked_m: -1 is negative; a group's valid rows are 0 to max_m");
}

TEST(ValidateMasked, NullMaskedM) {
  Moe moe = masked();
  const Status s = check(moe.args());
  EXPECT_TRUE(IsInvalid(s, -1, "masked_m"));
  EXPECT_EQ(s.message, "masked_m: null pointer; the masked layout needs the valid rows of every group");
}

TEST(ValidateMasked, GroupsOfAMustNotOverlap) {
  Moe moe = masked();
  moe.set_masked_m({3, 5, 1, 2});
  moe.moe.batch_stride_a = 4000;  // one group's A is 64 x 64: 4096 elements
  const Status s = check(moe.args());
  EXPECT_TRUE(IsInvalid(s, -1, "batch_stride_a"));
  EXPECT_EQ(s.message,
            "batch_stride_a: 4000 is smaller than 4096, the elements one group of A spans, so consecutive groups would "
            "overlap");
}

// ---- valid descriptions -----------------------------------------------------------------------------------------

TEST(ValidateValid, EmptyGroupsWithNullPointers) {
  PointerArray p;
  p.add(8, 32, 64);
  GroupProblem& empty = p.add(0, 64, 128);
  empty.a = nullptr;
  empty.b = nullptr;
  empty.d = nullptr;
  empty.sfa = nullptr;
  empty.sfb = nullptr;
  empty.lda = -1;  // nothing of an empty group is read, its strides included
  p.add(16, 32, 64);
  EXPECT_TRUE(IsOk(check(p.args())));

  // Empty, but N must still be valid.
  p.groups[1].n = 0;
  EXPECT_TRUE(IsInvalid(check(p.args()), 1, "n"));
}

TEST(ValidateValid, OneRowGroups) {
  const std::pair<Recipe, Recipe> pairs[] = {{Recipe::mxfp8, Recipe::mxfp8},
                                             {Recipe::mxfp4, Recipe::mxfp4},
                                             {Recipe::nvfp4, Recipe::nvfp4},
                                             {Recipe::fp8_block128, Recipe::fp8_block128}};
  for (const auto& [a, b] : pairs) {
    PointerArray p(types_of(a, b));
    p.add(1, 32, 128);
    p.add(1, 1, 64);
    EXPECT_TRUE(IsOk(check(p.args()))) << to_string(a);
  }
}

TEST(ValidateValid, KNotAMultipleOfTheBlock) {
  const std::pair<Recipe, int> cases[] = {{Recipe::mxfp8, 40}, {Recipe::mxfp4, 16},         {Recipe::nvfp4, 40},
                                          {Recipe::nvfp4, 8},  {Recipe::fp8_block128, 200}, {Recipe::fp8_block128, 1}};
  for (const auto& [recipe, k] : cases) {
    PointerArray p(types_of(recipe, recipe));
    p.add(16, 32, k, 2);
    EXPECT_TRUE(IsOk(check(p.args()))) << to_string(recipe) << " K = " << k;
  }
}

TEST(ValidateValid, SeveralBatches) {
  Types t;
  t.has_c = true;
  PointerArray p(t);
  p.add(8, 32, 64, 3);
  p.add(17, 48, 96, 2);
  EXPECT_TRUE(IsOk(check(p.args())));

  // Leading dimensions larger than needed, and so batch strides with gaps, are fine.
  PointerArray padded(t);
  padded.ld_padding = 2;
  padded.add(8, 32, 64, 3);
  ASSERT_EQ(padded.groups[0].lda, 96);
  ASSERT_EQ(padded.groups[0].ldd, 48);
  EXPECT_TRUE(IsOk(check(padded.args())));
}

TEST(ValidateValid, EveryMajor) {
  for (Recipe recipe : {Recipe::mxfp8, Recipe::fp8_block128}) {
    for (Major a : {Major::m, Major::k}) {
      for (Major b : {Major::n, Major::k}) {
        for (Major d : {Major::m, Major::n}) {
          Types t = types_of(recipe, recipe);
          t.a_major = a;
          t.b_major = b;
          t.d_major = d;
          t.has_c = true;
          PointerArray p(t);
          p.add(24, 40, 136, 2);
          p.add(3, 128, 256);
          EXPECT_TRUE(IsOk(check(p.args())))
              << to_string(recipe) << " " << to_string(a) << to_string(b) << to_string(d);
        }
      }
    }
  }
}

TEST(ValidateValid, EveryOutputType) {
  for (DataType d : {DataType::f32, DataType::f16, DataType::bf16}) {
    Types t;
    t.d_type = d;
    t.d_major = Major::m;
    PointerArray p(t);
    p.add(20, 32, 64);
    EXPECT_TRUE(IsOk(check(p.args()))) << to_string(d);
  }
}

TEST(ValidateValid, Fp8ActivationsWithFp4Weights) {
  for (Recipe a : {Recipe::mxfp8, Recipe::fp8_block128}) {
    for (Recipe b : {Recipe::mxfp4, Recipe::nvfp4}) {
      for (ScaleLayout layout : {ScaleLayout::linear, ScaleLayout::blocked_128x4, ScaleLayout::mn_major}) {
        Types t = types_of(a, b);
        t.a_type.scale_layout = layout;
        t.b_type.scale_layout = layout;
        PointerArray p(t);
        p.add(16, 64, 256);
        p.add(200, 96, 192, 2);
        EXPECT_TRUE(IsOk(check(p.args()))) << to_string(a) << " x " << to_string(b) << " " << to_string(layout);
      }
    }
  }
}

TEST(ValidateValid, OtherElementAndScaleTypesOfARecipe) {
  Types e5m2;
  e5m2.a_type.element = DataType::e5m2;
  e5m2.b_type.element = DataType::e5m2;
  PointerArray p(e5m2);
  p.add(16, 32, 64);
  EXPECT_TRUE(IsOk(check(p.args())));

  Types ue8m0 = types_of(Recipe::fp8_block128, Recipe::fp8_block128);
  ue8m0.a_type.scale = DataType::ue8m0;
  ue8m0.b_type.scale = DataType::ue8m0;
  ue8m0.a_type.scale_layout = ScaleLayout::mn_major;
  PointerArray q(ue8m0);
  q.add(16, 256, 512);
  EXPECT_TRUE(IsOk(check(q.args())));
}

TEST(ValidateValid, ContiguousWithEmptyExperts) {
  Moe ends = contiguous(4, 40);
  ends.set_ends({0, 10, 10, 37});  // experts 0 and 2 get no tokens; rows 37..39 are spare
  EXPECT_TRUE(IsOk(check(ends.args())));

  Types t = types_of(Recipe::mxfp8, Recipe::nvfp4);
  t.a_type.scale_layout = ScaleLayout::blocked_128x4;
  t.b_type.scale_layout = ScaleLayout::blocked_128x4;
  t.has_c = true;
  Moe sums = contiguous(5, 300, t);
  sums.set_prefix_sums({0, 5, 5, 140, 300, 300});
  EXPECT_TRUE(IsOk(check(sums.args())));

  // No rows at all: nothing is read, so A and D may be null.
  Moe none = contiguous(3, 0);
  none.set_ends({0, 0, 0});
  none.moe.a = nullptr;
  none.moe.d = nullptr;
  EXPECT_TRUE(IsOk(check(none.args())));
}

TEST(ValidateValid, MaskedGroups) {
  Moe moe = masked(4, 64);
  moe.set_masked_m({0, 64, 1, 17});
  EXPECT_TRUE(IsOk(check(moe.args())));

  Types t = types_of(Recipe::fp8_block128, Recipe::mxfp4);
  t.a_type.scale_layout = ScaleLayout::mn_major;
  t.d_major = Major::m;
  Moe mixed(t, GroupLayout::masked, 3, 256, 384, 16);
  mixed.set_masked_m({16, 0, 9});
  EXPECT_TRUE(IsOk(check(mixed.args())));
}

// The CUDA back end's tuning options are refused on the CPU back end, naming the option.
TEST(ValidateValid, CudaOnlyOptionsAreRefusedOnTheCpuBackEnd) {
  PointerArray p;
  p.add(8, 32, 64);
  const GemmArguments args = p.args();
  RunOptions options{Backend::cpu};
  EXPECT_TRUE(IsOk(can_implement(args, options)));
  options.tile_m = 128;
  options.tile_n = 128;
  EXPECT_TRUE(IsError(can_implement(args, options), StatusCode::invalid_argument, -1, "tile"));
  options = RunOptions{Backend::cpu};
  options.cluster_n = 2;
  EXPECT_TRUE(IsError(can_implement(args, options), StatusCode::invalid_argument, -1, "cluster"));
  options = RunOptions{Backend::cpu};
  options.path = KernelPath::bf16;
  EXPECT_TRUE(IsError(can_implement(args, options), StatusCode::invalid_argument, -1, "path"));
}

// With device-resident descriptions the groups cannot be read on the host: only the call-level
// rules and the layout's own fields are checked here (the device checks the rest).
TEST(ValidateValid, DeviceResidentDescriptionsSkipPerGroupChecks) {
  PointerArray p;
  p.add(8, 32, 64);
  p.add(8, 32, 64).n = 0;  // invalid contents: not looked at
  p.groups[1].a = nullptr;
  GemmArguments args = p.args();
  args.descriptions = MemoryLocation::device;
  EXPECT_TRUE(IsOk(core::validate(args)));
  args.descriptions = MemoryLocation::host;
  EXPECT_TRUE(IsInvalid(core::validate(args), 1, "n"));

  // The CPU back end cannot read device memory at all.
  args.descriptions = MemoryLocation::device;
  EXPECT_TRUE(IsError(can_implement(args, RunOptions{Backend::cpu}), StatusCode::not_supported, -1, "descriptions"));

  // Pointers to the description arrays, and everything shared, are still checked.
  args.groups = nullptr;
  EXPECT_TRUE(IsInvalid(core::validate(args), -1, "groups"));
  args = p.args();
  args.descriptions = MemoryLocation::device;
  args.b_type = make_operand_type(Recipe::fp8_block128);
  EXPECT_TRUE(IsError(core::validate(args), StatusCode::not_supported, -1, "b_type.recipe"));

  Moe c = contiguous();
  c.set_ends({10, 5, 90, 40});  // decreasing and beyond rows: checked on the device
  GemmArguments moe_args = c.args();
  moe_args.descriptions = MemoryLocation::device;
  EXPECT_TRUE(IsOk(core::validate(moe_args)));
  moe_args.moe.offsets = nullptr;
  EXPECT_TRUE(IsInvalid(core::validate(moe_args), -1, "offsets"));
  moe_args = c.args();
  moe_args.descriptions = MemoryLocation::device;
  moe_args.moe.lda = 32;
  EXPECT_TRUE(IsInvalid(core::validate(moe_args), -1, "lda"));

  Moe m = masked();
  m.set_masked_m({100, -1, 3, 4});
  GemmArguments masked_args = m.args();
  masked_args.descriptions = MemoryLocation::device;
  EXPECT_TRUE(IsOk(core::validate(masked_args)));
  masked_args.moe.masked_m = nullptr;
  EXPECT_TRUE(IsInvalid(core::validate(masked_args), -1, "masked_m"));
}

}  // namespace
}  // namespace bsgemm
