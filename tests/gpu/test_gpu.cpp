// The GPU tier: the sm_90a back end against the fp64 CPU reference.
//
// Every case draws fresh random inputs (a distinct seed per case), quantizes them with the library's
// quantizers, poisons D (NaN), runs on the GPU, and checks every element with check_output at the
// default tolerance of the recipe and output type. Every byte of D that belongs to no group's element
// (contiguous rows past the last offset, masked rows past masked_m, padding of strided layouts) must
// keep its poison. Each test skips itself when no compute-capability 9.0 GPU is visible.
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <functional>
#include <iostream>
#include <string>
#include <utility>
#include <vector>

#include "bsgemm/bsgemm.hpp"
#include "src/core/resolved_group.hpp"
#include "src/cuda/sm90/group_records.hpp"
#include "src/cuda/sm90/launch.hpp"
#include "src/testing/device_workload.hpp"
#include "src/testing/workload.hpp"

namespace bsgemm {
namespace {

using testing::DeviceWorkload;
using testing::GroupShape;
using testing::HostWorkload;
using testing::WorkloadSpec;

#define SKIP_WITHOUT_GPU()                                                 \
  do {                                                                     \
    if (!cuda_device_available()) GTEST_SKIP() << "no sm_90 GPU visible"; \
  } while (0)

// One operand configuration the GPU runs, and the kernel path it takes (automatic: the planner's).
struct RecipeVariant {
  const char* name;
  OperandType a, b;
  KernelPath path = KernelPath::automatic;
};

OperandType fp8(Recipe r, DataType element, DataType scale, ScaleLayout layout = ScaleLayout::linear) {
  OperandType t = make_operand_type(r, layout);
  t.element = element;
  t.scale = scale;
  return t;
}

std::vector<RecipeVariant> recipe_variants() {
  return {
      {"block128_f32", fp8(Recipe::fp8_block128, DataType::e4m3, DataType::f32, ScaleLayout::mn_major),
       fp8(Recipe::fp8_block128, DataType::e4m3, DataType::f32)},
      {"block128_ue8m0", fp8(Recipe::fp8_block128, DataType::e4m3, DataType::ue8m0),
       fp8(Recipe::fp8_block128, DataType::e4m3, DataType::ue8m0)},
      {"mxfp8_e4m3_e4m3", fp8(Recipe::mxfp8, DataType::e4m3, DataType::ue8m0),
       fp8(Recipe::mxfp8, DataType::e4m3, DataType::ue8m0, ScaleLayout::blocked_128x4)},
      {"mxfp8_e4m3_e5m2", fp8(Recipe::mxfp8, DataType::e4m3, DataType::ue8m0, ScaleLayout::blocked_128x4),
       fp8(Recipe::mxfp8, DataType::e5m2, DataType::ue8m0)},
      {"mxfp8_e5m2_e4m3", fp8(Recipe::mxfp8, DataType::e5m2, DataType::ue8m0),
       fp8(Recipe::mxfp8, DataType::e4m3, DataType::ue8m0)},
      {"mxfp8_e5m2_e5m2", fp8(Recipe::mxfp8, DataType::e5m2, DataType::ue8m0, ScaleLayout::mn_major),
       fp8(Recipe::mxfp8, DataType::e5m2, DataType::ue8m0, ScaleLayout::mn_major)},
      // FP4: the planner decodes it to bf16, except mxfp8 x mxfp4, which widens it to e4m3 for the FP8
      // kernel; Blackwell checkpoints store the scales in the blocked layout.
      {"mxfp4", fp8(Recipe::mxfp4, DataType::e2m1, DataType::ue8m0),
       fp8(Recipe::mxfp4, DataType::e2m1, DataType::ue8m0, ScaleLayout::blocked_128x4)},
      {"nvfp4", fp8(Recipe::nvfp4, DataType::e2m1, DataType::ue4m3, ScaleLayout::blocked_128x4),
       fp8(Recipe::nvfp4, DataType::e2m1, DataType::ue4m3)},
      {"mxfp8_e4m3_x_mxfp4", fp8(Recipe::mxfp8, DataType::e4m3, DataType::ue8m0, ScaleLayout::blocked_128x4),
       fp8(Recipe::mxfp4, DataType::e2m1, DataType::ue8m0, ScaleLayout::blocked_128x4)},
      {"mxfp8_e5m2_x_mxfp4", fp8(Recipe::mxfp8, DataType::e5m2, DataType::ue8m0),
       fp8(Recipe::mxfp4, DataType::e2m1, DataType::ue8m0, ScaleLayout::mn_major)},
      {"mxfp8_e4m3_x_nvfp4", fp8(Recipe::mxfp8, DataType::e4m3, DataType::ue8m0),
       fp8(Recipe::nvfp4, DataType::e2m1, DataType::ue4m3, ScaleLayout::blocked_128x4)},
      {"block128_x_mxfp4", fp8(Recipe::fp8_block128, DataType::e4m3, DataType::f32),
       fp8(Recipe::mxfp4, DataType::e2m1, DataType::ue8m0)},
      {"block128_x_nvfp4", fp8(Recipe::fp8_block128, DataType::e4m3, DataType::f32, ScaleLayout::mn_major),
       fp8(Recipe::nvfp4, DataType::e2m1, DataType::ue4m3, ScaleLayout::mn_major)},
      // The paths the planner does not take: mxfp4 on the FP8 kernel, mxfp8 x mxfp4 and mxfp8 on the
      // decoding kernel (--kernel-path).
      {"mxfp4_fp8_path", fp8(Recipe::mxfp4, DataType::e2m1, DataType::ue8m0),
       fp8(Recipe::mxfp4, DataType::e2m1, DataType::ue8m0, ScaleLayout::blocked_128x4), KernelPath::fp8},
      {"mxfp8_e5m2_x_mxfp4_bf16_path", fp8(Recipe::mxfp8, DataType::e5m2, DataType::ue8m0),
       fp8(Recipe::mxfp4, DataType::e2m1, DataType::ue8m0, ScaleLayout::mn_major), KernelPath::bf16},
      {"mxfp8_e4m3_e5m2_bf16_path", fp8(Recipe::mxfp8, DataType::e4m3, DataType::ue8m0, ScaleLayout::blocked_128x4),
       fp8(Recipe::mxfp8, DataType::e5m2, DataType::ue8m0), KernelPath::bf16},
  };
}

struct RunResult {
  HostWorkload host;
  CheckReport report;
};

void expect_untouched(const HostWorkload& w) { EXPECT_EQ(testing::written_outside_groups(w), ""); }

// Runs `spec` on the GPU and checks it against the fp64 reference.
// `workspace_for`: the options whose workspace_size() is allocated (default: the run's own).
// `edit_inputs`: changes the drawn inputs before the upload (the reference reads the edited ones).
RunResult run_and_check(const RecipeVariant& v, const WorkloadSpec& spec, MemoryLocation descriptions,
                        RunOptions options = {}, const RunOptions* workspace_for = nullptr,
                        const std::function<void(HostWorkload&)>& edit_inputs = nullptr) {
  const std::string variant = v.name;
  options.backend = Backend::cuda;
  options.path = v.path;
  // Said before the run, so that a log cut short by a hang still names the case.
  std::cout << "run " << variant << " " << to_string(spec.layout) << " " << to_string(spec.d_type) << " seed " << spec.seed
            << std::endl;
  RunResult r;
  const Status created = HostWorkload::create(spec, &r.host);
  EXPECT_TRUE(created.ok()) << created.message;
  if (!created.ok()) return r;
  if (edit_inputs) edit_inputs(r.host);
  r.host.poison_output();
  DeviceWorkload device;
  Status s = DeviceWorkload::create(r.host, descriptions, workspace_for != nullptr ? *workspace_for : options, 1, &device);
  EXPECT_TRUE(s.ok()) << s.message;
  if (!s.ok()) return r;
  EXPECT_TRUE((s = device.poison_output()).ok()) << s.message;
  EXPECT_TRUE((s = device.run(options)).ok()) << s.message;
  EXPECT_TRUE((s = device_status(device.workspace())).ok()) << s.message;
  EXPECT_TRUE((s = device.download_output(r.host)).ok()) << s.message;
  ExpectedOutput expected;
  EXPECT_TRUE((s = testing::expected_output(r.host, /*exact=*/true, 0, &expected)).ok()) << s.message;
  r.report = check_output(r.host.args(), expected);
  EXPECT_TRUE(r.report.pass) << variant << ": " << r.report.summary() << "\n  plan: " << describe_plan(device.args(), options);
  // scripts/device-check.sh collects these lines into the per-recipe bounds quoted in README.
  std::cout << "max_rel_err " << variant << " / " << to_string(spec.d_type) << " " << r.report.max_rel_err << "\n";
  expect_untouched(r.host);
  return r;
}

WorkloadSpec make_spec(const RecipeVariant& v, GroupLayout layout, DataType d_type, std::vector<GroupShape> groups,
                       std::uint64_t seed) {
  WorkloadSpec s;
  s.a_type = v.a;
  s.b_type = v.b;
  s.layout = layout;
  s.d_type = d_type;
  s.groups = std::move(groups);
  s.seed = seed;
  return s;
}

std::vector<GroupShape> moe_groups(std::vector<std::int32_t> ms, std::int32_t n, std::int32_t k) {
  std::vector<GroupShape> groups;
  for (std::int32_t m : ms) groups.push_back({m, n, k, 1});
  return groups;
}

// The tests that cover every recipe variant run once per variant, so that ctest runs the variants in
// parallel (the CPU's work, drawing the inputs, the fp64 reference and the check, is most of their time).
// Each names its cases' seeds from a base of its own plus 100 per variant.
class GpuVariantTest : public ::testing::TestWithParam<std::size_t> {
 protected:
  static RecipeVariant variant() { return recipe_variants()[GetParam()]; }
  static std::uint64_t seed_base(std::uint64_t base) { return base + 100 * GetParam(); }
};

std::string variant_name(const ::testing::TestParamInfo<std::size_t>& info) { return recipe_variants()[info.param].name; }

class GpuMatrix : public GpuVariantTest {};
class GpuVariantShapes : public GpuVariantTest {};
class GpuTiles : public GpuVariantTest {};

// ---- the planner's tile rules (no GPU needed) ---------------------------------------------------------

TEST(PlannerRules, RegisterOperandTileWidth) {
  using cuda::swapped_tile_weights;
  constexpr auto mx = cuda::ScaleGranularity::mx32, nv = cuda::ScaleGranularity::nv16;
  EXPECT_EQ(swapped_tile_weights(32, 3072, mx), 384);  // decode-G128-M16's N: no padding either way
  EXPECT_EQ(swapped_tile_weights(32, 4096, mx), 384);  // 128 of padding, n / 32
  EXPECT_EQ(swapped_tile_weights(32, 4095, mx), 256);  // 127 more than 256's 1, past n / 32 = 127
  EXPECT_EQ(swapped_tile_weights(32, 7168, mx), 384);
  EXPECT_EQ(swapped_tile_weights(32, 1280, mx), 256);  // 256 of padding against none
  EXPECT_EQ(swapped_tile_weights(32, 200, mx), 256);
  EXPECT_EQ(swapped_tile_weights(64, 3072, mx), 256);  // 64 tokens: two slabs only (registers)
  EXPECT_EQ(swapped_tile_weights(32, 0, mx), 256);
  EXPECT_EQ(swapped_tile_weights(32, 3072, nv), 256);  // nv16 weights: 384 measured slower
  EXPECT_TRUE(cuda::forcible_swapped_tile(32, 384));
  EXPECT_TRUE(cuda::forcible_swapped_tile(32, 256));
  EXPECT_FALSE(cuda::forcible_swapped_tile(64, 256));
  EXPECT_FALSE(cuda::swapped_tile(64, 384));
  EXPECT_TRUE(cuda::staged_tokens_tile(16, 256));
  EXPECT_FALSE(cuda::forcible_swapped_tile(16, 256));  // staged tokens only
  EXPECT_EQ(cuda::tma_box_loads(384), 2);
  EXPECT_EQ(cuda::tma_box_loads(256), 1);
}

TEST(PlannerRules, Block128WideTile) {
  const auto pays = [](std::int64_t m, std::int64_t n, std::int64_t k, std::int64_t groups) {
    cuda::Block128TileWork w;
    w.add(m, n, k, groups);
    return w.wide_pays(132);
  };
  EXPECT_TRUE(pays(4096, 4096, 7168, 8));   // prefill-uniform: 3% of padding
  EXPECT_TRUE(pays(1024, 7168, 2048, 32));  // down-skew: 1.8%
  EXPECT_TRUE(pays(4096, 1280, 7168, 8));   // 1344 / 1280: 5% exactly, the limit
  EXPECT_TRUE(pays(4096, 1100, 7168, 8));   // both pad to 1152
  EXPECT_FALSE(pays(4096, 1000, 7168, 8));  // 1152 against 1024: 12.5%
  EXPECT_FALSE(pays(4096, 256, 7168, 8));   // 50%
  EXPECT_FALSE(pays(256, 4096, 7168, 1));   // 64 tiles: not four waves
  EXPECT_FALSE(pays(4096, 4096, 896, 8));   // 7 k-blocks per tile
  EXPECT_TRUE(pays(4096, 4096, 1024, 8));
  // The reference example: (8192, 1280, 32), (32, 384, 1536), (640, 1280, 32), (640, 160, 32).
  cuda::Block128TileWork example;
  example.add(8192, 1280, 32);
  example.add(32, 384, 1536);
  example.add(640, 1280, 32);
  example.add(640, 160, 32);
  EXPECT_FALSE(example.wide_pays(132));
  cuda::Block128TileWork w;
  w.add(0, 4096, 128);
  w.add(-1, 4096, 128);
  w.add(128, 4096, 0);
  EXPECT_EQ(w.tiles128, 0);
  w.add(129, 4096, 300, 2);
  EXPECT_EQ(w.tiles128, 2 * 2 * 32);
  EXPECT_EQ(w.stages128, 2 * 2 * 32 * 3);
  EXPECT_EQ(w.columns128, 2 * 2 * 4096);
  EXPECT_EQ(w.columns192, 2 * 2 * 4224);
}

// The staged path's workspace holds bf16 copies of A and B past the records (cuda_backend.cpp
// staged_buffers): rows x staged_ld(K) and groups x N x staged_ld(K) elements of 2 bytes, 256-byte aligned.
TEST(PlannerRules, StagedWorkspace) {
  const RecipeVariant v{"mxfp8", fp8(Recipe::mxfp8, DataType::e4m3, DataType::ue8m0),
                        fp8(Recipe::mxfp8, DataType::e5m2, DataType::ue8m0), KernelPath::staged};
  for (const GroupLayout layout : {GroupLayout::contiguous, GroupLayout::masked}) {
    HostWorkload host;
    ASSERT_TRUE(HostWorkload::create(make_spec(v, layout, DataType::bf16, moe_groups({100, 200}, 264, 330), 7), &host).ok());
    RunOptions staged;
    staged.backend = Backend::cuda;
    staged.path = KernelPath::staged;
    RunOptions fp8_path = staged;
    fp8_path.path = KernelPath::fp8;
    const std::int64_t ld = cuda::staged_ld(330);
    EXPECT_EQ(ld, 336);
    const std::int64_t a_rows = layout == GroupLayout::masked ? 2 * 200 : 300;
    const std::size_t staged_bytes = static_cast<std::size_t>((a_rows + 2 * 264) * ld * 2);
    const std::size_t grown = workspace_size(host.args(), staged) - workspace_size(host.args(), fp8_path);
    EXPECT_GE(grown, staged_bytes) << to_string(layout);
    EXPECT_LT(grown, staged_bytes + 3 * 256) << to_string(layout);
  }
}

// The planner's staged rule (cuda_backend.cpp staged_pays): left to choose, it asks for the bf16 copies
// where groups are large (prefill) and not where the weights dominate (decode, few rows per group), and
// never when a tile or a path is forced. run() with less workspace keeps the default path.
// The arguments of an MoE-form call whose sizes the planner cannot see (device-resident descriptions): its
// rules count A's rows.
GemmArguments unseen_moe_args(Recipe a, Recipe b, GroupLayout layout, std::int64_t rows, int groups, int n, int k,
                              ScaleLayout a_scales = ScaleLayout::linear) {
  GemmArguments args;
  args.a_type = make_operand_type(a, a_scales);
  args.b_type = make_operand_type(b);
  args.layout = layout;
  args.descriptions = MemoryLocation::device;
  args.moe.num_groups = groups;
  args.moe.rows = rows;
  args.moe.n = n;
  args.moe.k = k;
  return args;
}

// The multiprocessors the library sizes the stream-K partials for (cuda_backend.cpp's sm_count: the current
// device's, 1 without one), and the workspace a staged-token call holds beyond its tokens' copy.
int library_sms() {
  int device = 0, count = 0;
  if (cudaGetDevice(&device) != cudaSuccess || cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device) != cudaSuccess) {
    cudaGetLastError();
    return 1;
  }
  return count;
}
std::size_t stream_k_bytes() { return cuda::stream_k_workspace(library_sms()); }

TEST(PlannerRules, StagedChosenForLargeGroups) {
  const auto args_for = [](Recipe a, Recipe b, GroupLayout layout, std::int64_t rows, int groups, int n, int k) {
    return unseen_moe_args(a, b, layout, rows, groups, n, k);
  };
  RunOptions automatic;
  automatic.backend = Backend::cuda;
  RunOptions fp8_path = automatic;
  fp8_path.path = KernelPath::fp8;
  const auto staged_extra = [&](const GemmArguments& args, const RunOptions& o) {
    return workspace_size(args, o) - workspace_size(args, fp8_path);
  };
  for (const auto& [a, b] : std::vector<std::pair<Recipe, Recipe>>{
           {Recipe::mxfp8, Recipe::mxfp8}, {Recipe::mxfp4, Recipe::mxfp4}, {Recipe::nvfp4, Recipe::nvfp4}, {Recipe::mxfp8, Recipe::nvfp4}}) {
    // The public prefill cases: 8 x 4096 rows and 32 groups of about 1024, N 4096, K 7168; down-projection.
    const GemmArguments prefill = args_for(a, b, GroupLayout::contiguous, 8 * 4096, 8, 4096, 7168);
    EXPECT_EQ(staged_extra(prefill, automatic), static_cast<std::size_t>((8 * 4096 + 8 * 4096) * 7168 * 2)) << to_string(a);
    EXPECT_GT(staged_extra(args_for(a, b, GroupLayout::contiguous, 32 * 1024, 32, 4096, 7168), automatic), 0u);
    EXPECT_GT(staged_extra(args_for(a, b, GroupLayout::contiguous, 32 * 1024, 32, 7168, 2048), automatic), 0u);
    // Decode: 64 and 16 rows per group (the masked form's capacity, and the contiguous total). Not staged;
    // with FP4 weights the register-operand kernel asks for its tokens' bf16 copy instead (whole 64-deep
    // slices per row, PlannerRules.StagedTokens).
    for (const GroupLayout layout : {GroupLayout::contiguous, GroupLayout::masked}) {
      const bool masked = layout == GroupLayout::masked;
      const bool fp4_weights = b != Recipe::mxfp8;
      for (const auto& [rows, groups, n, k] : std::vector<std::array<int, 4>>{{64, 32, 4096, 7168}, {16, 128, 3072, 4096}}) {
        const GemmArguments decode = args_for(a, b, layout, masked ? rows : groups * rows, groups, n, k);
        const std::size_t tokens = fp4_weights ? static_cast<std::size_t>(groups) * rows * k * 2 + stream_k_bytes() : 0;
        EXPECT_GE(staged_extra(decode, automatic), tokens) << to_string(a) << " " << to_string(layout);
        EXPECT_LT(staged_extra(decode, automatic), tokens + 512) << to_string(a) << " " << to_string(layout);
      }
    }
    // Around the crossover (about 270 rows per group at N 4096): 128 rows stay, 1024 stage.
    EXPECT_EQ(staged_extra(args_for(a, b, GroupLayout::contiguous, 32 * 128, 32, 4096, 7168), automatic), 0u);
    GemmArguments masked = args_for(a, b, GroupLayout::masked, 1024, 32, 4096, 7168);
    EXPECT_GT(staged_extra(masked, automatic), 0u);
    // A masked capacity of 1024 rows holding 64 tokens a group (decode): the rule counts the tokens where
    // the host sees them (masked_m) or expected_m says so.
    std::vector<std::int32_t> masked_m(32, 64);
    masked.descriptions = MemoryLocation::host;
    masked.moe.masked_m = masked_m.data();
    EXPECT_EQ(staged_extra(masked, automatic), 0u);
    std::fill(masked_m.begin(), masked_m.end(), 1024);
    EXPECT_GT(staged_extra(masked, automatic), 0u);
    masked.descriptions = MemoryLocation::device;
    masked.expected_m = 64;
    EXPECT_EQ(staged_extra(masked, automatic), 0u);
    // A forced tile or path keeps the planner out of it.
    RunOptions tile = automatic;
    tile.tile_m = 128;
    tile.tile_n = 128;
    EXPECT_EQ(staged_extra(prefill, tile), 0u);
    RunOptions bf16_path = automatic;
    bf16_path.path = KernelPath::bf16;
    EXPECT_EQ(staged_extra(prefill, bf16_path), 0u);
  }
  // fp8-block128 (fp32 scales do not fold into bf16 exactly) and the pointer-array form never stage.
  EXPECT_EQ(staged_extra(args_for(Recipe::fp8_block128, Recipe::fp8_block128, GroupLayout::contiguous, 8 * 4096, 8, 4096, 7168),
                         automatic),
            0u);
}

// The register-operand kernel's staged tokens (cuda_backend.cpp tokens_stageable): workspace_size() adds A's
// rows (the masked form's whole capacity) x weights_order_ld(K) bf16 where the pass moves at most an eighth
// of the FP4 weights' bytes, in the MoE forms with A's scales at A's rows; kernel path staged with a
// register-operand tile asks for them whatever the bytes; the other forms and a large masked capacity
// ask for nothing.
// The options the staged-token planner tests compare: the planner's own, kernel path fp8 (whose workspace is
// the records' alone for these calls) and kernel path staged with a register-operand tile; extra(): the
// workspace an option asks for beyond the records'.
struct TokenPlanOptions {
  RunOptions automatic, records_only, forced;
  TokenPlanOptions(int forced_m, int forced_n) {
    automatic.backend = Backend::cuda;
    records_only = forced = automatic;
    records_only.path = KernelPath::fp8;
    forced.path = KernelPath::staged;
    forced.tile_m = forced_m;
    forced.tile_n = forced_n;
  }
  std::size_t extra(const GemmArguments& args, const RunOptions& o) const {
    return workspace_size(args, o) - workspace_size(args, records_only);
  }
};

TEST(PlannerRules, StagedTokens) {
  const auto args_for = [](Recipe a, GroupLayout layout, std::int64_t rows, int groups, int n, int k,
                           ScaleLayout a_scales = ScaleLayout::linear) {
    return unseen_moe_args(a, Recipe::nvfp4, layout, rows, groups, n, k, a_scales);
  };
  const TokenPlanOptions options(32, 384);
  const RunOptions &automatic = options.automatic, &records_only = options.records_only, &forced = options.forced;
  EXPECT_EQ(cuda::weights_order_ld(330), 384);
  EXPECT_EQ(cuda::weights_order_ld(7168), 7168);
  const auto extra = [&](const GemmArguments& args, const RunOptions& o) { return options.extra(args, o); };
  const auto expect_tokens = [&](const GemmArguments& args, const RunOptions& o, std::size_t tokens) {
    // With the stream-K partials after the copy (two regions 256-byte aligned).
    const std::size_t held = tokens > 0 ? tokens + stream_k_bytes() : 0;
    EXPECT_GE(extra(args, o), held) << to_string(args.layout) << " rows " << args.moe.rows;
    EXPECT_LT(extra(args, o), held + 512) << to_string(args.layout) << " rows " << args.moe.rows;
    if (tokens > 0) EXPECT_NE(describe_plan(args, o).find("tokens staged"), std::string::npos) << describe_plan(args, o);
    else EXPECT_EQ(describe_plan(args, o).find("tokens staged"), std::string::npos) << describe_plan(args, o);
  };
  for (const Recipe a : {Recipe::nvfp4, Recipe::mxfp8}) {
    // 16 tokens a group, K = 330: 384 bf16 a row (whole slices).
    expect_tokens(args_for(a, GroupLayout::contiguous, 8 * 16, 8, 4096, 330), automatic, 8 * 16 * 384 * 2);
    expect_tokens(args_for(a, GroupLayout::masked, 16, 8, 4096, 330), automatic, 8 * 16 * 384 * 2);
    // A masked capacity of 1024 rows holding about 16 tokens a group: the pass would move more than the
    // weights.
    GemmArguments large_capacity = args_for(a, GroupLayout::masked, 1024, 8, 4096, 330);
    large_capacity.expected_m = 16;
    expect_tokens(large_capacity, automatic, 0);
    expect_tokens(large_capacity, forced, 8 * 1024 * 384 * 2);
    // A's scales blocked in the contiguous form (padded per group): not stageable, forced or not.
    expect_tokens(args_for(a, GroupLayout::contiguous, 8 * 16, 8, 4096, 330, ScaleLayout::blocked_128x4), automatic, 0);
    // Large groups: not the register-operand kernel.
    expect_tokens(args_for(a, GroupLayout::contiguous, 8 * 1024, 8, 4096, 330), records_only, 0);
  }
  GemmArguments ptr = args_for(Recipe::nvfp4, GroupLayout::pointer_array, 0, 0, 0, 0);
  ptr.num_groups = 4;
  expect_tokens(ptr, automatic, 0);
  // Groups of at most 16 rows with staged tokens: the 16-token tile; more rows or no staging: 32 or 64.
  const GemmArguments sixteen = args_for(Recipe::nvfp4, GroupLayout::masked, 16, 8, 4096, 330);
  EXPECT_NE(describe_plan(sixteen, automatic).find("tile 16x256"), std::string::npos) << describe_plan(sixteen, automatic);
  const GemmArguments seventeen = args_for(Recipe::nvfp4, GroupLayout::masked, 17, 8, 4096, 330);
  EXPECT_NE(describe_plan(seventeen, automatic).find("tile 32x256"), std::string::npos) << describe_plan(seventeen, automatic);
  RunOptions forced16 = forced;
  forced16.tile_m = 16;
  forced16.tile_n = 256;
  GemmArguments capacity = args_for(Recipe::nvfp4, GroupLayout::masked, 1024, 8, 4096, 330);
  capacity.expected_m = 16;
  expect_tokens(capacity, forced16, 8 * 1024 * 384 * 2);
}

// fp8-block128 tokens with FP4 weights: at decode shapes the planner moves them from the decoding kernel to
// the register-operand one where the workspace holds their f16 copy (their fp32 scales folded in, rounded, and
// each row's power of two: 4 bytes a row more), on its 16-, 32- and 64-token tiles; not in the pointer-array
// form, not with A's scales blocked in the contiguous form, not for large groups, and not on kernel path fp8.
TEST(PlannerRules, F16Tokens) {
  const TokenPlanOptions options(32, 256);
  const RunOptions &automatic = options.automatic, &forced = options.forced;
  for (const Recipe b : {Recipe::nvfp4, Recipe::mxfp4}) {
    const auto args_for = [b](GroupLayout layout, std::int64_t rows, int groups, int n, int k,
                              ScaleLayout a_scales = ScaleLayout::linear) {
      return unseen_moe_args(Recipe::fp8_block128, b, layout, rows, groups, n, k, a_scales);
    };
    const auto extra = [&](const GemmArguments& args, const RunOptions& o) { return options.extra(args, o); };
    // rows: the staged rows (each 384 f16 here, and a power of two).
    const auto expect_plan = [&](const GemmArguments& args, const RunOptions& o, std::size_t rows, const char* tile) {
      const std::string plan = describe_plan(args, o);
      const std::size_t held = rows > 0 ? rows * (384 * 2 + 4) + stream_k_bytes() : 0;  // with the stream-K partials
      EXPECT_GE(extra(args, o), held) << plan;
      EXPECT_LT(extra(args, o), held + 768) << plan;
      if (rows == 0) {
        EXPECT_EQ(plan.find("tokens staged"), std::string::npos) << plan;
        return;
      }
      EXPECT_NE(plan.find("tokens staged as f16 in their K order, their fp32 scales folded in"), std::string::npos) << plan;
      EXPECT_NE(plan.find("wgmma's A registers, D^T = B A^T, F16 wgmma"), std::string::npos) << plan;
      EXPECT_NE(plan.find(tile), std::string::npos) << plan;
    };
    // K = 330: 384 f16 a row (whole slices); 16 rows a group: the 16-token tile; 17 or 32: 32 tokens; 33 or
    // 64: 64 tokens.
    expect_plan(args_for(GroupLayout::masked, 16, 8, 4096, 330), automatic, 8 * 16, "tile 16x256");
    expect_plan(args_for(GroupLayout::masked, 17, 8, 4096, 330), automatic, 8 * 17, "tile 32x256");
    expect_plan(args_for(GroupLayout::masked, 32, 8, 4096, 330), automatic, 8 * 32, "tile 32x256");
    expect_plan(args_for(GroupLayout::masked, 33, 8, 4096, 330), automatic, 8 * 33, "tile 64x256");
    expect_plan(args_for(GroupLayout::contiguous, 8 * 64, 8, 4096, 330), automatic, 8 * 64, "tile 64x256");
    expect_plan(args_for(GroupLayout::contiguous, 8 * 64, 8, 4096, 330), forced, 8 * 64, "tile 32x256");
    // Large groups stay on the decoding kernel; so does kernel path fp8's minimum; and A's scales blocked in the
    // contiguous form (padded per group, which the staging pass cannot see), while the masked form stages them.
    expect_plan(args_for(GroupLayout::contiguous, 8 * 1024, 8, 4096, 330), automatic, 0, "");
    expect_plan(args_for(GroupLayout::contiguous, 8 * 64, 8, 4096, 330, ScaleLayout::blocked_128x4), automatic, 0, "");
    expect_plan(args_for(GroupLayout::masked, 64, 8, 4096, 330, ScaleLayout::blocked_128x4), automatic, 8 * 64, "tile 64x256");
    GemmArguments ptr = args_for(GroupLayout::pointer_array, 0, 0, 0, 0);
    ptr.num_groups = 4;
    expect_plan(ptr, automatic, 0, "");
  }
}

// ---- the group records (group_records.hpp), as the host builds them for host-resident descriptions ---

// The records of every group of `w` in order, as copy_host_records (cuda_backend.cpp) builds them.
// output_map_max_k: PrepareParams' (the groups up to that K get a D map; -1: none).
std::vector<cuda::DeviceGroup> host_records(const HostWorkload& w, int block_m, int block_n,
                                            std::int64_t* total_tiles = nullptr, std::int64_t output_map_max_k = -1) {
  const GemmArguments& a = w.args();
  cuda::PrepareParams p{};
  p.spec = core::make_call_spec(a);
  p.num_groups = a.layout == GroupLayout::pointer_array ? a.num_groups : a.moe.num_groups;
  p.block_m = block_m;
  p.block_n = block_n;
  p.groups = a.groups;
  p.moe = a.moe;
  p.out_maps = reinterpret_cast<CUtensorMap*>(std::uintptr_t{1} << 20);  // device addresses, never dereferenced
  p.out_d_maps = reinterpret_cast<CUtensorMap*>(std::uintptr_t{1} << 21);
  p.output_map_max_k = output_map_max_k;
  std::vector<cuda::DeviceGroup> records(static_cast<std::size_t>(p.num_groups));
  std::int64_t total = -1;
  const Status s = cuda::build_group_records(p, records.data(), &total,
                                             [](int, const core::ResolvedGroup&, std::int64_t) { return Status::success(); });
  EXPECT_TRUE(s.ok()) << s.message;
  if (total_tiles != nullptr) *total_tiles = total;
  return records;
}

TEST(GroupRecords, ContiguousRowsTilesAndOutputs) {
  WorkloadSpec s;
  s.a_type = s.b_type = make_operand_type(Recipe::mxfp8);
  s.layout = GroupLayout::contiguous;
  s.groups = {{130, 256, 128, 1}, {0, 256, 128, 1}, {1, 256, 128, 1}, {300, 256, 128, 1}};
  HostWorkload w;
  ASSERT_TRUE(HostWorkload::create(s, &w).ok());
  std::int64_t total = 0;
  const std::vector<cuda::DeviceGroup> r = host_records(w, 128, 128, &total);
  ASSERT_EQ(r.size(), 4u);
  EXPECT_EQ(total, 4 + 0 + 2 + 6);
  const std::int64_t tiles[] = {4, 0, 2, 6}, first_row[] = {0, 130, 130, 131};
  std::int64_t tile = 0;
  for (int g = 0; g < 4; ++g) {
    SCOPED_TRACE("group " + std::to_string(g));
    EXPECT_EQ(r[g].m, s.groups[g].m);
    EXPECT_EQ(r[g].n, 256);
    EXPECT_EQ(r[g].k, 128);
    EXPECT_EQ(r[g].tile_begin, tile);
    EXPECT_EQ(r[g].tile_end, tile + tiles[g]);
    EXPECT_EQ(r[g].tiles_n, 2);
    EXPECT_EQ(r[g].a_row0, first_row[g]);
    EXPECT_EQ(r[g].b_batch0, g);
    EXPECT_EQ(r[g].a_map, nullptr);  // the MoE forms use the kernel's whole-tensor maps
    // D is n-major bf16 with ld = n: the group's rows start at its first row.
    EXPECT_EQ(r[g].d, static_cast<std::uint8_t*>(w.args().moe.d) + 2 * 256 * first_row[g]);
    EXPECT_EQ(r[g].alpha, 1.0f);
    tile += tiles[g];
  }
}

TEST(GroupRecords, PointerArrayMapsAndBatches) {
  WorkloadSpec s;
  s.a_type = s.b_type = make_operand_type(Recipe::nvfp4);
  s.layout = GroupLayout::pointer_array;
  s.groups = {{64, 384, 256, 2}, {0, 128, 128, 1}, {200, 128, 64, 1}};
  HostWorkload w;
  ASSERT_TRUE(HostWorkload::create(s, &w).ok());
  const std::vector<cuda::DeviceGroup> r = host_records(w, 128, 256);
  ASSERT_EQ(r.size(), 3u);
  const CUtensorMap* maps = reinterpret_cast<const CUtensorMap*>(std::uintptr_t{1} << 20);
  const std::int64_t tiles[] = {2 * 1 * 2, 0, 2 * 1};
  std::int64_t tile = 0;
  for (int g = 0; g < 3; ++g) {
    SCOPED_TRACE("group " + std::to_string(g));
    EXPECT_EQ(r[g].l, s.groups[g].l);
    EXPECT_EQ(r[g].tile_begin, tile);
    EXPECT_EQ(r[g].tile_end, tile + tiles[g]);
    EXPECT_EQ(r[g].a_map, maps + 2 * g);
    EXPECT_EQ(r[g].b_map, maps + 2 * g + 1);
    EXPECT_EQ(r[g].d, w.args().groups[g].d);
    EXPECT_EQ(r[g].d_map, nullptr);  // host_records' default: no group gets a D map
    tile += tiles[g];
  }
}

// The TMA-store epilogue's D maps: which kernels use the boxes up to which K, and which pointer-array groups
// get a map (the others, and empty groups, are written by the other epilogues).
TEST(GroupRecords, PointerArrayOutputMaps) {
  using cuda::ScaleGranularity;
  EXPECT_EQ(cuda::tma_store_max_k(/*swapped=*/true, false, ScaleGranularity::mx32), -1);
  EXPECT_EQ(cuda::tma_store_max_k(false, /*decode=*/false, ScaleGranularity::mx32), cuda::kShortTileK);
  EXPECT_EQ(cuda::tma_store_max_k(false, false, ScaleGranularity::block128), INT64_MAX);
  EXPECT_EQ(cuda::tma_store_max_k(false, /*decode=*/true, ScaleGranularity::mx32), INT64_MAX);

  WorkloadSpec s;
  s.a_type = s.b_type = make_operand_type(Recipe::mxfp8);
  s.layout = GroupLayout::pointer_array;
  s.groups = {{8192, 1280, 32, 1}, {32, 384, 1536, 1}, {0, 64, 64, 1}, {7, 136, 512, 2}, {640, 160, 544, 1}, {65, 130, 64, 3}};
  HostWorkload w;
  ASSERT_TRUE(HostWorkload::create(s, &w).ok());
  const CUtensorMap* d_maps = reinterpret_cast<const CUtensorMap*>(std::uintptr_t{1} << 21);
  const std::vector<cuda::DeviceGroup> r = host_records(w, 128, 128, nullptr, cuda::kShortTileK);
  ASSERT_EQ(r.size(), 6u);
  EXPECT_EQ(r[0].d_map, d_maps + 0);
  EXPECT_EQ(r[1].d_map, nullptr);  // K = 1536: the MX tiles' stores from the registers
  EXPECT_EQ(r[2].d_map, nullptr);  // empty
  EXPECT_EQ(r[3].d_map, d_maps + 3);
  EXPECT_EQ(r[4].d_map, nullptr);  // K = 544, past kShortTileK
  EXPECT_EQ(r[5].d_map, nullptr);  // rows of 260 bytes
  for (const cuda::DeviceGroup& g : host_records(w, 128, 128, nullptr, INT64_MAX))
    EXPECT_EQ(g.d_map == nullptr, g.m == 0 || g.n % 8 != 0);
}

// ---- every recipe variant x every output type x every layout ---------------------------------------

TEST_P(GpuMatrix, EveryOutputTypeAndLayout) {
  SKIP_WITHOUT_GPU();
  const RecipeVariant v = variant();
  std::uint64_t seed = seed_base(100000);
  for (DataType d : {DataType::f32, DataType::f16, DataType::bf16}) {
    // Ragged in M, N and K (K not a multiple of 128), an empty group and a one-row group.
    const auto moe = moe_groups({129, 0, 1, 70, 200}, 200, 320);
    run_and_check(v, make_spec(v, GroupLayout::contiguous, d, moe, ++seed), MemoryLocation::host);
    WorkloadSpec masked = make_spec(v, GroupLayout::masked, d, moe, ++seed);
    masked.moe_rows = 256;
    run_and_check(v, masked, MemoryLocation::device);
    const std::vector<GroupShape> ptr = {{129, 200, 320, 1}, {0, 64, 128, 1}, {7, 136, 96, 2}, {64, 8, 448, 1}};
    run_and_check(v, make_spec(v, GroupLayout::pointer_array, d, ptr, ++seed), MemoryLocation::host);
  }
}

// ---- shapes ------------------------------------------------------------------------------------------

TEST_P(GpuVariantShapes, GroupSizesZeroOneSevenSixtyFour129And4097) {
  SKIP_WITHOUT_GPU();
  const RecipeVariant v = variant();
  WorkloadSpec s =
      make_spec(v, GroupLayout::contiguous, DataType::bf16, moe_groups({0, 1, 7, 64, 129, 4097}, 256, 256), seed_base(200000));
  s.moe_rows = 4097 + 129 + 64 + 7 + 1 + 300;  // capacity past the last group: must stay untouched
  run_and_check(v, s, MemoryLocation::device);
}

TEST_P(GpuVariantShapes, KNotAMultipleOfTheBlock) {
  SKIP_WITHOUT_GPU();
  const RecipeVariant v = variant();
  std::uint64_t seed = seed_base(300000);
  for (std::int32_t k : {16, 48, 100, 200, 2880 / 8 + 16}) {
    WorkloadSpec s = make_spec(v, GroupLayout::pointer_array, DataType::f32, {{77, 150, k, 1}, {130, 64, k, 1}}, ++seed);
    s.padded_strides = (k % 3) == 0;
    run_and_check(v, s, MemoryLocation::host);
  }
}

// The smallest power of two an operand is drawn at in ExtremeScales. Decoded to bf16 (the decoding and
// register-operand kernels), an FP8 element times a ue8m0 scale below 2^-124 (e4m3) or 2^-117 (e5m2) can
// be smaller than bf16's subnormals resolve (README, "Accuracy"), so mxfp8 operands of variants that may
// take those kernels stay at 2^-80 (scales near 2^-100); FP4 elements and fp8-block128 (whose scale is
// applied in fp32) go to the bottom of the range.
int smallest_exponent(const RecipeVariant& v, const OperandType& t) {
  const bool decoded_to_bf16 = v.path == KernelPath::bf16 || v.a.element == DataType::e2m1 || v.b.element == DataType::e2m1;
  return decoded_to_bf16 && t.recipe == Recipe::mxfp8 ? -80 : -125;
}

// Operands at the ends of the scale range: one drawn at 2^100, the other at 2^-125 (its ue8m0 block scales
// at and below 2^-127, clamped, so that its decoded elements times their scales are bf16 subnormals),
// then the other way round, on decode-sized groups (the register-operand kernel, for FP4 weights) and on
// larger ones. f32 output: D is about 2^-25, a subnormal in f16.
TEST_P(GpuVariantShapes, ExtremeScales) {
  SKIP_WITHOUT_GPU();
  const RecipeVariant v = variant();
  std::uint64_t seed = seed_base(350000);
  for (const bool a_small : {false, true})
    for (const std::vector<std::int32_t>& ms : {std::vector<std::int32_t>{64, 33, 1}, std::vector<std::int32_t>{129, 300, 0}}) {
      WorkloadSpec s = make_spec(v, GroupLayout::contiguous, DataType::f32, moe_groups(ms, 256, 512), ++seed);
      s.a_exponent = a_small ? smallest_exponent(v, v.a) : 100;
      s.b_exponent = a_small ? 100 : smallest_exponent(v, v.b);
      run_and_check(v, s, MemoryLocation::device);
    }
}

TEST_P(GpuVariantShapes, ManyGroups) {
  SKIP_WITHOUT_GPU();
  std::vector<std::int32_t> ms;
  std::uint64_t x = 17;
  for (int g = 0; g < 256; ++g) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    ms.push_back(static_cast<std::int32_t>((x >> 33) % 41));  // 0..40 rows, several empty
  }
  const RecipeVariant v = variant();
  std::uint64_t seed = seed_base(400000);
  run_and_check(v, make_spec(v, GroupLayout::contiguous, DataType::bf16, moe_groups(ms, 64, 160), ++seed),
                MemoryLocation::device);
  WorkloadSpec masked = make_spec(v, GroupLayout::masked, DataType::bf16, moe_groups(ms, 64, 160), ++seed);
  masked.moe_rows = 48;
  run_and_check(v, masked, MemoryLocation::host);
}

