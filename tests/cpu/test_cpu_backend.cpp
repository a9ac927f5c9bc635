// The CPU back end against the fp64 reference on random workloads, and check_output itself.
//
// Every case poisons D (all bits set: NaN) before the run, checks every element of every group
// with check_output at a tolerance of the output's rounding plus K * 2^-22 (fp32 accumulation
// stays under K * 2^-24), and checks that no byte of D outside the groups' elements was written
// (rows of a contiguous D outside every group, rows of a masked group at or past masked_m, the
// padding of padded strides). Each case draws its data from a seed derived from its name, so a
// failure reproduces by running that case alone.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <ostream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "bsgemm/bsgemm.hpp"
#include "src/core/resolved_group.hpp"
#include "src/cpu/host_groups.hpp"
#include "src/testing/workload.hpp"

namespace bsgemm {
namespace {

using testing::GroupShape;
using testing::HostWorkload;
using testing::WorkloadSpec;

// FNV-1a: a fixed, platform-independent seed per case name.
std::uint64_t seed_of(const std::string& name) {
  std::uint64_t h = 0xCBF29CE484222325ull;
  for (const char ch : name) h = (h ^ static_cast<unsigned char>(ch)) * 0x100000001B3ull;
  return h;
}

// Rounding of D's type (twice its unit roundoff) plus fp32 accumulation over the largest K.
double tight_tolerance(const WorkloadSpec& spec) {
  std::int64_t k = 0;
  for (const GroupShape& g : spec.groups) k = std::max<std::int64_t>(k, g.k);
  const double rounding = spec.d_type == DataType::bf16 ? 0x1p-8 : spec.d_type == DataType::f16 ? 0x1p-10 : 0.0;
  return rounding + static_cast<double>(k) * 0x1p-22;
}

// ---- cases --------------------------------------------------------------------------------------------

struct BackendCase {
  std::string name;
  WorkloadSpec spec;
  int threads = 0;
};

// What gtest prints for GetParam(): the case's name.
void PrintTo(const BackendCase& c, std::ostream* os) { *os << c.name; }

WorkloadSpec base_spec(Recipe a, Recipe b, std::vector<GroupShape> groups) {
  WorkloadSpec spec;
  spec.a_type = make_operand_type(a);
  spec.b_type = make_operand_type(b);
  spec.groups = std::move(groups);
  return spec;
}

// Ragged groups: an empty one, a one-row one, K not a multiple of any block.
std::vector<GroupShape> ragged() {
  return {{37, 50, 96, 1}, {0, 64, 64, 1}, {1, 33, 160, 1}, {70, 16, 48, 1}, {19, 130, 100, 1}};
}

std::vector<BackendCase> backend_cases() {
  std::vector<BackendCase> cases;
  auto add = [&](std::string name, WorkloadSpec spec, int threads = 0) {
    // Test names take letters, digits and underscores only ("mn-major" -> "mn_major").
    for (char& ch : name)
      if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
    spec.seed = seed_of(name);
    cases.push_back({std::move(name), std::move(spec), threads});
  };

  // Every recipe, and the FP8 x FP4 pairs.
  add("mxfp8_e4m3", base_spec(Recipe::mxfp8, Recipe::mxfp8, ragged()));
  {
    WorkloadSpec s = base_spec(Recipe::mxfp8, Recipe::mxfp8, ragged());
    s.a_type.element = s.b_type.element = DataType::e5m2;
    add("mxfp8_e5m2", s);
  }
  {
    WorkloadSpec s = base_spec(Recipe::mxfp8, Recipe::mxfp8, ragged());
    s.b_type.element = DataType::e5m2;
    add("mxfp8_e4m3_x_e5m2", s);
  }
  add("mxfp4", base_spec(Recipe::mxfp4, Recipe::mxfp4, ragged()));
  add("nvfp4", base_spec(Recipe::nvfp4, Recipe::nvfp4, ragged()));
  add("fp8_block128_f32_scales", base_spec(Recipe::fp8_block128, Recipe::fp8_block128, ragged()));
  {
    WorkloadSpec s = base_spec(Recipe::fp8_block128, Recipe::fp8_block128, ragged());
    s.a_type.scale = s.b_type.scale = DataType::ue8m0;
    add("fp8_block128_ue8m0_scales", s);
  }
  {
    WorkloadSpec s = base_spec(Recipe::mxfp4, Recipe::mxfp4, ragged());
    s.quantize.mx_scale_rounding = Ue8m0Rounding::ceil;
    add("mxfp4_ceil_scales", s);
  }
  add("mxfp8_x_mxfp4", base_spec(Recipe::mxfp8, Recipe::mxfp4, ragged()));
  add("mxfp8_x_nvfp4", base_spec(Recipe::mxfp8, Recipe::nvfp4, ragged()));
  add("block128_x_mxfp4", base_spec(Recipe::fp8_block128, Recipe::mxfp4, ragged()));
  add("block128_x_nvfp4", base_spec(Recipe::fp8_block128, Recipe::nvfp4, ragged()));

  // Every major of A, B and D (FP8: FP4 operands are k-major).
  for (const Recipe recipe : {Recipe::mxfp8, Recipe::fp8_block128}) {
    for (const Major a : {Major::m, Major::k})
      for (const Major b : {Major::n, Major::k})
        for (const Major d : {Major::m, Major::n}) {
          WorkloadSpec s =
              base_spec(recipe, recipe, {{45, 70, 96, 1}, {16, 24, 160, 1}, {0, 8, 32, 1}, {3, 140, 64, 1}});
          s.a_major = a;
          s.b_major = b;
          s.d_major = d;
          add(std::string("majors_") + (recipe == Recipe::mxfp8 ? "mxfp8" : "block128") + "_a" + to_string(a) + "_b" +
                  to_string(b) + "_d" + to_string(d),
              s);
        }
  }
  {
    WorkloadSpec s = base_spec(Recipe::mxfp8, Recipe::nvfp4, ragged());
    s.a_major = Major::m;
    s.d_major = Major::m;
    add("majors_mxfp8_x_nvfp4_am_dm", s);
  }

  // Scale layouts, A and B independently.
  const ScaleLayout layouts[] = {ScaleLayout::linear, ScaleLayout::blocked_128x4, ScaleLayout::mn_major};
  for (const Recipe recipe : {Recipe::mxfp8, Recipe::nvfp4, Recipe::fp8_block128}) {
    for (const ScaleLayout sfa : layouts)
      for (const ScaleLayout sfb : layouts) {
        if (sfa == sfb && sfa == ScaleLayout::linear) continue;  // the recipe cases above
        WorkloadSpec s = base_spec(recipe, recipe, {{150, 40, 100, 1}, {0, 16, 48, 1}, {7, 260, 64, 1}});
        s.a_type.scale_layout = sfa;
        s.b_type.scale_layout = sfb;
        add(std::string("scales_") + to_string(recipe) + "_" + to_string(sfa) + "_" + to_string(sfb), s);
      }
  }

  // K: one element, smaller than a block, not a multiple of any block, gpt-oss's 2880.
  for (const Recipe recipe : {Recipe::mxfp8, Recipe::mxfp4, Recipe::nvfp4, Recipe::fp8_block128}) {
    for (const int k : {1, 48, 100, 2880}) {
      WorkloadSpec s = base_spec(recipe, recipe, {{9, 24, k, 1}, {0, 24, k, 1}, {17, 40, k, 1}});
      add(std::string("k") + std::to_string(k) + "_" + to_string(recipe), s);
    }
  }

  // Batches, C with beta, every output type, strides with padding.
  for (const DataType d : {DataType::f32, DataType::f16, DataType::bf16}) {
    WorkloadSpec s =
        base_spec(Recipe::nvfp4, Recipe::nvfp4, {{13, 20, 64, 3}, {0, 8, 64, 2}, {1, 40, 96, 2}, {29, 17, 80, 1}});
    s.d_type = d;
    s.alpha = -1.25f;
    s.beta = 0.5f;
    add(std::string("batches_beta_") + to_string(d), s);
  }
  {
    WorkloadSpec s = base_spec(Recipe::fp8_block128, Recipe::fp8_block128, {{13, 20, 200, 2}, {33, 150, 64, 3}});
    s.a_major = Major::m;
    s.d_major = Major::m;
    s.d_type = DataType::f32;
    s.beta = -2.0f;
    s.padded_strides = true;
    add("batches_padded_block128_am_dm", s);
  }
  for (const Recipe recipe : {Recipe::mxfp8, Recipe::mxfp4, Recipe::nvfp4, Recipe::fp8_block128}) {
    WorkloadSpec s = base_spec(recipe, recipe, ragged());
    s.padded_strides = true;
    s.beta = 1.0f;
    s.d_type = DataType::f16;
    s.a_type.scale_layout = ScaleLayout::mn_major;
    s.b_type.scale_layout = recipe == Recipe::fp8_block128 ? ScaleLayout::linear : ScaleLayout::blocked_128x4;
    add(std::string("padded_") + to_string(recipe), s);
  }

  // The contiguous form: offsets in every encoding, empty groups, rows after the last group.
  {
    int variant = 0;
    for (const IndexType type : {IndexType::i32, IndexType::i64})
      for (const bool with_zero : {false, true}) {
        const Recipe recipe = variant % 2 ? Recipe::nvfp4 : Recipe::mxfp8;
        WorkloadSpec s = base_spec(recipe, recipe,
                                   {{0, 72, 96, 1}, {37, 72, 96, 1}, {1, 72, 96, 1}, {0, 72, 96, 1}, {130, 72, 96, 1}});
        s.layout = GroupLayout::contiguous;
        s.offsets_type = type;
        s.offsets_start_with_zero = with_zero;
        s.moe_rows = 200;  // 32 rows after the last group: never written
        s.a_type.scale_layout = variant >= 2 ? ScaleLayout::blocked_128x4 : ScaleLayout::linear;
        s.beta = variant == 3 ? 0.25f : 0.0f;
        s.padded_strides = variant == 1;
        add("contiguous_" + std::to_string(variant), s);
        ++variant;
      }
    WorkloadSpec s =
        base_spec(Recipe::fp8_block128, Recipe::fp8_block128, {{20, 136, 200, 1}, {0, 136, 200, 1}, {61, 136, 200, 1}});
    s.layout = GroupLayout::contiguous;
    s.a_major = Major::m;
    s.d_major = Major::m;
    s.a_type.scale_layout = ScaleLayout::mn_major;
    s.moe_rows = 96;
    s.d_type = DataType::f32;
    add("contiguous_block128_am_dm", s);
  }

  // The masked form: rows at and past masked_m hold random A and are never written.
  for (const Recipe recipe : {Recipe::mxfp8, Recipe::mxfp4, Recipe::nvfp4, Recipe::fp8_block128}) {
    WorkloadSpec s = base_spec(recipe, recipe, {{5, 48, 128, 1}, {0, 48, 128, 1}, {32, 48, 128, 1}, {17, 48, 128, 1}});
    s.layout = GroupLayout::masked;
    s.moe_rows = 40;
    s.beta = recipe == Recipe::nvfp4 ? -0.5f : 0.0f;
    s.a_type.scale_layout = recipe == Recipe::mxfp4 ? ScaleLayout::blocked_128x4 : ScaleLayout::linear;
    s.padded_strides = recipe == Recipe::fp8_block128;
    add(std::string("masked_") + to_string(recipe), s);
  }

  // Many small groups, in the pointer-array and contiguous forms.
  {
    std::vector<GroupShape> groups, moe_groups;
    for (int g = 0; g < 64; ++g) {
      groups.push_back({(g * 37) % 23, 8 + (g * 7) % 41, 32 * (1 + g % 3) + (g % 2) * 16, 1});
      moe_groups.push_back({(g * 13) % 19, 128, 192, 1});
    }
    add("many_groups_mxfp8", base_spec(Recipe::mxfp8, Recipe::mxfp8, groups));
    add("many_groups_nvfp4_one_thread", base_spec(Recipe::nvfp4, Recipe::nvfp4, groups), 1);
    WorkloadSpec s = base_spec(Recipe::fp8_block128, Recipe::nvfp4, moe_groups);
    s.layout = GroupLayout::contiguous;
    add("many_groups_contiguous_three_threads", s, 3);
  }

  // One larger group (several tiles each way), and a long K that splits the group into slabs.
  {
    WorkloadSpec s = base_spec(Recipe::mxfp8, Recipe::mxfp8, {{300, 290, 256, 1}});
    s.d_type = DataType::f32;
    add("larger_group", s);
    // With the AVX-512 tile, 300 rows of K = 65536 make three A ranges in two waves.
    add("long_k_slabs", base_spec(Recipe::nvfp4, Recipe::nvfp4, {{300, 1, 65536, 1}}));
  }
  return cases;
}

class CpuBackend : public ::testing::TestWithParam<BackendCase> {};

TEST_P(CpuBackend, MatchesReference) {
  const BackendCase& c = GetParam();
  HostWorkload workload;
  const Status created = HostWorkload::create(c.spec, &workload);
  ASSERT_TRUE(created.ok()) << created.message;
  ExpectedOutput expected;
  const Status reference = reference_gemm(workload.args(), &expected);
  ASSERT_TRUE(reference.ok()) << reference.message;

  workload.poison_output();
  RunOptions options;
  options.backend = Backend::cpu;
  options.cpu_threads = c.threads;
  const Status ran = run(workload.args(), options, nullptr, 0);
  ASSERT_TRUE(ran.ok()) << ran.message;

  CheckOptions check;
  check.tolerance = tight_tolerance(c.spec);
  const CheckReport report = check_output(workload.args(), expected, check);
  EXPECT_TRUE(report.pass) << report.summary();
  std::int64_t elements = 0;
  for (const GroupShape& g : c.spec.groups) elements += std::int64_t{g.m} * g.n * g.l;
  EXPECT_EQ(report.checked, elements);
  EXPECT_EQ(testing::written_outside_groups(workload), "");
}

// The reference decodes each row of A and column of B once per output block, through cpu::RowDecoder
// (reference.cpp); element by element, decoding both factors at every product with cpu::decoded_value as
// the definition reads, the same products summed in the same order must give the same doubles, bit for
// bit, on every case above.
TEST_P(CpuBackend, ReferenceIsTheElementAtATimeSumBitForBit) {
  const BackendCase& c = GetParam();
  HostWorkload workload;
  ASSERT_TRUE(HostWorkload::create(c.spec, &workload).ok());
  const GemmArguments& args = workload.args();
  ExpectedOutput expected;
  ASSERT_TRUE(reference_gemm(args, &expected).ok());
  const std::vector<core::ResolvedGroup> groups = cpu::resolve_host_groups(args);
  ASSERT_EQ(expected.size(), groups.size());
  for (std::size_t g = 0; g < groups.size(); ++g) {
    const core::ResolvedGroup& group = groups[g];
    const cpu::OperandView a = cpu::operand_a(args, group), b = cpu::operand_b(args, group);
    ASSERT_EQ(expected[g].size(), static_cast<std::size_t>(std::int64_t{group.l} * group.m * group.n));
    for (std::int64_t l = 0; l < group.l; ++l)
      for (std::int64_t m = 0; m < group.m; ++m)
        for (std::int64_t n = 0; n < group.n; ++n) {
          double sum = 0;
          for (std::int64_t k = 0; k < group.k; ++k)
            sum += cpu::decoded_value(a, l, m, k) * cpu::decoded_value(b, l, n, k);
          double want = static_cast<double>(group.alpha) * sum;
          if (args.has_c) {
            const std::int64_t c_index =
                l * group.c.batch_stride + core::matrix_offset(args.d_major == Major::n, m, n, group.c.ld);
            want += static_cast<double>(group.beta) * static_cast<double>(load_value(args.d_type, group.c.data, c_index));
          }
          const double got = expected[g][static_cast<std::size_t>((l * group.m + m) * group.n + n)];
          ASSERT_EQ(std::memcmp(&got, &want, sizeof got), 0)
              << "group " << g << ", batch " << l << ", row " << m << ", column " << n << ": " << got << " against "
              << want;
        }
  }
}

INSTANTIATE_TEST_SUITE_P(Random, CpuBackend, ::testing::ValuesIn(backend_cases()),
                         [](const ::testing::TestParamInfo<BackendCase>& param_info) { return param_info.param.name; });

// ---- the workloads themselves ------------------------------------------------------------------------

// The data depend on the spec alone: the thread count changes nothing, the seed changes everything.
TEST(Workload, DataDependOnTheSeedOnly) {
  WorkloadSpec s = base_spec(Recipe::nvfp4, Recipe::nvfp4, {{300, 40, 96, 2}, {0, 8, 32, 1}, {129, 17, 160, 1}});
  s.beta = 0.5f;
  s.seed = seed_of("determinism");
  s.threads = 1;
  HostWorkload one, three, other;
  ASSERT_TRUE(HostWorkload::create(s, &one).ok());
  s.threads = 3;
  ASSERT_TRUE(HostWorkload::create(s, &three).ok());
  s.seed += 1;
  ASSERT_TRUE(HostWorkload::create(s, &other).ok());
  ASSERT_EQ(one.buffers().size(), three.buffers().size());
  for (std::size_t i = 0; i < one.buffers().size(); ++i) {
    const testing::Buffer& a = one.buffers()[i];
    const testing::Buffer& b = three.buffers()[i];
    ASSERT_EQ(a.name, b.name);
    ASSERT_EQ(a.bytes, b.bytes);
    EXPECT_EQ(std::memcmp(a.get(), b.get(), a.bytes), 0) << a.name;
    if (a.name == "A[0]" || a.name == "B[2]" || a.name == "C[2]")
      EXPECT_NE(std::memcmp(a.get(), other.buffers()[i].get(), a.bytes), 0) << a.name;
  }
  for (int g = 0; g < 3; ++g) EXPECT_EQ(one.args().groups[g].alpha, three.args().groups[g].alpha);
}

// Two workloads hold the same bytes in every buffer and the same per-group alpha.
void expect_same_workload(const HostWorkload& made, const HostWorkload& drawn, const std::string& what) {
  ASSERT_EQ(made.buffers().size(), drawn.buffers().size()) << what;
  for (std::size_t i = 0; i < made.buffers().size(); ++i) {
    const testing::Buffer& a = made.buffers()[i];
    const testing::Buffer& b = drawn.buffers()[i];
    ASSERT_EQ(a.name, b.name) << what;
    ASSERT_EQ(a.bytes, b.bytes) << what << ", " << a.name;
    EXPECT_EQ(std::memcmp(a.get(), b.get(), a.bytes), 0) << what << ", " << a.name;
  }
  const GemmArguments& x = made.args();
  const GemmArguments& y = drawn.args();
  if (x.layout == GroupLayout::pointer_array) {
    for (int g = 0; g < x.num_groups; ++g) EXPECT_EQ(x.groups[g].alpha, y.groups[g].alpha) << what << ", group " << g;
  } else {
    ASSERT_EQ(x.moe.alpha == nullptr, y.moe.alpha == nullptr) << what;
    for (int g = 0; x.moe.alpha != nullptr && g < x.moe.num_groups; ++g)
      EXPECT_EQ(x.moe.alpha[g], y.moe.alpha[g]) << what << ", group " << g;
  }
}

// A workload made with the draw cache (what the benchmark does for the recipes and layouts of one case) is byte for
// byte the one made without, whether its values were drawn into the cache, come from it, come from it in part (the
// masked form's A has more rows than the contiguous one's), or belong to another key (an exponent changes A's values).
TEST(Workload, TheDrawCacheChangesNoByte) {
  struct Step {
    Recipe a, b;
    GroupLayout layout;
    ScaleLayout scales;
    int a_exponent;
  };
  const Step steps[] = {
      {Recipe::mxfp8, Recipe::mxfp8, GroupLayout::contiguous, ScaleLayout::linear, 0},
      {Recipe::nvfp4, Recipe::nvfp4, GroupLayout::contiguous, ScaleLayout::linear, 0},
      {Recipe::fp8_block128, Recipe::mxfp4, GroupLayout::masked, ScaleLayout::linear, 0},
      {Recipe::fp8_block128, Recipe::fp8_block128, GroupLayout::contiguous, ScaleLayout::blocked_128x4, 0},
      {Recipe::nvfp4, Recipe::nvfp4, GroupLayout::masked, ScaleLayout::blocked_128x4, 0},
      {Recipe::mxfp8, Recipe::nvfp4, GroupLayout::contiguous, ScaleLayout::linear, 5},
  };
  testing::DrawCache cache(std::int64_t{1} << 30);
  for (const Step& step : steps) {
    WorkloadSpec s = base_spec(step.a, step.b, {{70, 48, 256, 1}, {0, 48, 256, 1}, {129, 48, 256, 1}, {1, 48, 256, 1}});
    s.layout = step.layout;
    s.a_type.scale_layout = s.b_type.scale_layout = step.scales;
    s.a_exponent = step.a_exponent;
    s.seed = seed_of("draw_cache");
    const std::string what = std::string(to_string(step.a)) + " x " + to_string(step.b) + " " + to_string(step.layout);
    HostWorkload made, drawn;
    ASSERT_TRUE(HostWorkload::create(s, &made).ok()) << what;
    const std::int64_t hits = cache.hits();
    ASSERT_TRUE(HostWorkload::create(s, &drawn, &cache).ok()) << what;
    expect_same_workload(made, drawn, what);
    // After the first step, every B (same key) is served whole from the cache.
    if (&step != &steps[0]) EXPECT_GE(cache.hits() - hits, 4) << what;
  }
  // Stored once each: the four groups' B; the non-empty groups' A as the contiguous form has them (70, 129 and 1
  // rows), then the empty group's as the masked form has it (129 rows; the others' first rows come from the cache,
  // the rest are drawn); A again for the other exponent.
  EXPECT_EQ(cache.stores(), 4 + 3 + 1 + 3);
  EXPECT_EQ(cache.bytes(), (4 * 48 + 200 + 129 + 200) * std::int64_t{256} * 4);
}

// A cache with room for some matrices keeps within it and still changes no byte; one with none stores nothing.
TEST(Workload, TheDrawCacheKeepsToItsRoom) {
  WorkloadSpec s = base_spec(Recipe::nvfp4, Recipe::nvfp4, {{40, 64, 128, 2}, {9, 32, 96, 1}, {0, 16, 64, 1}});
  s.seed = seed_of("draw_cache_room");
  HostWorkload made;
  ASSERT_TRUE(HostWorkload::create(s, &made).ok());
  for (const std::int64_t room : {std::int64_t{0}, std::int64_t{64} * 128 * 4, std::int64_t{1} << 20}) {
    testing::DrawCache cache(room);
    for (const Recipe r : {Recipe::nvfp4, Recipe::mxfp8}) {
      WorkloadSpec t = s;
      t.a_type = t.b_type = make_operand_type(r);
      HostWorkload reference, drawn;
      ASSERT_TRUE(HostWorkload::create(t, &reference).ok());
      ASSERT_TRUE(HostWorkload::create(t, &drawn, &cache).ok());
      expect_same_workload(reference, drawn, std::string(to_string(r)) + ", room " + std::to_string(room));
      EXPECT_LE(cache.bytes(), room);
    }
    if (room == 0) EXPECT_EQ(cache.stores(), 0);
    if (room == (std::int64_t{1} << 20)) EXPECT_EQ(cache.hits(), 6);  // every A and B of the second recipe
  }
}

// Every recipe quantizes the same fp32 data (it depends on the seed, not the recipe), so the exact
// products of an nvfp4 workload, whose global scales reach D only through alpha, and of an
// fp8-block128 one agree with the mxfp8 one to within quantization error. A global scale left out
// of alpha, or applied twice, would be off by orders of magnitude.
TEST(Workload, RecipesQuantizeTheSameData) {
  for (const GroupLayout layout : {GroupLayout::pointer_array, GroupLayout::contiguous}) {
    ExpectedOutput outputs[3];
    const Recipe recipes[3] = {Recipe::mxfp8, Recipe::nvfp4, Recipe::fp8_block128};
    for (int r = 0; r < 3; ++r) {
      WorkloadSpec s = base_spec(recipes[r], recipes[r], {{40, 48, 256, 1}, {25, 48, 256, 1}});
      s.layout = layout;
      s.alpha = 2.0f;
      s.seed = seed_of("same_data");
      HostWorkload workload;
      ASSERT_TRUE(HostWorkload::create(s, &workload).ok());
      ASSERT_TRUE(reference_gemm(workload.args(), &outputs[r]).ok());
    }
    for (int r = 1; r < 3; ++r) {
      for (std::size_t g = 0; g < 2; ++g) {
        double difference = 0, magnitude = 0;
        for (std::size_t i = 0; i < outputs[0][g].size(); ++i) {
          difference += std::pow(outputs[r][g][i] - outputs[0][g][i], 2);
          magnitude += std::pow(outputs[0][g][i], 2);
        }
        // D has an rms near 2 * 12 (alpha times the rms of a sum of K products of rms 12.2 / sqrt(K)).
        EXPECT_GT(std::sqrt(magnitude / static_cast<double>(outputs[0][g].size())), 10.0);
        // Measured: about 0.15 for nvfp4 (e2m1 keeps 1 mantissa bit), 0.055 for fp8-block128.
        const double bound = recipes[r] == Recipe::nvfp4 ? 0.25 : 0.1;
        EXPECT_LT(std::sqrt(difference / magnitude), bound) << to_string(recipes[r]) << ", group " << g;
      }
    }
  }
}

// The expected output from the back end with fp32 output (what the tool uses for large cases)
// agrees with the reference to fp32 accumulation accuracy.
TEST(ExpectedOutput, FastPathAgreesWithReference) {
  for (const GroupLayout layout : {GroupLayout::pointer_array, GroupLayout::contiguous, GroupLayout::masked}) {
    WorkloadSpec s = base_spec(Recipe::mxfp8, Recipe::nvfp4, {{21, 40, 160, 1}, {0, 40, 160, 1}, {66, 40, 160, 1}});
    s.layout = layout;
    s.d_type = DataType::bf16;
    s.d_major = Major::m;
    s.beta = 0.75f;
    s.padded_strides = true;
    s.seed = seed_of("fast_path") + static_cast<std::uint64_t>(layout);
    HostWorkload workload;
    ASSERT_TRUE(HostWorkload::create(s, &workload).ok());
    ExpectedOutput exact, fast;
    ASSERT_TRUE(testing::expected_output(workload, true, 0, &exact).ok());
    const Status st = testing::expected_output(workload, false, 2, &fast);
    ASSERT_TRUE(st.ok()) << st.message;
    ASSERT_EQ(exact.size(), fast.size());
    for (std::size_t g = 0; g < exact.size(); ++g) {
      ASSERT_EQ(exact[g].size(), fast[g].size()) << "group " << g;
      for (std::size_t i = 0; i < exact[g].size(); ++i)
        EXPECT_NEAR(fast[g][i], exact[g][i], 1e-4 * (1.0 + std::fabs(exact[g][i])))
            << "group " << g << ", element " << i;
    }
  }
}

// ---- check_output ------------------------------------------------------------------------------------

class CheckOutput : public ::testing::Test {
 protected:
  // Two groups with L = 2, m-major f32 D with padded strides, already run and correct.
  void SetUp() override {
    WorkloadSpec s = base_spec(Recipe::mxfp8, Recipe::mxfp8, {{7, 9, 64, 2}, {5, 12, 96, 2}});
    s.d_type = DataType::f32;
    s.d_major = Major::m;
    s.padded_strides = true;
    s.seed = seed_of("check_output");
    ASSERT_TRUE(HostWorkload::create(s, &workload_).ok());
    ASSERT_TRUE(reference_gemm(workload_.args(), &expected_).ok());
    RunOptions options;
    options.backend = Backend::cpu;
    ASSERT_TRUE(run(workload_.args(), options, nullptr, 0).ok());
  }