// The MoE forms with leading dimensions and batch strides past the dense ones: fp8-block128's whole-slab
// tiles leave through a tensor map of D built from them (the TMA-store epilogue), the rest through
// thread stores, in the same call (M_g = 129: two whole 64-row slabs and an edge row).
TEST_P(GpuVariantShapes, MoeFormsWithPaddedStrides) {
  SKIP_WITHOUT_GPU();
  const RecipeVariant v = variant();
  std::uint64_t seed = seed_base(450000);
  for (DataType d : {DataType::bf16, DataType::f16})
    for (GroupLayout layout : {GroupLayout::contiguous, GroupLayout::masked}) {
      WorkloadSpec s = make_spec(v, layout, d, moe_groups({129, 64, 0, 200}, 192, 256), ++seed);
      s.padded_strides = true;
      if (layout == GroupLayout::masked) s.moe_rows = 224;
      run_and_check(v, s, layout == GroupLayout::masked ? MemoryLocation::device : MemoryLocation::host);
    }
}

// A group whose tiles cost many times the others' (the reference system's example with an empty and a
// batched group added): with host-resident descriptions its tiles go first and the walk has two phases
// (core::TileOrder) where the kernel walks that order (heavy_first_walk: the decoding kernel and the FP8
// kernel's MX tiles); device-resident ones keep the plain walk. Both must cover every tile once.
TEST_P(GpuVariantShapes, HeavyGroupFirst) {
  SKIP_WITHOUT_GPU();
  const RecipeVariant v = variant();
  std::uint64_t seed = seed_base(480000);
  const std::vector<GroupShape> groups = {
      {8192, 1280, 32, 1}, {0, 64, 64, 1}, {32, 384, 1536, 1}, {640, 1280, 32, 1}, {7, 136, 96, 2}, {640, 160, 32, 1}};
  run_and_check(v, make_spec(v, GroupLayout::pointer_array, DataType::bf16, groups, ++seed), MemoryLocation::host);
  run_and_check(v, make_spec(v, GroupLayout::pointer_array, DataType::f16, groups, ++seed), MemoryLocation::device);
}

TEST(GpuShapes, OneHugeGroup) {
  SKIP_WITHOUT_GPU();
  std::uint64_t seed = 5000;
  for (const RecipeVariant& v : {recipe_variants()[0], recipe_variants()[2], recipe_variants()[6]})
    run_and_check(v, make_spec(v, GroupLayout::pointer_array, DataType::bf16, {{8192, 256, 320, 1}}, ++seed),
                  MemoryLocation::host);
}

TEST_P(GpuVariantShapes, BatchedPointerArrayWithStrides) {
  SKIP_WITHOUT_GPU();
  const RecipeVariant v = variant();
  WorkloadSpec s = make_spec(v, GroupLayout::pointer_array, DataType::f16, {{65, 130, 256, 3}, {200, 64, 160, 2}, {0, 8, 32, 4}},
                             seed_base(600000));
  s.padded_strides = true;
  run_and_check(v, s, MemoryLocation::device);
}

TEST_P(GpuVariantShapes, MMajorOutputAndBetaC) {
  SKIP_WITHOUT_GPU();
  const RecipeVariant v = variant();
  std::uint64_t seed = seed_base(700000);
  for (GroupLayout layout : {GroupLayout::pointer_array, GroupLayout::contiguous, GroupLayout::masked}) {
    WorkloadSpec s = make_spec(v, layout, DataType::bf16, moe_groups({96, 33, 0, 140}, 96, 256), ++seed);
    s.d_major = Major::m;
    s.beta = 0.75f;
    s.alpha = -1.5f;
    if (layout == GroupLayout::masked) s.moe_rows = 160;
    run_and_check(v, s, MemoryLocation::host);
    s.d_major = Major::n;
    s.seed = ++seed;
    run_and_check(v, s, MemoryLocation::device);
  }
}