  // Element (l, m, n) of group g's D, located from problem.hpp's definition (m-major, explicit
  // strides since the workload pads them).
  float& element(int g, std::int64_t l, std::int64_t m, std::int64_t n) {
    const GroupProblem& p = workload_.args().groups[g];
    return static_cast<float*>(p.d)[l * p.batch_stride_d + n * p.ldd + m];
  }

  HostWorkload workload_;
  ExpectedOutput expected_;
};

TEST_F(CheckOutput, PassesTheCorrectOutput) {
  const CheckReport report = check_output(workload_.args(), expected_);
  EXPECT_TRUE(report.pass) << report.summary();
  EXPECT_EQ(report.failures, 0);
  EXPECT_EQ(report.checked, 7 * 9 * 2 + 5 * 12 * 2);
  EXPECT_TRUE(report.error.empty());
  EXPECT_EQ(report.summary().rfind("PASS", 0), 0u) << report.summary();
  EXPECT_GT(report.max_rel_err, 0.0);  // bf16 would show more; f32 still differs from fp64 somewhere
  EXPECT_LT(report.max_rel_err, 96 * 0x1p-24);
}

TEST_F(CheckOutput, ReportsAPlantedWrongElement) {
  const double want = expected_[1][(1 * 5 + 3) * 12 + 10];
  element(1, 1, 3, 10) = static_cast<float>(want + 1000.0);
  const CheckReport report = check_output(workload_.args(), expected_);
  EXPECT_FALSE(report.pass);
  EXPECT_EQ(report.failures, 1);
  EXPECT_EQ(report.worst_group, 1);
  EXPECT_EQ(report.worst_l, 1);
  EXPECT_EQ(report.worst_m, 3);
  EXPECT_EQ(report.worst_n, 10);
  EXPECT_EQ(report.worst_value, static_cast<float>(want + 1000.0));
  EXPECT_EQ(report.worst_expected, want);
  EXPECT_NEAR(report.max_abs_err, 1000.0, 1e-3);
  EXPECT_EQ(report.summary().rfind("FAIL", 0), 0u) << report.summary();
}

TEST_F(CheckOutput, ReportsAPlantedNaN) {
  element(0, 0, 6, 0) = std::numeric_limits<float>::quiet_NaN();
  for (const int threads : {1, 3}) {
    CheckOptions options;
    options.threads = threads;
    const CheckReport report = check_output(workload_.args(), expected_, options);
    EXPECT_FALSE(report.pass);
    EXPECT_EQ(report.failures, 1);
    EXPECT_EQ(report.worst_group, 0);
    EXPECT_EQ(report.worst_l, 0);
    EXPECT_EQ(report.worst_m, 6);
    EXPECT_EQ(report.worst_n, 0);
    EXPECT_TRUE(std::isnan(report.worst_value));
    EXPECT_TRUE(std::isinf(report.max_rel_err));
  }
}

TEST_F(CheckOutput, NaNPassesOnlyWhereExpected) {
  // NaN written where NaN is expected passes; a finite value where NaN is expected fails.
  element(1, 0, 2, 2) = std::numeric_limits<float>::quiet_NaN();
  expected_[1][(0 * 5 + 2) * 12 + 2] = std::numeric_limits<double>::quiet_NaN();
  CheckReport report = check_output(workload_.args(), expected_);
  EXPECT_TRUE(report.pass) << report.summary();
  expected_[0][(1 * 7 + 4) * 9 + 8] = std::numeric_limits<double>::quiet_NaN();
  report = check_output(workload_.args(), expected_);
  EXPECT_FALSE(report.pass);
  EXPECT_EQ(report.failures, 1);
  EXPECT_EQ(report.worst_group, 0);
  EXPECT_EQ(report.worst_l, 1);
  EXPECT_EQ(report.worst_m, 4);
  EXPECT_EQ(report.worst_n, 8);
}

TEST_F(CheckOutput, ErrorsAreNormalisedByTheOperandNorms) {
  // An error just under the tolerance passes, just over fails: the normaliser is
  // |alpha| * ||a_m|| * ||b_n||, computed here independently from the decoded operands.
  const int g = 0;
  const std::int64_t l = 1, m = 2, n = 5;
  const core::ResolvedGroup group = cpu::resolve_host_groups(workload_.args())[g];
  const cpu::OperandView a = cpu::operand_a(workload_.args(), group), b = cpu::operand_b(workload_.args(), group);
  double a_norm = 0, b_norm = 0;
  for (std::int64_t k = 0; k < group.k; ++k) {
    a_norm += std::pow(cpu::decoded_value(a, l, m, k), 2);
    b_norm += std::pow(cpu::decoded_value(b, l, n, k), 2);
  }
  const double scale = std::fabs(group.alpha) * std::sqrt(a_norm) * std::sqrt(b_norm);
  const double want = expected_[g][(l * 7 + m) * 9 + n];
  CheckOptions options;
  options.tolerance = 1e-3;
  element(g, l, m, n) = static_cast<float>(want + 0.9e-3 * scale);
  EXPECT_TRUE(check_output(workload_.args(), expected_, options).pass);
  element(g, l, m, n) = static_cast<float>(want + 1.1e-3 * scale);
  const CheckReport report = check_output(workload_.args(), expected_, options);
  EXPECT_FALSE(report.pass);
  EXPECT_NEAR(report.max_rel_err, 1.1e-3, 1e-5);
}

TEST_F(CheckOutput, RejectsExpectedValuesOfTheWrongShape) {
  ExpectedOutput wrong = expected_;
  wrong[1].pop_back();
  CheckReport report = check_output(workload_.args(), wrong);
  EXPECT_FALSE(report.pass);
  EXPECT_FALSE(report.error.empty());
  EXPECT_EQ(report.worst_group, 1);
  EXPECT_EQ(report.summary().rfind("FAIL", 0), 0u);
  wrong = expected_;
  wrong.pop_back();
  report = check_output(workload_.args(), wrong);
  EXPECT_FALSE(report.pass);
  EXPECT_FALSE(report.error.empty());
}

TEST(DefaultTolerance, IsOutputRoundingPlusAccumulation) {
  // Output rounding: bf16 2^-8, f16 2^-10, f32 0. Accumulation: 2^-12 for the MX and nvfp4 blocks,
  // 2^-10 when either operand is fp8-block128 (128-deep tensor-core blocks).
  GemmArguments args;
  args.a_type = args.b_type = make_operand_type(Recipe::mxfp8);
  args.d_type = DataType::bf16;
  EXPECT_EQ(default_tolerance(args), 0x1p-8 + 0x1p-12);
  args.d_type = DataType::f16;
  EXPECT_EQ(default_tolerance(args), 0x1p-10 + 0x1p-12);
  args.d_type = DataType::f32;
  EXPECT_EQ(default_tolerance(args), 0x1p-12);
  args.a_type = args.b_type = make_operand_type(Recipe::nvfp4);
  EXPECT_EQ(default_tolerance(args), 0x1p-12);
  args.a_type = args.b_type = make_operand_type(Recipe::fp8_block128);
  EXPECT_EQ(default_tolerance(args), 0x1p-10);
  args.b_type = make_operand_type(Recipe::nvfp4);
  args.d_type = DataType::bf16;
  EXPECT_EQ(default_tolerance(args), 0x1p-8 + 0x1p-10);
}

}  // namespace
}  // namespace bsgemm