TEST(GpuShapes, OffsetsWithLeadingZeroAndInt64) {
  SKIP_WITHOUT_GPU();
  const RecipeVariant v = recipe_variants()[0];
  WorkloadSpec s = make_spec(v, GroupLayout::contiguous, DataType::bf16, moe_groups({40, 300, 0, 17}, 256, 384), 8000);
  s.offsets_start_with_zero = true;
  s.offsets_type = IndexType::i64;
  run_and_check(v, s, MemoryLocation::device);
  run_and_check(v, s, MemoryLocation::host);
}

// Every tile shape the kernel is built for, forced through RunOptions (--mma-tiler-mn).
TEST_P(GpuTiles, EveryTileShape) {
  SKIP_WITHOUT_GPU();
  const RecipeVariant v = variant();
  std::uint64_t seed = seed_base(900000);
  for (const auto& tile :
       std::vector<std::pair<int, int>>{{128, 128}, {128, 64}, {64, 256}, {64, 128}, {128, 192}, {32, 256}, {32, 384}}) {
    RunOptions o;
    o.tile_m = tile.first;
    o.tile_n = tile.second;
    // can_implement's verdict on this tile for one group of m rows (256 x 256).
    const auto refusal = [&](std::int32_t m) {
      HostWorkload host;
      const Status created = HostWorkload::create(
          make_spec(v, GroupLayout::contiguous, DataType::bf16, moe_groups({m}, 256, 256), ++seed), &host);
      EXPECT_TRUE(created.ok()) << created.message;
      if (!created.ok()) return Status::error(StatusCode::internal_error, -1, "", "workload: " + created.message);
      RunOptions cuda_options = o;
      cuda_options.backend = Backend::cuda;
      cuda_options.path = v.path;
      return can_implement(host.args(), cuda_options);
    };
    const bool block128 = v.a.recipe == Recipe::fp8_block128 && v.b.recipe == Recipe::fp8_block128;
    if (tile.second == 192 && !block128) {
      // fp8-block128's own tile: every other recipe is refused before anything runs.
      const Status st = refusal(128);
      EXPECT_EQ(st.code, StatusCode::not_supported) << v.name << ": " << st.message;
      EXPECT_EQ(st.field, "tile");
      continue;
    }
    const bool fp4_weights = v.b.recipe == Recipe::mxfp4 || v.b.recipe == Recipe::nvfp4;
    const bool swappable = fp4_weights && (v.a.recipe == v.b.recipe || v.a.recipe == Recipe::mxfp8);
    if (tile.first == 32 && (!swappable || v.path == KernelPath::fp8)) {
      // 32,256 and 32,384 are the register-operand kernel's tiles: FP4 weights with mxfp8 or same-recipe tokens only
      // (else not a tile of the build), and never on the fp8 path (a tile of the build it does not use).
      const Status st = refusal(32);
      EXPECT_EQ(st.code, swappable ? StatusCode::not_supported : StatusCode::invalid_argument) << v.name << ": " << st.message;
      EXPECT_EQ(st.field, "tile");
      if (swappable) EXPECT_NE(st.message.find("register-operand"), std::string::npos) << st.message;
      continue;
    }
    if (v.path == KernelPath::bf16 && v.b.recipe == Recipe::mxfp8 && tile.first == 64 && tile.second == 256) {
      // Too few stages for 8-bit B on the decoding kernel: refused before anything runs.
      const Status st = refusal(64);
      EXPECT_EQ(st.code, StatusCode::not_supported) << st.message;
      EXPECT_EQ(st.field, "tile");
      continue;
    }
    run_and_check(v, make_spec(v, GroupLayout::contiguous, DataType::bf16, moe_groups({150, 5, 64, 0, 260}, 264, 256), ++seed),
                  MemoryLocation::device, o);
  }
}

// fp8-block128's 128 x 192 tile in every layout and output type: its odd column tiles start 64 columns
// into a 128-column block of B, so that their consumers switch B's scale inside the tile; a group's last
// column tile holds 72 (N = 456), 108 (N = 300), 8 (N = 200) or 64 (N = 64) valid columns, on either side
// of a block boundary; K ends inside a block, and C comes in through beta.
TEST(GpuShapes, Block128WideTile) {
  SKIP_WITHOUT_GPU();
  RunOptions o;
  o.tile_m = 128;
  o.tile_n = 192;
  std::uint64_t seed = 990000;
  for (std::size_t variant = 0; variant < 2; ++variant) {
    const RecipeVariant v = recipe_variants()[variant];
    for (const GroupLayout layout : {GroupLayout::contiguous, GroupLayout::masked, GroupLayout::pointer_array})
      for (const DataType d : {DataType::bf16, DataType::f16, DataType::f32}) {
        std::vector<GroupShape> groups = moe_groups({150, 5, 0, 260}, layout == GroupLayout::masked ? 300 : 456, 328);
        if (layout == GroupLayout::pointer_array)
          groups = {{150, 456, 328, 1}, {7, 200, 128, 2}, {300, 64, 72, 1}, {130, 300, 256, 1}};
        WorkloadSpec s = make_spec(v, layout, d, groups, ++seed);
        s.beta = d == DataType::f32 ? 0.5f : 0.0f;
        run_and_check(v, s, MemoryLocation::host, o);
        // Device-resident descriptions: the prepare kernel counts the 192-wide tiles.
        if (layout == GroupLayout::contiguous && d == DataType::bf16) run_and_check(v, s, MemoryLocation::device, o);
      }
  }
}

// Kernel path staged (operands staged as bf16 in the workspace, then BF16 wgmma): both MoE forms, every
// output type, mxfp8 (e4m3 and e5m2 on either side), mxfp4, nvfp4, mxfp8 x mxfp4 and mxfp8 x nvfp4,
// linear, blocked and mn-major scales where the path takes them, ragged groups, K ending inside a 32-block,
// a 16-block and an 8-element staging chunk, the planner's tile and 128 x 256 forced, host and device
// descriptions.
TEST(GpuShapes, Staged) {
  SKIP_WITHOUT_GPU();
  const std::vector<RecipeVariant> variants = {
      {"mxfp8_staged_e4m3_e4m3", fp8(Recipe::mxfp8, DataType::e4m3, DataType::ue8m0),
       fp8(Recipe::mxfp8, DataType::e4m3, DataType::ue8m0, ScaleLayout::blocked_128x4), KernelPath::staged},
      {"mxfp8_staged_e5m2_e4m3", fp8(Recipe::mxfp8, DataType::e5m2, DataType::ue8m0, ScaleLayout::mn_major),
       fp8(Recipe::mxfp8, DataType::e4m3, DataType::ue8m0, ScaleLayout::mn_major), KernelPath::staged},
      {"mxfp8_staged_e4m3_e5m2", fp8(Recipe::mxfp8, DataType::e4m3, DataType::ue8m0),
       fp8(Recipe::mxfp8, DataType::e5m2, DataType::ue8m0), KernelPath::staged},
      {"mxfp4_staged", fp8(Recipe::mxfp4, DataType::e2m1, DataType::ue8m0),
       fp8(Recipe::mxfp4, DataType::e2m1, DataType::ue8m0, ScaleLayout::blocked_128x4), KernelPath::staged},
      {"nvfp4_staged", fp8(Recipe::nvfp4, DataType::e2m1, DataType::ue4m3, ScaleLayout::mn_major),
       fp8(Recipe::nvfp4, DataType::e2m1, DataType::ue4m3, ScaleLayout::blocked_128x4), KernelPath::staged},
      {"mxfp8_x_nvfp4_staged", fp8(Recipe::mxfp8, DataType::e4m3, DataType::ue8m0),
       fp8(Recipe::nvfp4, DataType::e2m1, DataType::ue4m3), KernelPath::staged},
      {"mxfp8_x_mxfp4_staged", fp8(Recipe::mxfp8, DataType::e5m2, DataType::ue8m0, ScaleLayout::mn_major),
       fp8(Recipe::mxfp4, DataType::e2m1, DataType::ue8m0), KernelPath::staged},
  };
  std::uint64_t seed = 995000;
  for (const RecipeVariant& v : variants)
    for (const GroupLayout layout : {GroupLayout::contiguous, GroupLayout::masked})
      for (const DataType d : {DataType::bf16, DataType::f16, DataType::f32}) {
        WorkloadSpec s = make_spec(v, layout, d, moe_groups({150, 5, 0, 260}, layout == GroupLayout::masked ? 300 : 264,
                                                             layout == GroupLayout::masked ? 330 : 336),
                                   ++seed);
        s.beta = d == DataType::f32 ? 0.5f : 0.0f;
        run_and_check(v, s, MemoryLocation::host);
        if (d == DataType::bf16) {
          RunOptions wide;
          wide.tile_m = 128;
          wide.tile_n = 256;
          run_and_check(v, s, MemoryLocation::device, wide);
        }
      }
  // Both ends of the scale range the bf16 staging keeps exact (ExtremeScales' rule for mxfp8 decoded to
  // bf16), and leading dimensions and batch strides past the dense ones.
  const RecipeVariant v = variants[0];
  for (const bool a_small : {false, true}) {
    WorkloadSpec s = make_spec(v, GroupLayout::contiguous, DataType::f32, moe_groups({300, 64, 1}, 520, 1003), ++seed);
    s.a_exponent = a_small ? -80 : 100;
    s.b_exponent = a_small ? 100 : -80;
    run_and_check(v, s, MemoryLocation::host);
  }
  for (const GroupLayout layout : {GroupLayout::contiguous, GroupLayout::masked}) {
    WorkloadSpec s = make_spec(v, layout, DataType::bf16, moe_groups({70, 129}, 200, 96), ++seed);
    s.padded_strides = true;
    run_and_check(v, s, MemoryLocation::host);
  }
}

// The planner's staged choice on the GPU (PlannerRules.StagedChosenForLargeGroups has the rule): large
// groups run staged with workspace_size()'s bytes and the default path with only the default path's
// bytes, both checked against the reference.
TEST(GpuShapes, StagedByPlanner) {
  SKIP_WITHOUT_GPU();
  const RecipeVariant v{"mxfp8_auto", fp8(Recipe::mxfp8, DataType::e4m3, DataType::ue8m0),
                        fp8(Recipe::mxfp8, DataType::e4m3, DataType::ue8m0)};
  RunOptions fp8_path;
  fp8_path.backend = Backend::cuda;
  fp8_path.path = KernelPath::fp8;
  std::uint64_t seed = 996000;
  for (const GroupLayout layout : {GroupLayout::contiguous, GroupLayout::masked}) {
    const WorkloadSpec s = make_spec(v, layout, DataType::bf16, moe_groups({1024, 1000}, 512, 520), ++seed);
    HostWorkload host;
    ASSERT_TRUE(HostWorkload::create(s, &host).ok());
    RunOptions automatic;
    automatic.backend = Backend::cuda;
    ASSERT_GT(workspace_size(host.args(), automatic), workspace_size(host.args(), fp8_path)) << "the planner should stage";
    EXPECT_NE(describe_plan(host.args(), automatic).find("staged"), std::string::npos) << describe_plan(host.args(), automatic);
    run_and_check(v, s, MemoryLocation::host);
    run_and_check(v, s, MemoryLocation::device, {}, &fp8_path);
  }
}

// What kernel path staged refuses, before anything runs: the pointer-array form, and the contiguous form
// with A's scales in the blocked layout (their rows are padded per group).
TEST(GpuShapes, StagedRefusals) {
  SKIP_WITHOUT_GPU();
  RunOptions o;
  o.backend = Backend::cuda;
  o.path = KernelPath::staged;
  const RecipeVariant blocked_a{"blocked_a", fp8(Recipe::mxfp8, DataType::e4m3, DataType::ue8m0, ScaleLayout::blocked_128x4),
                                fp8(Recipe::mxfp8, DataType::e4m3, DataType::ue8m0)};
  const RecipeVariant linear{"linear", fp8(Recipe::mxfp8, DataType::e4m3, DataType::ue8m0),
                             fp8(Recipe::mxfp8, DataType::e4m3, DataType::ue8m0)};
  for (const auto& [v, layout] : std::vector<std::pair<RecipeVariant, GroupLayout>>{
           {blocked_a, GroupLayout::contiguous}, {linear, GroupLayout::pointer_array}, {recipe_variants()[0], GroupLayout::masked}}) {
    HostWorkload host;
    ASSERT_TRUE(HostWorkload::create(make_spec(v, layout, DataType::bf16, moe_groups({64, 64}, 128, 128), 990), &host).ok());
    const Status st = can_implement(host.args(), o);
    EXPECT_EQ(st.code, StatusCode::not_supported) << v.name << ": " << st.message;
    EXPECT_EQ(st.field, "path") << st.message;
  }
  // 128 x 256 belongs to the staged path.
  HostWorkload host;
  ASSERT_TRUE(HostWorkload::create(make_spec(linear, GroupLayout::contiguous, DataType::bf16, moe_groups({64}, 256, 128), 991), &host).ok());
  RunOptions fp8_path = o;
  fp8_path.path = KernelPath::fp8;
  fp8_path.tile_m = 128;
  fp8_path.tile_n = 256;
  const Status st = can_implement(host.args(), fp8_path);
  EXPECT_EQ(st.code, StatusCode::not_supported) << st.message;
  EXPECT_EQ(st.field, "tile");
}

// The indices into recipe_variants() of the variants that `keep` accepts.
template <class Keep>
std::vector<std::size_t> variants_where(Keep&& keep) {
  std::vector<std::size_t> out;
  const std::vector<RecipeVariant> all = recipe_variants();
  for (std::size_t i = 0; i < all.size(); ++i)
    if (keep(all[i])) out.push_back(i);
  return out;
}

// The variants the register-operand kernel takes: FP4 weights with mxfp8 or same-recipe tokens, off the
// fp8 path.
std::vector<std::size_t> register_operand_variants() {
  return variants_where([](const RecipeVariant& v) {
    const bool fp4_weights = v.b.recipe == Recipe::mxfp4 || v.b.recipe == Recipe::nvfp4;
    const bool tokens = v.a.recipe == v.b.recipe || v.a.recipe == Recipe::mxfp8 || v.a.recipe == Recipe::fp8_block128;
    return fp4_weights && tokens && v.path != KernelPath::fp8;
  });
}

class GpuStagedTokens : public GpuVariantTest {};

// The register-operand kernel with its tokens staged as bf16 (fp8-block128 tokens: f16) in the weights' K order
// (forced by kernel path staged with a register-operand tile): its three tiles (16 tokens too), both MoE forms,
// every output type, ragged N (264 against 256 and 384) and K (inside the first 64-deep slice, past a slice
// inside a stage, past a stage, and whole slices, which the staging pass stages in kernels of their own, short
// rows, long ones, and rows longer than a pass's lanes hold at once), empty and one-row groups, 256 groups, both
// ends of the scale range. The contiguous form with A's scales blocked, the 16-token tile without staged tokens,
// and fp8-block128 tokens on the 384-weight tile (whose consumers do not decode from the scale codes, which
// the f16 weights need), are refused before anything runs.
TEST_P(GpuStagedTokens, EveryShape) {
  SKIP_WITHOUT_GPU();
  RecipeVariant v = variant();
  v.path = KernelPath::staged;
  const bool blocked_a = v.a.scale_layout == ScaleLayout::blocked_128x4;
  std::uint64_t seed = seed_base(1200000);
  {
    // The 16-token tile is built for staged tokens only: forced without kernel path staged, it is refused.
    HostWorkload host;
    ASSERT_TRUE(HostWorkload::create(make_spec(v, GroupLayout::masked, DataType::bf16, moe_groups({16}, 256, 128), ++seed), &host).ok());
    RunOptions unstaged;
    unstaged.backend = Backend::cuda;
    unstaged.tile_m = 16;
    unstaged.tile_n = 256;
    const Status st = can_implement(host.args(), unstaged);
    EXPECT_EQ(st.code, StatusCode::not_supported) << st.message;
    EXPECT_EQ(st.field, "tile") << st.message;
  }
  // Kernel path staged with tile `o` refused for a small call of `layout`, naming `field`.
  const auto expect_refused = [&](GroupLayout layout, const RunOptions& o, const char* field) {
    HostWorkload host;
    ASSERT_TRUE(HostWorkload::create(make_spec(v, layout, DataType::bf16, moe_groups({16}, 256, 128), ++seed), &host).ok());
    RunOptions cuda_options = o;
    cuda_options.backend = Backend::cuda;
    cuda_options.path = KernelPath::staged;
    const Status st = can_implement(host.args(), cuda_options);
    EXPECT_EQ(st.code, StatusCode::not_supported) << st.message;
    EXPECT_EQ(st.field, field) << st.message;
  };
  const bool f16_tokens = v.a.recipe == Recipe::fp8_block128;
  for (const auto& [tile_m, tile_n] : std::vector<std::pair<int, int>>{{16, 256}, {32, 256}, {32, 384}}) {
    RunOptions o;
    o.tile_m = tile_m;
    o.tile_n = tile_n;
    if (f16_tokens && tile_n == 384) {
      expect_refused(GroupLayout::masked, o, "tile");
      continue;
    }
    for (const GroupLayout layout : {GroupLayout::contiguous, GroupLayout::masked}) {
      if (layout == GroupLayout::contiguous && blocked_a) {
        expect_refused(layout, o, "path");
        continue;
      }
      for (const auto& [d, k] : std::vector<std::pair<DataType, std::int32_t>>{
               {DataType::f32, 48},
               {DataType::f16, 376},
               {DataType::bf16, 200},
               {DataType::bf16, 320},
               {DataType::bf16, 4160},
               {DataType::f32, 8256}}) {
        // K = 4160: the whole-slices pass's long rows (520 chunks, four a lane over 130 lanes; stage_bf16.cu); 8256:
        // 1032 chunks over 256 lanes, a second round of chunks a row. One tile is enough for the pass.
        if (k >= 4160 && (tile_m != 32 || tile_n != 256)) continue;
        WorkloadSpec spec = make_spec(v, layout, d, moe_groups({64, 33, 1, 0, 17}, 264, k), ++seed);
        if (layout == GroupLayout::masked) spec.moe_rows = 72;
        HostWorkload host;
        ASSERT_TRUE(HostWorkload::create(spec, &host).ok());
        RunOptions cuda_options = o;
        cuda_options.backend = Backend::cuda;
        cuda_options.path = KernelPath::staged;
        EXPECT_NE(describe_plan(host.args(), cuda_options).find("tokens staged"), std::string::npos)
            << describe_plan(host.args(), cuda_options);
        run_and_check(v, spec, k == 376 ? MemoryLocation::host : MemoryLocation::device, o);
      }
    }
    if (blocked_a) continue;
    std::vector<std::int32_t> ms;
    std::uint64_t x = 23;
    for (int g = 0; g < 256; ++g) {
      x = x * 6364136223846793005ull + 1442695040888963407ull;
      ms.push_back(static_cast<std::int32_t>((x >> 33) % 33));  // 0..32 rows, several empty
    }
    run_and_check(v, make_spec(v, GroupLayout::contiguous, DataType::bf16, moe_groups(ms, 64, 160), ++seed),
                  MemoryLocation::device, o);
    for (const bool a_small : {false, true}) {
      WorkloadSpec s = make_spec(v, GroupLayout::contiguous, DataType::f32, moe_groups({32, 31, 1}, 256, 512), ++seed);
      s.a_exponent = a_small ? smallest_exponent(v, v.a) : 100;
      s.b_exponent = a_small ? 100 : smallest_exponent(v, v.b);
      run_and_check(v, s, MemoryLocation::device, o);
    }
  }
}

// The planner's own choice: decode-sized groups whose tokens are few against the weights run with staged
// tokens given workspace_size()'s bytes (64 tokens a tile here), and with the records' bytes only they
// decode the tokens on chip; both checked against the reference.
TEST_P(GpuStagedTokens, ChosenByPlanner) {
  SKIP_WITHOUT_GPU();
  const RecipeVariant v = variant();
  RunOptions records_only;
  records_only.backend = Backend::cuda;
  records_only.path = KernelPath::fp8;
  std::uint64_t seed = seed_base(1300000);
  for (const GroupLayout layout : {GroupLayout::contiguous, GroupLayout::masked}) {
    if (layout == GroupLayout::contiguous && v.a.scale_layout == ScaleLayout::blocked_128x4) continue;  // refused above
    WorkloadSpec s = make_spec(v, layout, DataType::bf16, moe_groups({64, 33, 1, 0, 50}, 4096, 200), ++seed);
    if (layout == GroupLayout::masked) s.moe_rows = 64;
    HostWorkload host;
    ASSERT_TRUE(HostWorkload::create(s, &host).ok());
    RunOptions automatic;
    automatic.backend = Backend::cuda;
    automatic.path = v.path;
    ASSERT_GT(workspace_size(host.args(), automatic), workspace_size(host.args(), records_only));
    const std::string plan = describe_plan(host.args(), automatic);
    EXPECT_NE(plan.find("tokens staged"), std::string::npos) << plan;
    EXPECT_NE(plan.find("tile 64x256"), std::string::npos) << plan;
    run_and_check(v, s, MemoryLocation::host);
    run_and_check(v, s, MemoryLocation::device, {}, &records_only);
    // The 64-token tile on ragged N (the last tile's 8 weights) and K (past a stage, inside a slice); f16 out, and
    // f32 at both ends of the scale range in the contiguous form (fp8-block128 tokens' mx32 weights: every slice
    // of the extreme operand outside f16's window, added in fp32).
    for (const int end : {0, 1, 2}) {
      if (end > 0 && layout == GroupLayout::masked) continue;
      WorkloadSpec ragged = make_spec(v, layout, end == 0 ? DataType::f16 : DataType::f32,
                                      moe_groups({64, 40, 1, 0, 33}, 4104, 376), ++seed);
      if (layout == GroupLayout::masked) ragged.moe_rows = 64;
      if (end == 1) ragged.a_exponent = smallest_exponent(v, v.a), ragged.b_exponent = 100;
      if (end == 2) ragged.a_exponent = 100, ragged.b_exponent = smallest_exponent(v, v.b);
      HostWorkload ragged_host;
      ASSERT_TRUE(HostWorkload::create(ragged, &ragged_host).ok());
      const std::string ragged_plan = describe_plan(ragged_host.args(), automatic);
      EXPECT_NE(ragged_plan.find("tile 64x256"), std::string::npos) << ragged_plan;
      run_and_check(v, ragged, MemoryLocation::device);
    }
    // At most 16 rows a group: the 16-token tile.
    WorkloadSpec small = make_spec(v, layout, DataType::f16, moe_groups({16, 9, 1, 0, 16, 3}, 4096, 200), ++seed);
    if (layout == GroupLayout::masked) small.moe_rows = 16;
    HostWorkload small_host;
    ASSERT_TRUE(HostWorkload::create(small, &small_host).ok());
    const std::string small_plan = describe_plan(small_host.args(), automatic);
    EXPECT_NE(small_plan.find("tile 16x256"), std::string::npos) << small_plan;
    run_and_check(v, small, MemoryLocation::device);
  }
}

// Weights whose block scales straddle an end of f16's window for mx32 scales (codes 108 .. 132, scales 2^-19 ..
// 32: src/core/scale_codes.hpp): with fp8-block128 tokens (f16 operands) a warp's slice whose codes all lie inside
// is multiplied in F16 wgmma, any other is added in fp32 (mainloop_swapped.cuh's add_slice_in_fp32), both in one
// tile; the other variants run the same inputs as one more pair of scale ranges. K = 1024: the weights' block
// scales are 2^(u - 6 + b_exponent) for u in -3 .. 3 and a block maximum of 2 to 4 (codes 118 + b_exponent .. 125 +
// b_exponent), so b_exponent 9 and -13 put some codes past each end. The planner's 64-, 32- and 16-token tiles,
// both MoE forms, f32 out.
TEST_P(GpuStagedTokens, ScalesAcrossTheF16Window) {
  SKIP_WITHOUT_GPU();
  const RecipeVariant v = variant();
  std::uint64_t seed = seed_base(1350000);
  for (const GroupLayout layout : {GroupLayout::contiguous, GroupLayout::masked}) {
    if (layout == GroupLayout::contiguous && v.a.scale_layout == ScaleLayout::blocked_128x4) continue;
    for (const int b_exponent : {9, -13})
      for (const std::vector<std::int32_t>& ms :
           {std::vector<std::int32_t>{64, 40, 1}, std::vector<std::int32_t>{32, 17}, std::vector<std::int32_t>{16, 3}}) {
        WorkloadSpec s = make_spec(v, layout, DataType::f32, moe_groups(ms, 3336, 1024), ++seed);
        s.b_exponent = b_exponent;
        HostWorkload host;
        ASSERT_TRUE(HostWorkload::create(s, &host).ok());
        RunOptions automatic;
        automatic.backend = Backend::cuda;
        automatic.path = v.path;
        const std::string plan = describe_plan(host.args(), automatic);
        EXPECT_NE(plan.find("tokens staged"), std::string::npos) << plan;
        EXPECT_NE(plan.find("tile " + std::to_string(ms[0]) + "x"), std::string::npos) << plan;
        run_and_check(v, s, MemoryLocation::host);
      }
  }
}

// The planner's 64-token tile splits its last round of tiles over K (core::StreamKSplit; N = 4096: 16 tiles a
// group) where the host counts the tiles and the last round is at most half full: one group's 16 tiles of 32
// k-blocks, each over eight CTAs (seven partials added by its owner); four groups' 64 tiles over ragged K (1100:
// 9 k-blocks, the last partial) and ragged rows; nine groups' 144 tiles, a whole round on 132 SMs before the
// split. Both MoE forms, every result checked against the reference; device-resident descriptions (no count on
// the host) walk whole tiles.
TEST_P(GpuStagedTokens, StreamKSplitsTheLastRound) {
  SKIP_WITHOUT_GPU();
  const RecipeVariant v = variant();
  RunOptions automatic;
  automatic.backend = Backend::cuda;
  automatic.path = v.path;
  std::uint64_t seed = seed_base(1400000);
  struct Case {
    GroupLayout layout;
    std::vector<std::int32_t> ms;
    std::int32_t k;
    MemoryLocation descriptions;
  };
  for (const Case& c : std::vector<Case>{{GroupLayout::masked, {64}, 4096, MemoryLocation::host},
                                         {GroupLayout::contiguous, {64, 33, 1, 0, 50}, 1100, MemoryLocation::host},
                                         {GroupLayout::masked, {64, 33, 1, 0, 50}, 1100, MemoryLocation::host},
                                         {GroupLayout::contiguous, std::vector<std::int32_t>(9, 64), 1024, MemoryLocation::host},
                                         {GroupLayout::contiguous, {64, 33, 1, 0, 50}, 1100, MemoryLocation::device}}) {
    if (c.layout == GroupLayout::contiguous && v.a.scale_layout == ScaleLayout::blocked_128x4) continue;  // not staged
    WorkloadSpec s = make_spec(v, c.layout, DataType::bf16, moe_groups(c.ms, 4096, c.k), ++seed);
    if (c.layout == GroupLayout::masked) s.moe_rows = 64;
    HostWorkload host;
    ASSERT_TRUE(HostWorkload::create(s, &host).ok());
    const std::string plan = describe_plan(host.args(), automatic);
    EXPECT_NE(plan.find("tokens staged"), std::string::npos) << plan;
    EXPECT_NE(plan.find("tile 64x256"), std::string::npos) << plan;
    // The cases' last rounds are at most half full on 132 SMs (H100 SXM, H200); device-resident counts are not
    // the host's.
    GemmArguments described = host.args();
    described.descriptions = c.descriptions;
    const std::string split_plan = describe_plan(described, automatic);
    if (c.descriptions == MemoryLocation::device) EXPECT_EQ(split_plan.find("stream-K"), std::string::npos) << split_plan;
    else if (library_sms() == 132) EXPECT_NE(split_plan.find("stream-K"), std::string::npos) << split_plan;
    run_and_check(v, s, c.descriptions);
  }
}

// B's scale tensor of a MoE-form call as the kernel reads it: its rows, leading dimension and batch stride
// in elements, the dense defaults where the arguments give 0 (core::resolve_moe_whole's).
struct ScaleStrides {
  std::int64_t rows = 0, ld = 0, batch_stride = 0;
};
ScaleStrides b_scale_strides(const GemmArguments& a) {
  const core::ResolvedGroup whole = core::resolve_moe_whole(core::make_call_spec(a), a.moe);
  return {scale_rows(a.b_type.recipe, Operand::b, a.moe.n), whole.sfb.ld, whole.sfb.batch_stride};
}

// Whether a TMA box can bring B's scale codes: a MoE form, B's scales linear, their base 16-byte aligned,
// their row and batch strides multiples of 16 bytes (the tile's width is the plan's part of the rule).
bool b_scale_codes_tma_aligned(const GemmArguments& a) {
  if (a.layout == GroupLayout::pointer_array || a.b_type.scale_layout != ScaleLayout::linear) return false;
  const ScaleStrides s = b_scale_strides(a);
  const std::int64_t bytes = core::scale_bytes(a.b_type.scale);
  return reinterpret_cast<std::uintptr_t>(a.moe.sfb) % 16 == 0 && s.ld * bytes % 16 == 0 && s.batch_stride * bytes % 16 == 0;
}

// The tile a plan's text names ("kernel: tile 32x384x128": {32, 384}); {0, 0} where it names none.
std::pair<int, int> planned_tile(const std::string& plan) {
  const std::string marker = "kernel: tile ";
  const std::size_t at = plan.find(marker);
  if (at == std::string::npos) return {0, 0};
  const std::string rest = plan.substr(at + marker.size());
  std::size_t used = 0;
  const int m = std::stoi(rest, &used);
  return {m, std::stoi(rest.substr(used + 1))};
}

// The register-operand kernel with staged tokens has B's scale codes brought by TMA, not by the scale-loader
// warps, exactly where one box can carry them: a MoE form, a 256-weight tile (16, 32 or 64 tokens; never
// 32x384), B's scales linear with a 16-byte aligned base and row and batch strides of whole 16 bytes. Each
// ragged problem runs twice from one seed, so that both ways compute the same result: B's scale rows dense
// (K = 200 and 376: 13 and 24 nv16 codes, 7 and 12 mx32 codes, the loaders) and padded to whole 16 bytes
// (TMA); K = 1024 (64 or 32 codes) takes TMA dense too. Both MoE forms, on the tiles kernel path staged forces
// and on the planner's own (N large enough that staging the tokens pays), every run checked against the
// reference; each alignment rule broken alone is checked on the plan only (the buffers stay where they are).
TEST_P(GpuStagedTokens, ScaleCodesByTmaAndByLoaders) {
  SKIP_WITHOUT_GPU();
  const RecipeVariant v = variant();
  RecipeVariant staged = v;
  staged.path = KernelPath::staged;
  const bool blocked_a = v.a.scale_layout == ScaleLayout::blocked_128x4;
  const bool linear_b = v.b.scale_layout == ScaleLayout::linear;
  const bool f16_tokens = v.a.recipe == Recipe::fp8_block128;
  std::uint64_t seed = seed_base(1400000);
  // Checks `args`' plan under `options` against the rule; returns the plan.
  const auto expect_rule = [&](const GemmArguments& args, const RunOptions& options) {
    const std::string plan = describe_plan(args, options);
    EXPECT_NE(plan.find("tokens staged"), std::string::npos) << plan;
    const auto [tile_m, tile_n] = planned_tile(plan);
    const bool by_tma = plan.find("B's scale codes by TMA") != std::string::npos;
    EXPECT_EQ(by_tma, tile_n == 256 && b_scale_codes_tma_aligned(args)) << plan;
    return plan;
  };
  const auto cuda_options_for = [](const RecipeVariant& run_v, const RunOptions& o) {
    RunOptions cuda_options = o;
    cuda_options.backend = Backend::cuda;
    cuda_options.path = run_v.path;
    return cuda_options;
  };
  // One ragged problem with B's scale rows dense, then padded: planned by the rule, run and checked.
  // `tile_m`: the tokens a tile the plan must name (0: any).
  const auto both_ways = [&](const RecipeVariant& run_v, const RunOptions& o, GroupLayout layout,
                             const std::vector<GroupShape>& groups, std::int64_t moe_rows, int tile_m) {
    ++seed;
    const std::int64_t codes = scale_cols(v.b.recipe, groups[0].k);
    for (const bool padded : {false, true}) {
      WorkloadSpec spec = make_spec(run_v, layout, DataType::bf16, groups, seed);
      spec.moe_rows = moe_rows;
      spec.padded_strides = padded;
      HostWorkload host;
      ASSERT_TRUE(HostWorkload::create(spec, &host).ok());
      EXPECT_EQ(b_scale_codes_tma_aligned(host.args()), linear_b && (padded || codes % 16 == 0))
          << codes << " codes a row, padded " << padded;
      const std::string plan = expect_rule(host.args(), cuda_options_for(run_v, o));
      if (tile_m != 0) {
        EXPECT_EQ(planned_tile(plan).first, tile_m) << plan;
      }
      run_and_check(run_v, spec, padded ? MemoryLocation::device : MemoryLocation::host, o);
    }
  };
  for (const auto& [tile_m, tile_n] : std::vector<std::pair<int, int>>{{16, 256}, {32, 256}, {32, 384}}) {
    if (f16_tokens && tile_n == 384) continue;  // refused (EveryShape)
    RunOptions o;
    o.tile_m = tile_m;
    o.tile_n = tile_n;
    for (const GroupLayout layout : {GroupLayout::contiguous, GroupLayout::masked}) {
      if (layout == GroupLayout::contiguous && blocked_a) continue;  // refused (EveryShape)
      for (const std::int32_t k : {200, 376, 1024})
        both_ways(staged, o, layout, moe_groups({64, 33, 1, 0, 17}, 264, k), layout == GroupLayout::masked ? 72 : 0, tile_m);
    }
  }
  // The planner's tiles: 64 tokens, 32 (384 weights wide for mx32 weights, but for fp8-block128 tokens) and 16.
  // N = 3336: the masked form's staging pass (5 x 64 rows) stays under an eighth of the weights' bytes.
  for (const GroupLayout layout : {GroupLayout::contiguous, GroupLayout::masked}) {
    if (layout == GroupLayout::contiguous && blocked_a) continue;
    for (const auto& [ms, tile_m] : std::vector<std::pair<std::vector<std::int32_t>, int>>{
             {{64, 33, 1, 0, 17}, 64}, {{32, 17, 1, 0, 9}, 32}, {{16, 9, 1, 0, 3}, 16}})
      for (const std::int32_t k : {200, 1024}) both_ways(v, {}, layout, moe_groups(ms, 3336, k), 0, tile_m);
  }
  if (!linear_b) return;
  // One rule broken at a time on a call that otherwise takes TMA.
  WorkloadSpec spec = make_spec(staged, GroupLayout::masked, DataType::bf16, moe_groups({16, 5}, 264, 1024), ++seed);
  spec.padded_strides = true;
  HostWorkload host;
  ASSERT_TRUE(HostWorkload::create(spec, &host).ok());
  RunOptions sixteen;
  sixteen.tile_m = 16;
  sixteen.tile_n = 256;
  const RunOptions cuda_options = cuda_options_for(staged, sixteen);
  ASSERT_TRUE(b_scale_codes_tma_aligned(host.args()));
  expect_rule(host.args(), cuda_options);
  const ScaleStrides strides = b_scale_strides(host.args());
  GemmArguments misaligned = host.args();
  misaligned.moe.sfb = static_cast<const std::uint8_t*>(misaligned.moe.sfb) + 8;
  GemmArguments odd_ld = host.args();
  odd_ld.moe.sfb_ld = strides.ld + 8;
  odd_ld.moe.sfb_batch_stride = round_up(strides.rows * odd_ld.moe.sfb_ld, 16);
  GemmArguments odd_batch_stride = host.args();
  odd_batch_stride.moe.sfb_batch_stride = strides.batch_stride + 8;
  for (const GemmArguments* args : {&misaligned, &odd_ld, &odd_batch_stride}) {
    EXPECT_FALSE(b_scale_codes_tma_aligned(*args));
    expect_rule(*args, cuda_options);
  }
}

// ---- the register-operand kernel that decodes its own tokens --------------------------------------------

// The variants whose pointer-array calls of decode size run the register-operand kernel with its tokens decoded
// on chip (no staging pass): FP4 weights with same-recipe or mxfp8 tokens.
std::vector<std::size_t> token_decoding_variants() {
  return variants_where([](const RecipeVariant& v) {
    const bool fp4_weights = v.b.recipe == Recipe::mxfp4 || v.b.recipe == Recipe::nvfp4;
    return fp4_weights && (v.a.recipe == v.b.recipe || v.a.recipe == Recipe::mxfp8) && v.path != KernelPath::fp8;
  });
}

class GpuTokenDecoding : public GpuVariantTest {};

// Pointer-array groups of decode size with more tiles than CTAs, so that each CTA's raw stages go round the ring
// many times and into its next tiles while the scale loaders and TMA run ahead. Its consumers once released a
// stage while some of their shared loads of it were still in flight, and a loader's next turn overwrote scales
// before they were read (bench/NOTES.md session 40): with nv16 weights, 32-token tiles (22 groups of 16 tokens,
// 12 tiles each) failed every run, the 64-token tiles now and then. The scales are linear, as in those runs: the
// loaders' one vector load per row and chunk lets them run furthest ahead.
TEST_P(GpuTokenDecoding, StagesReusedAcrossTiles) {
  SKIP_WITHOUT_GPU();
  RecipeVariant v = variant();
  v.a.scale_layout = ScaleLayout::linear;
  v.b.scale_layout = ScaleLayout::linear;
  std::uint64_t seed = seed_base(1600000);
  for (const GroupShape shape : {GroupShape{16, 3072, 4096, 1}, GroupShape{64, 1024, 1024, 1}}) {
    const WorkloadSpec s =
        make_spec(v, GroupLayout::pointer_array, DataType::bf16, std::vector<GroupShape>(shape.m == 16 ? 44 : 40, shape), ++seed);
    HostWorkload host;
    ASSERT_TRUE(HostWorkload::create(s, &host).ok());
    RunOptions options;
    options.backend = Backend::cuda;
    options.path = v.path;
    const std::string plan = describe_plan(host.args(), options);
    EXPECT_NE(plan.find("FP4 weights in wgmma registers"), std::string::npos) << plan;
    EXPECT_EQ(plan.find("tokens staged"), std::string::npos) << plan;
    run_and_check(v, s, MemoryLocation::host);
  }
}

// ---- ue4m3 scale codes with the sign bit set ------------------------------------------------------------

std::vector<std::size_t> ue4m3_variants() {
  return variants_where([](const RecipeVariant& v) { return v.a.scale == DataType::ue4m3 || v.b.scale == DataType::ue4m3; });
}

class GpuUe4m3Scales : public GpuVariantTest {};

// nvfp4's block scale is e4m3 with the sign bit ignored (README, "Formats"): every other stored code of each ue4m3
// operand gets the bit set, and the result must be the reference's, which ignores it. The register-operand kernel
// lifts only codes stored with the bit clear (src/core/scale_codes.hpp) and takes the others through its fp32 path;
// the cases reach it with the codes by TMA (K = 1024, linear rows of whole 16 codes) and by the scale loaders
// (K = 200: 13 codes a row; the blocked and mn-major layouts), and the other kernels on larger and pointer-array
// groups.
TEST_P(GpuUe4m3Scales, TheSignBitIsIgnored) {
  SKIP_WITHOUT_GPU();
  const RecipeVariant v = variant();
  std::uint64_t seed = seed_base(1500000);
  const auto set_sign_bits = [&](HostWorkload& w) {
    int edited = 0;
    for (testing::Buffer& b : w.buffers()) {
      const bool sfa = b.name.rfind("SFA", 0) == 0 && v.a.scale == DataType::ue4m3;
      const bool sfb = b.name.rfind("SFB", 0) == 0 && v.b.scale == DataType::ue4m3;
      if (!sfa && !sfb) continue;
      for (std::size_t i = 0; i < b.bytes; i += 2) b.get()[i] |= 0x80u;
      edited += b.bytes > 0;
    }
    EXPECT_GT(edited, 0) << "no ue4m3 scale buffer";
  };
  for (const std::int32_t k : {200, 1024})
    run_and_check(v, make_spec(v, GroupLayout::masked, DataType::bf16, moe_groups({64, 33, 1, 0, 17}, 3336, k), ++seed),
                  MemoryLocation::host, {}, nullptr, set_sign_bits);
  run_and_check(v, make_spec(v, GroupLayout::contiguous, DataType::f32, moe_groups({300, 129, 0, 7}, 512, 384), ++seed),
                MemoryLocation::device, {}, nullptr, set_sign_bits);
  run_and_check(v, make_spec(v, GroupLayout::pointer_array, DataType::f16, {{77, 150, 200, 1}, {130, 64, 96, 2}}, ++seed),
                MemoryLocation::host, {}, nullptr, set_sign_bits);
}

// ---- fp8-block128 tokens staged as f16 ------------------------------------------------------------------

std::vector<std::size_t> f16_token_variants() {
  return variants_where([](const RecipeVariant& v) {
    return v.a.recipe == Recipe::fp8_block128 && (v.b.recipe == Recipe::mxfp4 || v.b.recipe == Recipe::nvfp4);
  });
}

class GpuF16Tokens : public GpuVariantTest {};

// The f16 staging pass divides each token row by the power of two its scales' bound gives (448 x the row's largest
// |s|) and stages the row again where its largest value lies more than core::kBlock128BoundSlack binades lower
// (core::block128_row_exponent). Every third row here has its first block's codes zeroed under a scale 2^40 times
// its own: staged with the bound's power of two, the row's other blocks would round to f16 zeros and its outputs
// fail the check; the other rows stay as drawn (amax / 448 scales: the bound's power of two). Whole slices (K = 1024,
// 7168) and K's tail (1000), both MoE forms, the planner's tile for 64 tokens and the 16-token one.
TEST_P(GpuF16Tokens, RowsFarBelowTheirScalesBound) {
  SKIP_WITHOUT_GPU();
  RecipeVariant v = variant();
  v.path = KernelPath::staged;
  std::uint64_t seed = seed_base(1700000);
  // A's rows a batch (the masked form's max_m, the contiguous form's sum), with the strides' dense defaults.
  const auto lift_zeroed_blocks = [&](HostWorkload& w) {
    const MoeGroups& moe = w.args().moe;
    ASSERT_EQ(v.a.scale, DataType::f32);
    const ScaleLayout layout = v.a.scale_layout;
    const std::int64_t batches = w.args().layout == GroupLayout::masked ? moe.num_groups : 1;
    const std::int64_t cols = scale_cols(Recipe::fp8_block128, moe.k);
    const std::int64_t lda = core::or_default(moe.lda, moe.k);
    const std::int64_t batch_stride_a = core::or_default(moe.batch_stride_a, moe.rows * lda);
    const std::int64_t sfa_ld = core::or_default(moe.sfa_ld, default_scale_ld(layout, moe.rows, cols));
    const std::int64_t sfa_batch_stride =
        core::or_default(moe.sfa_batch_stride, core::dense_scale_batch_stride(layout, moe.rows, cols, sfa_ld));
    auto* codes = static_cast<std::uint8_t*>(const_cast<void*>(moe.a));
    auto* scales = static_cast<float*>(const_cast<void*>(moe.sfa));
    int edited = 0;
    for (std::int64_t batch = 0; batch < batches; ++batch)
      for (std::int64_t row = 0; row < moe.rows; row += 3) {
        std::uint8_t* first = codes + batch * batch_stride_a + row * lda;
        std::fill(first, first + std::min<std::int64_t>(128, moe.k), std::uint8_t{0});
        scales[batch * sfa_batch_stride + scale_offset(layout, row, 0, cols, sfa_ld)] *= 0x1p40f;
        ++edited;
      }
    EXPECT_GT(edited, 0);
  };
  for (const GroupLayout layout : {GroupLayout::masked, GroupLayout::contiguous})
    for (const auto& [tile_m, k] : std::vector<std::pair<int, std::int32_t>>{{32, 1024}, {16, 1000}, {32, 7168}}) {
      RunOptions o;
      o.tile_m = tile_m;
      o.tile_n = 256;
      const WorkloadSpec spec = make_spec(v, layout, DataType::f32, moe_groups({64, 31, 1, 0, 16}, 264, k), ++seed);
      HostWorkload host;
      ASSERT_TRUE(HostWorkload::create(spec, &host).ok());
      RunOptions cuda_options = o;
      cuda_options.backend = Backend::cuda;
      cuda_options.path = v.path;
      const std::string plan = describe_plan(host.args(), cuda_options);
      EXPECT_NE(plan.find("tokens staged"), std::string::npos) << plan;
      run_and_check(v, spec, MemoryLocation::host, o, nullptr, lift_zeroed_blocks);
    }
}

INSTANTIATE_TEST_SUITE_P(Gpu, GpuStagedTokens, ::testing::ValuesIn(register_operand_variants()), variant_name);
INSTANTIATE_TEST_SUITE_P(Gpu, GpuF16Tokens, ::testing::ValuesIn(f16_token_variants()), variant_name);
INSTANTIATE_TEST_SUITE_P(Gpu, GpuTokenDecoding, ::testing::ValuesIn(token_decoding_variants()), variant_name);
INSTANTIATE_TEST_SUITE_P(Gpu, GpuUe4m3Scales, ::testing::ValuesIn(ue4m3_variants()), variant_name);
INSTANTIATE_TEST_SUITE_P(Gpu, GpuMatrix, ::testing::Range<std::size_t>(0, recipe_variants().size()), variant_name);
INSTANTIATE_TEST_SUITE_P(Gpu, GpuVariantShapes, ::testing::Range<std::size_t>(0, recipe_variants().size()), variant_name);
INSTANTIATE_TEST_SUITE_P(Gpu, GpuTiles, ::testing::Range<std::size_t>(0, recipe_variants().size()), variant_name);

// ---- device-side descriptions, validation and CUDA graphs -------------------------------------------

TEST(GpuDeviceSide, InvalidDeviceSizesAreReportedAndNothingIsWritten) {
  SKIP_WITHOUT_GPU();
  const RecipeVariant v = recipe_variants()[0];
  WorkloadSpec s = make_spec(v, GroupLayout::masked, DataType::bf16, moe_groups({10, 20, 30, 40, 50}, 128, 256), 10000);
  s.moe_rows = 64;
  HostWorkload host;
  ASSERT_TRUE(HostWorkload::create(s, &host).ok());
  DeviceWorkload device;
  RunOptions o;
  o.backend = Backend::cuda;
  ASSERT_TRUE(DeviceWorkload::create(host, MemoryLocation::device, o, 1, &device).ok());
  const std::int32_t bad = 65;  // masked_m[3] > max_m
  ASSERT_EQ(cudaMemcpy(const_cast<std::int32_t*>(device.args().moe.masked_m) + 3, &bad, sizeof bad, cudaMemcpyHostToDevice),
            cudaSuccess);
  ASSERT_TRUE(device.poison_output().ok());
  ASSERT_TRUE(device.run(o).ok());
  const Status status = device_status(device.workspace());
  EXPECT_EQ(status.code, StatusCode::device_error);
  EXPECT_EQ(status.group, 3);
  EXPECT_EQ(status.field, "masked_m");
  EXPECT_NE(status.message.find("group 3"), std::string::npos) << status.message;
  host.poison_output();
  ASSERT_TRUE(device.download_output(host).ok());
  for (const testing::Buffer& b : host.buffers())
    if (b.name == "D")
      for (std::size_t i = 0; i < b.bytes; ++i) ASSERT_EQ(b.get()[i], 0xFF) << "D was written after a failed validation";

  // A pointer-array group with a device-side N of 0 is reported the same way.
  WorkloadSpec p = make_spec(v, GroupLayout::pointer_array, DataType::bf16, {{64, 128, 256, 1}, {64, 128, 256, 1}}, 10001);
  HostWorkload host2;
  ASSERT_TRUE(HostWorkload::create(p, &host2).ok());
  DeviceWorkload device2;
  ASSERT_TRUE(DeviceWorkload::create(host2, MemoryLocation::device, o, 1, &device2).ok());
  const std::int32_t zero = 0;
  ASSERT_EQ(cudaMemcpy(reinterpret_cast<std::uint8_t*>(const_cast<GroupProblem*>(device2.args().groups) + 1) +
                           offsetof(GroupProblem, n),
                       &zero, sizeof zero, cudaMemcpyHostToDevice),
            cudaSuccess);
  ASSERT_TRUE(device2.run(o).ok());
  const Status status2 = device_status(device2.workspace());
  EXPECT_EQ(status2.code, StatusCode::device_error);
  EXPECT_EQ(status2.group, 1);
  EXPECT_EQ(status2.field, "n");

  // A pointer-array group whose M x N make more tiles than the walks' 32-bit arithmetic takes (2^31 - 1, every
  // other field valid): refused from a host-resident description before anything runs, and reported by the
  // prepare kernel from a device-resident one.
  const RecipeVariant linear = recipe_variants()[1];  // scales K-major: their leading dimensions do not grow with M
  const WorkloadSpec q = make_spec(linear, GroupLayout::pointer_array, DataType::bf16, {{64, 128, 256, 1}, {64, 128, 256, 1}}, 10002);
  for (const MemoryLocation where : {MemoryLocation::host, MemoryLocation::device}) {
    HostWorkload host3;
    ASSERT_TRUE(HostWorkload::create(q, &host3).ok());
    DeviceWorkload device3;
    ASSERT_TRUE(DeviceWorkload::create(host3, where, o, 1, &device3).ok());
    auto* group1 = const_cast<GroupProblem*>(device3.args().groups) + 1;
    GroupProblem huge;
    if (where == MemoryLocation::host) huge = *group1;
    else ASSERT_EQ(cudaMemcpy(&huge, group1, sizeof huge, cudaMemcpyDeviceToHost), cudaSuccess);
    huge.m = 1 << 23;  // 2^16 row tiles at most
    huge.n = 1 << 24;  // 2^16 column tiles at least, D 2^47 elements
    huge.ldd = 1 << 24;
    if (where == MemoryLocation::host) *group1 = huge;
    else ASSERT_EQ(cudaMemcpy(group1, &huge, sizeof huge, cudaMemcpyHostToDevice), cudaSuccess);
    Status st = device3.run(o);
    if (where == MemoryLocation::device) {
      ASSERT_TRUE(st.ok()) << st.message;
      st = device_status(device3.workspace());
      EXPECT_EQ(st.code, StatusCode::device_error);
    } else {
      EXPECT_FALSE(st.ok());
    }
    EXPECT_EQ(st.group, 1) << st.message;
    EXPECT_EQ(st.field, "m") << st.message;
    EXPECT_NE(st.message.find("2^31 - 1"), std::string::npos) << st.message;
  }
}

// The whole call is captured in a CUDA graph, then replayed after new group sizes are written into the
// same device arrays; each replay is checked against the reference for its sizes.
TEST(GpuDeviceSide, CudaGraphCaptureAndReplayWithNewSizes) {
  SKIP_WITHOUT_GPU();
  // The staged path too: its staging pass and GEMM kernel captured together.
  const RecipeVariant staged{"nvfp4_staged", fp8(Recipe::nvfp4, DataType::e2m1, DataType::ue4m3),
                             fp8(Recipe::nvfp4, DataType::e2m1, DataType::ue4m3, ScaleLayout::blocked_128x4),
                             KernelPath::staged};
  for (const RecipeVariant& v : {recipe_variants()[0], recipe_variants()[3], recipe_variants()[7], staged})
    for (GroupLayout layout : {GroupLayout::contiguous, GroupLayout::masked}) {
      WorkloadSpec s = make_spec(v, layout, DataType::bf16, moe_groups({100, 3, 64, 250}, 192, 256), 11000);
      s.moe_rows = layout == GroupLayout::masked ? 256 : 512;
      HostWorkload host;
      ASSERT_TRUE(HostWorkload::create(s, &host).ok());
      RunOptions o;
      o.backend = Backend::cuda;
      o.path = v.path;
      DeviceWorkload device;
      ASSERT_TRUE(DeviceWorkload::create(host, MemoryLocation::device, o, 1, &device).ok());
      cudaStream_t stream;
      ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
      cudaGraph_t graph;
      ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), cudaSuccess);
      const Status captured = device.run(o, 0, stream);
      ASSERT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
      ASSERT_TRUE(captured.ok()) << captured.message;
      cudaGraphExec_t exec;
      ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);

      const std::vector<std::vector<std::int32_t>> sizes = {{100, 3, 64, 250}, {0, 200, 1, 129}, {256, 0, 0, 7}};
      for (const auto& ms : sizes) {
        // New sizes, written to the host copy (for the reference) and the device arrays the graph reads.
        const GemmArguments& ha = host.args();
        if (layout == GroupLayout::masked) {
          auto* h = const_cast<std::int32_t*>(ha.moe.masked_m);
          std::copy(ms.begin(), ms.end(), h);
          ASSERT_EQ(cudaMemcpy(const_cast<std::int32_t*>(device.args().moe.masked_m), h, ms.size() * 4, cudaMemcpyHostToDevice),
                    cudaSuccess);
        } else {
          auto* h = static_cast<std::int32_t*>(const_cast<void*>(ha.moe.offsets));
          std::int32_t end = 0;
          for (std::size_t g = 0; g < ms.size(); ++g) h[g] = (end += ms[g]);
          ASSERT_EQ(cudaMemcpy(const_cast<void*>(device.args().moe.offsets), h, ms.size() * 4, cudaMemcpyHostToDevice),
                    cudaSuccess);
        }
        ASSERT_TRUE(device.poison_output(stream).ok());
        ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
        ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
        ASSERT_TRUE(device_status(device.workspace(), stream).ok());
        host.poison_output();
        ASSERT_TRUE(device.download_output(host).ok());
        ExpectedOutput expected;
        ASSERT_TRUE(testing::expected_output(host, true, 0, &expected).ok());
        const CheckReport report = check_output(host.args(), expected);
        EXPECT_TRUE(report.pass) << v.name << " replay: " << report.summary();
        expect_untouched(host);
      }
      cudaGraphExecDestroy(exec);
      cudaGraphDestroy(graph);
      cudaStreamDestroy(stream);
    }
}

// ---- errors before launch ------------------------------------------------------------------------------

TEST(GpuErrors, UnsupportedOnTheCudaBackEndIsReportedBeforeLaunch) {
  SKIP_WITHOUT_GPU();
  WorkloadSpec s = make_spec(recipe_variants()[0], GroupLayout::pointer_array, DataType::bf16, {{64, 64, 128, 1}}, 12000);
  HostWorkload host;
  ASSERT_TRUE(HostWorkload::create(s, &host).ok());
  RunOptions o;
  o.backend = Backend::cuda;
  DeviceWorkload device;
  ASSERT_TRUE(DeviceWorkload::create(host, MemoryLocation::host, o, 1, &device).ok());
  o.tile_m = 96;
  o.tile_n = 128;
  Status st = device.run(o);
  EXPECT_EQ(st.code, StatusCode::invalid_argument);
  EXPECT_EQ(st.field, "tile");
  o = RunOptions{};
  o.backend = Backend::cuda;
  o.cluster_m = 3;
  st = device.run(o);
  EXPECT_EQ(st.code, StatusCode::invalid_argument);
  EXPECT_EQ(st.field, "cluster");
  GemmArguments a = device.args();
  a.a_major = Major::m;
  st = run(a, RunOptions{Backend::cuda}, device.workspace(), device.workspace_bytes());
  EXPECT_EQ(st.code, StatusCode::not_supported);
  EXPECT_EQ(st.field, "a_major");
  // fp8-block128 has no bf16 path.
  o = RunOptions{};
  o.backend = Backend::cuda;
  o.path = KernelPath::bf16;
  st = device.run(o);
  EXPECT_EQ(st.code, StatusCode::not_supported);
  EXPECT_EQ(st.field, "path");
}

// The reduced suite compute-sanitizer runs (memcheck, racecheck, synccheck): every recipe variant, every
// description form, ragged edges, small enough to run under instrumentation.
TEST(GpuSanitize, SmallEveryRecipeAndLayout) {
  SKIP_WITHOUT_GPU();
  std::uint64_t seed = 13000;
  for (const RecipeVariant& v : recipe_variants()) {
    run_and_check(v, make_spec(v, GroupLayout::contiguous, DataType::bf16, moe_groups({33, 0, 70}, 136, 200), ++seed),
                  MemoryLocation::device);
    WorkloadSpec masked = make_spec(v, GroupLayout::masked, DataType::f16, moe_groups({5, 64}, 72, 160), ++seed);
    masked.moe_rows = 80;
    run_and_check(v, masked, MemoryLocation::host);
    run_and_check(v, make_spec(v, GroupLayout::pointer_array, DataType::f32, {{40, 72, 96, 2}, {130, 24, 288, 1}}, ++seed),
                  MemoryLocation::device);
  }
  // The register-operand kernel reading staged tokens (the planner's choice, and kernel path staged with its
  // tiles), FP8 and FP4 tokens.
  for (const std::size_t i : register_operand_variants()) {
    RecipeVariant v = recipe_variants()[i];
    if (v.a.scale_layout == ScaleLayout::blocked_128x4) continue;
    // The planner's 64-token tile (fp8-block128 tokens: their two-warpgroup instantiation), staged tokens.
    run_and_check(v, make_spec(v, GroupLayout::contiguous, DataType::bf16, moe_groups({64, 40, 0}, 4096, 200), ++seed),
                  MemoryLocation::device);
    v.path = KernelPath::staged;
    RunOptions tile;
    tile.tile_m = 32;
    tile.tile_n = 256;
    run_and_check(v, make_spec(v, GroupLayout::contiguous, DataType::bf16, moe_groups({33, 0, 7}, 264, 200), ++seed),
                  MemoryLocation::device, tile);
    RunOptions tile16 = tile;
    tile16.tile_m = 16;
    run_and_check(v, make_spec(v, GroupLayout::contiguous, DataType::f16, moe_groups({17, 0, 5}, 136, 200), ++seed),
                  MemoryLocation::device, tile16);
    WorkloadSpec masked = make_spec(v, GroupLayout::masked, DataType::f32, moe_groups({5, 32}, 72, 160), ++seed);
    masked.moe_rows = 40;
    run_and_check(v, masked, MemoryLocation::host, tile);
  }
  // The staged path (its staging pass and the BF16 GEMM), FP8 and FP4 operands, a K tail inside a chunk.
  for (const RecipeVariant& v :
       {RecipeVariant{"mxfp8_staged", fp8(Recipe::mxfp8, DataType::e4m3, DataType::ue8m0),
                      fp8(Recipe::mxfp8, DataType::e5m2, DataType::ue8m0), KernelPath::staged},
        RecipeVariant{"nvfp4_staged", fp8(Recipe::nvfp4, DataType::e2m1, DataType::ue4m3),
                      fp8(Recipe::nvfp4, DataType::e2m1, DataType::ue4m3, ScaleLayout::blocked_128x4), KernelPath::staged}}) {
    run_and_check(v, make_spec(v, GroupLayout::contiguous, DataType::bf16, moe_groups({33, 0, 70}, 136, 202), ++seed),
                  MemoryLocation::device);
    WorkloadSpec masked = make_spec(v, GroupLayout::masked, DataType::f32, moe_groups({5, 64}, 72, 160), ++seed);
    masked.moe_rows = 80;
    run_and_check(v, masked, MemoryLocation::host);
  }
}

}  // namespace
}  // namespace bsgemm
