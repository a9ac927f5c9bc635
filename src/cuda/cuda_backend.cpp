// The sm_90a back end, host side: what it accepts, which kernel configuration runs (config as data,
// chosen by choose_plan()), tensor-map encoding, the group records and the launches: the persistent
// GEMM alone where the descriptions are host-resident (the records are built here and copied), the
// prepare kernel first where they live in device memory. Nothing here synchronises with the device
// except device_status().
#include "src/cuda/cuda_backend.hpp"

#include <cuda.h>
#include <cuda_runtime.h>
#include <cudaTypedefs.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <numeric>
#include <string>
#include <vector>

#include "src/core/group_checks.hpp"
#include "src/core/resolved_group.hpp"
#include "src/core/validate.hpp"
#include "src/cpu/host_groups.hpp"
#include "src/cuda/sm90/group_records.hpp"
#include "src/cuda/sm90/launch.hpp"
#include "src/cuda/sm90/params.hpp"
#include "src/cuda/sm90/tma_limits.hpp"

namespace bsgemm::cuda {

namespace {

constexpr int kTileBand = 8;  // N-blocks per band of the tile order (see core/tile_scheduler.hpp)

Status cuda_failure(cudaError_t e, const char* what) {
  return Status::error(StatusCode::cuda_error, -1, "", std::string(what) + ": " + cudaGetErrorString(e));
}

// The kernel configuration of one call, and why it was chosen.
struct Plan {
  KernelChoice kernel;
  std::int64_t small_rows = 0;  // decode-sized groups (typical M <= 64): their largest row count, else 0
  std::int64_t n_max = 0;       // the largest group N the host can see (1 << 30 when unknown)
  int grid = 0;
  int stages = 0;
  bool scale_codes_by_tma = false;  // B's scale codes come by TMA (scale_codes_by_tma_applies)
  std::string reason;
};

bool is_block128(const GemmArguments& a) {
  return a.a_type.recipe == Recipe::fp8_block128 && a.b_type.recipe == Recipe::fp8_block128;
}
bool is_mxfp8(const GemmArguments& a) { return a.a_type.recipe == Recipe::mxfp8 && a.b_type.recipe == Recipe::mxfp8; }
// FP4 runs where it shares the MX kernel: e2m1 widens exactly to e4m3 and keeps its ue8m0 scales per 32.
bool is_mx_with_fp4(const GemmArguments& a) {
  return a.b_type.recipe == Recipe::mxfp4 && (a.a_type.recipe == Recipe::mxfp4 || a.a_type.recipe == Recipe::mxfp8);
}
bool is_packed(const OperandType& t) { return t.element == DataType::e2m1; }
bool is_fp4(Recipe r) { return r == Recipe::mxfp4 || r == Recipe::nvfp4; }

// What the FP8 kernel runs: FP8 wgmma with the scales applied in fp32 per scale block.
bool fp8_path_runs(const GemmArguments& a) { return is_block128(a) || is_mxfp8(a) || is_mx_with_fp4(a); }
// What the decoding kernel runs: FP4 weights with FP8 activations (mxfp8 or fp8-block128) or FP4
// activations of the same recipe, and mxfp8 (kernel_decode_*.cu instantiate these).
bool bf16_path_runs(const GemmArguments& a) {
  const Recipe ra = a.a_type.recipe, rb = a.b_type.recipe;
  return (is_fp4(rb) && (ra == rb || ra == Recipe::mxfp8 || ra == Recipe::fp8_block128)) || is_mxfp8(a);
}
// Decode-sized groups with FP4 weights go to the register-operand kernel (kernel_swapped.cu instantiates
// FP4 weights with mxfp8 tokens or tokens of the weights' own recipe).
bool swapped_runs(const GemmArguments& a) {
  const Recipe ra = a.a_type.recipe, rb = a.b_type.recipe;
  return is_fp4(rb) && (ra == rb || ra == Recipe::mxfp8);
}

// fp8-block128 tokens with FP4 weights run on the register-operand kernel only staged, as f16 with their fp32
// scales folded in (rounded; kernel_traits_swapped.cuh's kF16): the MoE forms, which the staging pass covers,
// with A's scales at A's own rows (the contiguous form's blocked SFA pads each group to 128 rows, which only the
// group records know).
bool f16_tokens_runs(const GemmArguments& a) {
  return a.a_type.recipe == Recipe::fp8_block128 && is_fp4(a.b_type.recipe) && a.layout != GroupLayout::pointer_array &&
         !(a.layout == GroupLayout::contiguous && a.a_type.scale_layout == ScaleLayout::blocked_128x4);
}

// What the staged path runs (KernelPath::staged): A and B each mxfp8, mxfp4 or nvfp4 (whose scales fold
// into bf16 exactly; fp8-block128's fp32 scales would not; of their pairs the API takes the same-recipe
// ones and mxfp8 x FP4), in the MoE forms, where A and B are one tensor
// each and a row's scales sit at its own row (the contiguous form's blocked SFA pads each group to 128
// rows, which only the group records know).
bool staged_runs(const GemmArguments& a) {
  const auto stageable = [](Recipe r) { return r == Recipe::mxfp8 || r == Recipe::mxfp4 || r == Recipe::nvfp4; };
  if (!stageable(a.a_type.recipe) || !stageable(a.b_type.recipe) || a.layout == GroupLayout::pointer_array) return false;
  return !(a.layout == GroupLayout::contiguous && a.a_type.scale_layout == ScaleLayout::blocked_128x4);
}

// Whether the register-operand kernel can read this call's tokens staged: tokens whose scales fold into bf16
// where the staged path runs, or fp8-block128 tokens (f16_tokens_runs).
bool tokens_stage_runs(const GemmArguments& a) { return (swapped_runs(a) && staged_runs(a)) || f16_tokens_runs(a); }

// Bytes per element as stored: FP4 codes pack two to a byte.
double code_bytes(const OperandType& t) { return is_packed(t) ? 0.5 : 1.0; }

// The rows of A a staging pass writes in the MoE forms: the contiguous form's rows, the masked form's whole
// capacity (the pass cannot see masked_m).
std::int64_t staged_a_rows(const GemmArguments& args) {
  return std::max<std::int64_t>(args.moe.rows, 0) * (args.layout == GroupLayout::masked ? args.moe.num_groups : 1);
}

std::size_t align256(std::size_t x) { return (x + 255) / 256 * 256; }

// Whether the register-operand kernel reads its tokens staged as bf16 in the weights' K order
// (kernel_traits_swapped.cuh) where the workspace holds them: the MoE forms, with A's scales at A's own rows
// (as staged_runs asks), where the pass's bytes (A's rows, the masked form's whole capacity, read and
// written as bf16) are at most an eighth of the FP4 weights' bytes, which bound the kernel. A masked
// capacity far above the tokens it holds (the pass cannot see masked_m) keeps the tokens decoded on chip.
bool tokens_stageable(const GemmArguments& a) {
  if (!tokens_stage_runs(a)) return false;
  const double pass_bytes = static_cast<double>(staged_a_rows(a)) * static_cast<double>(a.moe.k) * (code_bytes(a.a_type) + 2.0);
  const double weight_bytes = 0.5 * static_cast<double>(a.moe.num_groups) * a.moe.n * static_cast<double>(a.moe.k);
  return pass_bytes <= weight_bytes / 8;
}

int sm_count();

// The workspace's staged tokens (after workspace_layout's part): A as rows x weights_order_ld(K) bf16 (f16 for
// fp8-block128 tokens) per batch (one batch contiguous, num_groups masked), fp8-block128 tokens' powers of two
// (one fp32 a row: KernelParams::token_factors), then the register-operand kernel's stream-K partials and their
// flags, one each per multiprocessor (KernelParams::partials).
struct StagedTokens {
  std::size_t a = 0, factors = 0, partials = 0, flags = 0, end = 0;  // byte offsets into the workspace
  std::int64_t ld = 0;                                               // elements per staged row
};
StagedTokens staged_tokens(const GemmArguments& args, std::size_t base) {
  StagedTokens t;
  t.ld = weights_order_ld(args.moe.k);
  t.a = align256(base);
  const int sms = sm_count();
  const std::size_t rows = static_cast<std::size_t>(staged_a_rows(args));
  t.factors = align256(t.a + rows * static_cast<std::size_t>(t.ld) * 2);
  t.partials = align256(t.factors + (f16_tokens_runs(args) ? rows * sizeof(float) : 0));
  t.flags = t.partials + stream_k_flags_offset(sms);
  t.end = t.partials + stream_k_workspace(sms);
  return t;
}

// Kernel path staged with a register-operand tile (16,256, 32,256 or 32,384) asks for that kernel with its
// tokens staged, whatever the bytes (the weights stay 4-bit).
bool tokens_staged_by_name(const GemmArguments& args, const RunOptions& options) {
  return options.path == KernelPath::staged &&
         (forcible_swapped_tile(options.tile_m, options.tile_n) || staged_tokens_tile(options.tile_m, options.tile_n)) &&
         tokens_stage_runs(args);
}

// The register-operand kernel's tiles that kernel path staged may force for fp8-block128 tokens (not the 384-weight
// tile: kernel_swapped.cuh; the 64-token tile is the planner's choice only, as for other tokens).
bool f16_tokens_tile(int block_m, int block_n) { return (block_m == 16 || block_m == 32) && block_n == 256; }

// The register-operand kernel's tokens per tile for decode-sized groups of at most small_rows rows.
int swapped_tile_tokens(std::int64_t small_rows) { return small_rows <= 32 ? 32 : 64; }

// The workspace's staged operands (after workspace_layout's part): A as rows x staged_ld(K) bf16 per batch
// (one batch contiguous, num_groups masked), B as num_groups x N x staged_ld(K).
struct StagedBuffers {
  std::size_t a = 0, b = 0, end = 0;  // byte offsets into the workspace
  std::int64_t ld = 0;                // elements per staged row
};
StagedBuffers staged_buffers(const GemmArguments& args, std::size_t base) {
  StagedBuffers s;
  s.ld = staged_ld(args.moe.k);
  const std::size_t row_bytes = static_cast<std::size_t>(s.ld) * 2;
  s.a = align256(base);
  s.b = align256(s.a + static_cast<std::size_t>(staged_a_rows(args)) * row_bytes);
  s.end = align256(s.b + static_cast<std::size_t>(args.moe.num_groups) * static_cast<std::size_t>(std::max(args.moe.n, 0)) *
                             row_bytes);
  return s;
}

// One operand of the MoE forms for launch_stage_bf16: `batches` x `rows` x k elements `ld` apart, their
// scales, and the bf16 copy at `dst` (rows staged_ld elements apart, batches `rows` rows apart).
StageOperand stage_operand(const OperandType& type, const void* data, std::int64_t rows, std::int64_t k, std::int64_t ld,
                           std::int64_t batches, std::int64_t batch_stride, const void* scales, std::int64_t scale_ld,
                           std::int64_t scale_batch_stride, std::uint8_t* dst, std::int64_t dst_ld) {
  StageOperand op;
  op.src = static_cast<const std::uint8_t*>(data);
  op.element = type.element;
  op.nv16 = type.recipe == Recipe::nvfp4;
  op.rows = rows;
  op.k = k;
  op.ld = ld;
  op.batches = batches;
  op.batch_stride = batch_stride;
  op.scales = static_cast<const std::uint8_t*>(scales);
  op.scale_type = type.scale;
  op.scale_layout = type.scale_layout;
  op.scale_ld = scale_ld;
  op.scale_batch_stride = scale_batch_stride;
  op.dst = reinterpret_cast<std::uint16_t*>(dst);
  op.dst_ld = dst_ld;
  op.dst_batch_stride = dst_ld * rows;
  return op;
}

// The planner's path: the FP8 kernel for fp8-block128, mxfp8 and mxfp8 x mxfp4 (where it measured
// faster: bench/NOTES.md version 7), the decoding kernel for the rest, mxfp4 included (239 against 195
// TFLOP/s prefill and even at decode shapes once the scale loaders kept pace: version 8).
bool use_bf16_path(const GemmArguments& a, const RunOptions& options) {
  if (options.path != KernelPath::automatic) return options.path == KernelPath::bf16;
  const bool fp4_activations = is_packed(a.a_type);
  return !fp8_path_runs(a) || fp4_activations;
}

ScaleGranularity granularity_of(Recipe r) {
  switch (r) {
    case Recipe::fp8_block128: return ScaleGranularity::block128;
    case Recipe::nvfp4: return ScaleGranularity::nv16;
    default: return ScaleGranularity::mx32;
  }
}

ptx::Fp8Kind fp8_kind(DataType t) { return t == DataType::e5m2 ? ptx::Fp8Kind::e5m2 : ptx::Fp8Kind::e4m3; }

// What run() needs to know of the current device. A device's properties never change, so each is
// read once per process (run() would otherwise query them several times per call).
struct DeviceFacts {
  bool sm90 = false;
  int sm_count = 0;
};

constexpr int kMaxDevices = 64;

const DeviceFacts* current_device_facts() {
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess || device < 0 || device >= kMaxDevices) {
    cudaGetLastError();
    return nullptr;
  }
  static std::once_flag once[kMaxDevices];
  static DeviceFacts facts[kMaxDevices];
  std::call_once(once[device], [device] {
    int major = 0, minor = 0, count = 0;
    const bool read = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) == cudaSuccess &&
                      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device) == cudaSuccess &&
                      cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device) == cudaSuccess;
    if (!read) cudaGetLastError();
    facts[device] = DeviceFacts{read && major == 9 && minor == 0, read ? count : 0};
  });
  return &facts[device];
}

int sm_count() {
  const DeviceFacts* facts = current_device_facts();
  return facts == nullptr ? 0 : facts->sm_count;
}

// Row counts of the groups when the host can see them; empty when they live on the device.
std::vector<std::int64_t> host_group_rows(const GemmArguments& args) {
  std::vector<std::int64_t> rows;
  if (args.descriptions != MemoryLocation::host) return rows;
  for (const core::ResolvedGroup& g : cpu::resolve_host_groups(args)) rows.push_back(g.m);
  return rows;
}

// The tiles of `args` for choosing fp8-block128's tile width: per group where the host sees the rows (`rows`
// from host_group_rows), else the MoE forms' groups at their average (contiguous) or largest (masked) row
// count; nothing for device-resident pointer arrays, which keep 128 x 128.
Block128TileWork block128_work(const GemmArguments& args, const std::vector<std::int64_t>& rows) {
  Block128TileWork work;
  const bool moe = args.layout != GroupLayout::pointer_array;
  if (!rows.empty()) {
    for (std::size_t g = 0; g < rows.size(); ++g)
      work.add(rows[g], moe ? args.moe.n : args.groups[g].n, moe ? args.moe.k : args.groups[g].k);
  } else if (moe && args.moe.num_groups > 0) {
    const std::int64_t m = args.layout == GroupLayout::masked ? args.moe.rows : args.moe.rows / args.moe.num_groups;
    work.add(m, args.moe.n, args.moe.k, args.moe.num_groups);
  }
  return work;
}

// The tile shape. Groups of at most 64 rows (decode) would waste half of a 128-row tile, and they are
// bandwidth-bound, so they get 64-row tiles that are 256 wide (both consumer warpgroups share the rows
// and split the columns). Everything else gets 128 x 128. "Small" is judged by where the work is:
// the share of multiply-adds in groups of <= 64 rows.
void choose_tile(const GemmArguments& args, Plan* plan) {
  std::int64_t typical_m = 0;
  const std::vector<std::int64_t> rows = host_group_rows(args);
  if (!rows.empty()) {
    double small = 0, all = 0;
    for (std::size_t g = 0; g < rows.size(); ++g) {
      const double n = args.layout == GroupLayout::pointer_array ? args.groups[g].n : args.moe.n;
      const double k = args.layout == GroupLayout::pointer_array ? args.groups[g].k : args.moe.k;
      const double work = static_cast<double>(std::max<std::int64_t>(rows[g], 0)) * n * k;
      all += work;
      if (rows[g] <= 64) small += work;
    }
    typical_m = (all > 0 && small > 0.5 * all) ? 64 : 128;
    if (typical_m == 64)
      for (std::int64_t m : rows) plan->small_rows = std::max(plan->small_rows, std::min<std::int64_t>(m, 64));
    plan->reason = "host-visible group sizes";
  } else if (args.expected_m > 0) {
    typical_m = args.expected_m;
    plan->reason = "expected_m hint";
  } else if (args.layout == GroupLayout::masked) {
    typical_m = args.moe.rows;
    plan->reason = "masked max_m";
  } else if (args.layout == GroupLayout::contiguous && args.moe.num_groups > 0) {
    typical_m = args.moe.rows / args.moe.num_groups;
    plan->reason = "rows per group on average";
  } else {
    typical_m = 128;
    plan->reason = "default";
  }
  std::int64_t n_max = 0;
  if (args.layout != GroupLayout::pointer_array) n_max = args.moe.n;
  else if (args.descriptions == MemoryLocation::host)
    for (int g = 0; g < args.num_groups; ++g) n_max = std::max<std::int64_t>(n_max, args.groups[g].n);
  else
    n_max = 1 << 30;
  plan->n_max = n_max;
  if (typical_m <= 64) {
    if (plan->small_rows == 0) plan->small_rows = std::max<std::int64_t>(typical_m, 1);
    plan->kernel.block_m = 64;
    plan->kernel.block_n = n_max <= 128 ? 128 : 256;
  } else {
    plan->kernel.block_m = 128;
    plan->kernel.block_n = n_max <= 64 ? 64 : 128;
    if (is_block128(args) && !plan->kernel.decode && block128_work(args, rows).wide_pays(sm_count())) {
      plan->kernel.block_n = 192;
      plan->reason += "; 128 x 192 (fewer bytes per multiply-add)";
    }
  }
}

// Whether the staged path beats the default one for this call, by a cost model whose rates were measured
// on the H200 (bench/NOTES.md version 14): the default kernels run the MX and NV recipes at about
// default_flops_per_s when compute bound and read their operands at hbm_bytes_per_s when memory bound; the
// staged path first moves its bytes (FP8 or FP4 codes read, bf16 written) at staging_bytes_per_s, then its
// BF16 GEMM runs at staged_flops_per_s. The pass stages all of A (the contiguous form's rows, the masked
// form's capacity); the multiply-adds count the groups' rows where the host sees them, else expected_m per
// group, else A's rows. Staging pays from about 270 rows per group at N = 4096.
struct StagedCostModel {
  double default_flops_per_s = 320e12;
  double hbm_bytes_per_s = 4.0e12;
  double staging_bytes_per_s = 3.3e12;
  double staged_flops_per_s = 760e12;
};

bool staged_pays(const GemmArguments& args, const StagedCostModel& model = {}) {
  const double a_rows = static_cast<double>(staged_a_rows(args));
  const double b_rows = static_cast<double>(args.moe.num_groups) * args.moe.n;
  const double k = static_cast<double>(args.moe.k);
  double rows = a_rows;
  if (const std::vector<std::int64_t> host_rows = host_group_rows(args); !host_rows.empty())
    rows = static_cast<double>(std::accumulate(host_rows.begin(), host_rows.end(), std::int64_t{0}));
  else if (args.expected_m > 0)
    rows = static_cast<double>(args.expected_m) * args.moe.num_groups;
  const double flops = 2.0 * rows * args.moe.n * k;
  const double read = (a_rows * code_bytes(args.a_type) + b_rows * code_bytes(args.b_type)) * k;
  const double unstaged = std::max(flops / model.default_flops_per_s, read / model.hbm_bytes_per_s);
  const double staged = (read + 2.0 * (a_rows + b_rows) * k) / model.staging_bytes_per_s + flops / model.staged_flops_per_s;
  return staged < unstaged;
}

// Whether the planner, left to choose (automatic path, no tile override), takes the staged path given
// enough workspace.
bool staged_chosen(const GemmArguments& args, const RunOptions& options) {
  return options.path == KernelPath::automatic && options.tile_m == 0 && options.tile_n == 0 && staged_runs(args) &&
         staged_pays(args);
}

// Whether the kernel of a choice is the register-operand one reading staged tokens (with their scales folded
// in, or fp8-block128 ones without).
bool reads_staged_tokens(const KernelChoice& k) {
  return k.swapped && (k.a_scales == ScaleGranularity::staged || k.a_scales == ScaleGranularity::block128);
}

// The register-operand kernel of `plan` reading its tokens staged as bf16 (kernel_traits_swapped.cuh).
void read_staged_tokens(Plan* plan, bool tile_chosen) {
  const bool f16 = plan->kernel.a_scales == ScaleGranularity::block128;
  if (!f16) plan->kernel.a_scales = ScaleGranularity::staged;
  plan->kernel.a_packed = false;
  plan->reason += f16 ? ", tokens staged as f16 in their K order, their fp32 scales folded in (rounded to f16)"
                      : ", tokens staged as bf16 in their K order";
  if (tile_chosen && plan->small_rows <= 16) {
    // Groups of at most 16 rows: wgmma's N at 16 halves the tensor work and the tokens' bytes of 32.
    plan->kernel.block_m = 16;
    plan->kernel.block_n = 256;
    plan->reason += ", 16 tokens a tile";
  } else if (tile_chosen && f16) {
    plan->kernel.block_m = swapped_tile_tokens(plan->small_rows);  // 256 weights a tile (kernel_swapped.cuh)
    plan->kernel.block_n = 256;
  }
  plan->stages = swapped_stages(plan->kernel);
}

// The plan before the workspace is known: the register-operand kernel reads staged tokens only where kernel
// path staged asks for them (plan_with_workspace adds the planner's own choice).
Plan choose_plan(const GemmArguments& args, const RunOptions& options) {
  Plan plan;
  plan.kernel.scales = is_block128(args) ? ScaleGranularity::block128 : ScaleGranularity::mx32;
  plan.kernel.a = fp8_kind(args.a_type.element);
  plan.kernel.b = fp8_kind(args.b_type.element);
  plan.kernel.a_packed = is_packed(args.a_type);
  plan.kernel.b_packed = is_packed(args.b_type);
  plan.kernel.decode = use_bf16_path(args, options);
  plan.kernel.a_scales = granularity_of(args.a_type.recipe);
  plan.kernel.b_scales = granularity_of(args.b_type.recipe);
  const bool tokens_forced = tokens_staged_by_name(args, options);
  const bool forced_swap = forcible_swapped_tile(options.tile_m, options.tile_n) || tokens_forced;
  const bool staged = options.path == KernelPath::staged && !tokens_forced;
  if (staged) {
    // The GEMM kernel sees the bf16 copies: no packed operands, no scales.
    plan.kernel.scales = ScaleGranularity::staged;
    plan.kernel.a_packed = plan.kernel.b_packed = false;
  }
  if (options.tile_m != 0 || options.tile_n != 0) {
    plan.kernel.block_m = options.tile_m;
    plan.kernel.block_n = options.tile_n;
    plan.reason = "--mma-tiler-mn override";
  } else {
    choose_tile(args, &plan);
    if (staged && plan.kernel.block_m == 128 && plan.n_max > 128) {
      plan.kernel.block_n = 256;
      plan.reason += "; 128 x 256 for bf16 operands (L2 bytes per multiply-add)";
    }
  }
  const auto stages_of = [](const KernelChoice& k) {
    return k.decode ? std::max(decode_fp4_stages(k), decode_mixed_stages(k)) : fp8_kernel_stages(k);
  };
  // Decode-sized groups with FP4 weights: the register-operand kernel, 32 or 64 tokens per tile.
  if ((swapped_runs(args) || tokens_forced) && options.path != KernelPath::fp8 && !staged &&
      (forced_swap || (options.tile_m == 0 && plan.small_rows > 0))) {
    plan.kernel.swapped = true;
    plan.kernel.decode = true;
    if (!forced_swap) {
      plan.kernel.block_m = swapped_tile_tokens(plan.small_rows);
      plan.kernel.block_n = swapped_tile_weights(plan.kernel.block_m, plan.n_max, plan.kernel.b_scales);
    }
    plan.reason += "; FP4 weights in wgmma registers";
    plan.stages = swapped_stages(plan.kernel);
    plan.grid = sm_count();
    if (tokens_forced) read_staged_tokens(&plan, false);
    return plan;
  }
  plan.stages = stages_of(plan.kernel);
  if (plan.stages == 0 && options.tile_m == 0 && plan.kernel.block_m == 64 && plan.kernel.block_n == 256) {
    // 64x256 leaves the decoding kernel too few stages with 8-bit B: the next tile of the same shape class.
    plan.kernel.block_n = 128;
    plan.reason += "; 64x256 does not fit the decoding kernel with 8-bit B";
    plan.stages = stages_of(plan.kernel);
  }
  plan.grid = sm_count();
  return plan;
}

std::string supported_tiles() {
  std::string s;
  for (const auto& t : kTiles) s += (s.empty() ? "" : ", ") + std::to_string(t[0]) + "," + std::to_string(t[1]);
  return s;
}

// ---- tensor maps ---------------------------------------------------------------------------------

PFN_cuTensorMapEncodeTiled_v12000 encode_function() {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult found{};
  if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &found) != cudaSuccess ||
      found != cudaDriverEntryPointSuccess)
    return nullptr;
  return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(fn);
}

// A 3-D map over the bytes of an operand: dims (K in bytes, rows, batches), the box one k-block of
// `box_rows` rows, zero fill outside the tensor. For the FP8 kernel FP8 operands land 128-byte swizzled
// (what the wgmma descriptors expect); FP4 operands (64 bytes per k-block row), and every operand of the
// decoding kernel, land plainly, to be widened or decoded on chip. ld and batch_stride are in elements.
Status encode_operand_map(CUtensorMap* map, DataType element, const void* data, std::int64_t k, std::int64_t rows,
                          std::int64_t batches, std::int64_t ld, std::int64_t batch_stride, int box_rows, bool decode) {
  static const PFN_cuTensorMapEncodeTiled_v12000 encode = encode_function();
  if (encode == nullptr)
    return Status::error(StatusCode::cuda_error, -1, "", "the driver does not provide cuTensorMapEncodeTiled");
  const bool packed = bits_of(element) == 4;
  const std::int64_t ld_bytes = bytes_for(element, ld), batch_bytes = bytes_for(element, batch_stride);
  const cuuint64_t dims[3] = {static_cast<cuuint64_t>(std::max<std::int64_t>(bytes_for(element, k), 1)),
                              static_cast<cuuint64_t>(std::max<std::int64_t>(rows, 1)),
                              static_cast<cuuint64_t>(std::max<std::int64_t>(batches, 1))};
  const cuuint64_t strides[2] = {static_cast<cuuint64_t>(ld_bytes), static_cast<cuuint64_t>(batch_bytes)};
  const cuuint32_t box[3] = {packed ? 64u : 128u, static_cast<cuuint32_t>(box_rows), 1};
  const cuuint32_t element_strides[3] = {1, 1, 1};
  const CUresult r = encode(map, CU_TENSOR_MAP_DATA_TYPE_UINT8, 3, const_cast<void*>(data), dims, strides, box,
                            element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE,
                            packed || decode ? CU_TENSOR_MAP_SWIZZLE_NONE : CU_TENSOR_MAP_SWIZZLE_128B,
                            CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS)
    return Status::error(StatusCode::cuda_error, -1, "", "cuTensorMapEncodeTiled failed with CUresult " + std::to_string(r));
  return Status::success();
}

// Whether the call's D is one the TMA-store epilogues write: 16-bit, n-major, without C (TMA stores do not
// read it).
bool tma_stores_write(const GemmArguments& args) {
  return !args.has_c && args.d_major == Major::n && args.d_type != DataType::f32;
}

// The K up to which the call's groups write D through the TMA-store epilogue's boxes (tma_store_max_k), or
// -1 where the call's D is not one they write.
std::int64_t output_map_max_k(const GemmArguments& args, const KernelChoice& kernel) {
  return tma_stores_write(args) ? tma_store_max_k(kernel.swapped, kernel.decode, kernel.scales) : -1;
}

// A map of 16-bit n-major D for the TMA-store epilogues: (N, rows, batches), 128-byte swizzled, boxes of 64
// columns by `box_rows` rows; strides in bytes. TMA clips each store at the map's extents.
bool encode_output_box_map(CUtensorMap* map, void* d, std::int64_t n, std::int64_t rows, std::int64_t batches,
                           std::int64_t ld_bytes, std::int64_t batch_bytes, int box_rows) {
  static const PFN_cuTensorMapEncodeTiled_v12000 encode = encode_function();
  if (encode == nullptr) return false;
  const cuuint64_t dims[3] = {static_cast<cuuint64_t>(n), static_cast<cuuint64_t>(rows), static_cast<cuuint64_t>(batches)};
  const cuuint64_t strides[2] = {static_cast<cuuint64_t>(ld_bytes), static_cast<cuuint64_t>(batch_bytes)};
  const cuuint32_t box[3] = {kEpilogueBoxColumns, static_cast<cuuint32_t>(box_rows), 1};
  const cuuint32_t element_strides[3] = {1, 1, 1};
  return encode(map, CU_TENSOR_MAP_DATA_TYPE_UINT16, 3, d, dims, strides, box, element_strides,
                CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_NONE,
                CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

// The output map of the TMA-store epilogues for the MoE forms (KernelParams::d_map): D as (N, rows, batches)
// in boxes of 64 rows (the FP8 and decoding kernels' tiles, epilogue.cuh's tma_store_warpgroup_tile) or of
// the tile's tokens (the register-operand kernel's staged-token tiles 256 weights wide, store_transposed_slab).
// False where neither applies (tma_stores_write, tma_store_max_k) or TMA cannot address D (alignment, stride
// limits); the other epilogues then write every tile.
bool encode_output_map(CUtensorMap* map, const GemmArguments& args, const KernelChoice& kernel,
                       const core::ResolvedGroup& whole) {
  if (!tma_stores_write(args)) return false;
  const bool transposed_slabs = kernel.swapped && reads_staged_tokens(kernel) && transposed_slab_stores(kernel.block_n);
  const bool boxes = args.moe.k <= tma_store_max_k(kernel.swapped, kernel.decode, kernel.scales);
  if (!(transposed_slabs || boxes)) return false;
  const bool masked = args.layout == GroupLayout::masked;
  const std::int64_t rows = std::max<std::int64_t>(args.moe.rows, 1);
  const std::int64_t ld_bytes = 2 * whole.d.ld;
  const std::int64_t batch_bytes = masked ? 2 * whole.d.batch_stride : ld_bytes * rows;
  if (!tma_addressable(args.moe.d, ld_bytes, batch_bytes) || args.moe.n < 1) return false;
  return encode_output_box_map(map, args.moe.d, args.moe.n, rows, masked ? std::max(args.moe.num_groups, 1) : 1,
                               ld_bytes, batch_bytes, transposed_slabs ? kernel.block_m : 64);
}

// A pointer-array group's D map (DeviceGroup::d_map, where group_output_map_applies says so).
Status encode_group_output_map(CUtensorMap* map, const core::ResolvedGroup& rg) {
  if (!encode_output_box_map(map, const_cast<void*>(rg.d.data), rg.n, rg.m, rg.l, 2 * rg.d.ld, 2 * map_batch_stride_d(rg),
                             64))
    return Status::error(StatusCode::cuda_error, -1, "d", "cuTensorMapEncodeTiled failed for its tensor map");
  return Status::success();
}

// B's scale codes as (codes, N, experts) for the register-operand kernel's windows of codes
// (kernel_traits_swapped.cuh's kScaleCodeWindows): boxes of kScaleCodeWindow codes by the tile's `box_rows` weights, as stored
// (no swizzle), zeros past the last code of K and past N. The call has passed scale_codes_by_tma_applies.
Status encode_scale_code_map(CUtensorMap* map, const GemmArguments& args, const core::ResolvedGroup& whole, int box_rows) {
  static const PFN_cuTensorMapEncodeTiled_v12000 encode = encode_function();
  if (encode == nullptr)
    return Status::error(StatusCode::cuda_error, -1, "", "the driver does not provide cuTensorMapEncodeTiled");
  const cuuint64_t dims[3] = {static_cast<cuuint64_t>(std::max<std::int64_t>(scale_cols(args.b_type.recipe, args.moe.k), 1)),
                              static_cast<cuuint64_t>(std::max(args.moe.n, 1)),
                              static_cast<cuuint64_t>(std::max(args.moe.num_groups, 1))};
  const cuuint64_t strides[2] = {static_cast<cuuint64_t>(whole.sfb.ld), static_cast<cuuint64_t>(whole.sfb.batch_stride)};
  const cuuint32_t box[3] = {kScaleCodeWindow, static_cast<cuuint32_t>(box_rows), 1};
  const cuuint32_t element_strides[3] = {1, 1, 1};
  const CUresult r = encode(map, CU_TENSOR_MAP_DATA_TYPE_UINT8, 3, const_cast<void*>(args.moe.sfb), dims, strides, box,
                            element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE,
                            CU_TENSOR_MAP_L2_PROMOTION_L2_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS)
    return Status::error(StatusCode::cuda_error, -1, "sfb",
                         "cuTensorMapEncodeTiled failed for B's scale codes with CUresult " + std::to_string(r));
  return Status::success();
}

// Copies a host array into the workspace (host-resident descriptions) and returns its device address.
template <class T>
Status stage_array(const T* host, std::size_t count, std::uint8_t* workspace, std::size_t offset, cudaStream_t stream,
                   const T** device) {
  if (host == nullptr || count == 0) {
    *device = nullptr;
    return Status::success();
  }
  const cudaError_t e = cudaMemcpyAsync(workspace + offset, host, count * sizeof(T), cudaMemcpyHostToDevice, stream);
  if (e != cudaSuccess) return cuda_failure(e, "copying host-resident descriptions to the workspace");
  *device = reinterpret_cast<const T*>(workspace + offset);
  return Status::success();
}

// Reorders host-built records (tile ranges in group order) as core::plan_heavy_first says for `ctas` CTAs,
// each group's tile range following the new order, and returns the walk's TileOrder. The records carry
// their own addresses and maps, so the kernels need not know the groups' original order. Its buffers are
// per thread and reused, as copy_host_records' are (no allocation per call in steady state).
core::TileOrder heavy_tiles_first(DeviceGroup* records, int num_groups, int ctas) {
  thread_local std::vector<std::int64_t> tiles, k;
  thread_local std::vector<int> walk;
  thread_local std::vector<DeviceGroup> original;
  tiles.resize(static_cast<std::size_t>(num_groups));
  k.resize(static_cast<std::size_t>(num_groups));
  for (int g = 0; g < num_groups; ++g) {
    tiles[static_cast<std::size_t>(g)] = records[g].tile_end - records[g].tile_begin;
    k[static_cast<std::size_t>(g)] = records[g].k;
  }
  const core::TileOrder order = core::plan_heavy_first(tiles, k, ctas, &walk);
  if (order.heavy_tiles == 0) return order;
  original.assign(records, records + num_groups);
  std::int64_t begin = 0;
  for (int i = 0; i < num_groups; ++i) {
    const int g = walk[static_cast<std::size_t>(i)];
    records[i] = original[static_cast<std::size_t>(g)];
    records[i].tile_begin = begin;
    records[i].tile_end = begin + tiles[static_cast<std::size_t>(g)];
    begin = records[i].tile_end;
  }
  return order;
}

// Host-resident descriptions (already validated by can_implement): the status, every group's record and, for the
// pointer-array form, its maps (A's, B's, and D's where group_output_map_applies), built here by group_records.hpp,
// the prepare kernel's own code, and copied into the workspace in one transfer. The GEMM kernel is then the only
// work on the device: the prepare kernel's single CTA took 12.8 us of the reference example's 41 us
// (bench/NOTES.md, version 12b). `prepare` holds the host arrays and the workspace's device addresses of the
// records and maps. The transfer reads pageable memory, which cudaMemcpyAsync stages before it returns, so the
// buffer is free for the next call as soon as this one returns: one per thread, grown when a call has more groups
// than any before, else reused (run() allocates nothing in steady state). Pointer-array groups of different K may
// be reordered with their heavy tiles first for `ctas` CTAs (core::plan_heavy_first) where the kernel walks that
// order (heavy_first_walk); *order receives the walk's TileOrder, *total_tiles the tiles of all groups.
Status copy_host_records(const PrepareParams& prepare, const KernelChoice& kernel, int b_box_rows,
                         const WorkspaceLayout& layout, std::uint8_t* workspace, cudaStream_t stream, int ctas,
                         core::TileOrder* order, std::int64_t* total_tiles) {
  const std::size_t groups = static_cast<std::size_t>(prepare.num_groups);
  const bool pointer_array = prepare.spec.layout == GroupLayout::pointer_array;
  // Pointer-array form: room for the D maps where the call's D may take them (they follow A's and B's); the copy
  // ends after the last group's map that was made (copied_end), or after B's maps where none was.
  const bool d_maps = pointer_array && prepare.output_map_max_k >= 0;
  const std::size_t bytes = d_maps          ? layout.d_maps + groups * sizeof(CUtensorMap)
                            : pointer_array ? layout.maps + 2 * groups * sizeof(CUtensorMap)
                                            : layout.groups + groups * sizeof(DeviceGroup);
  std::size_t copied_end = d_maps ? layout.maps + 2 * groups * sizeof(CUtensorMap) : bytes;
  // Storage typed as tensor maps, so that it has their 64-byte alignment; zeroed on every call (the
  // records' padding and the unused maps of empty groups are copied too).
  thread_local std::vector<CUtensorMap> storage;
  const std::size_t count = (bytes + sizeof(CUtensorMap) - 1) / sizeof(CUtensorMap);
  if (storage.size() < count) storage.resize(count);
  auto* staged = reinterpret_cast<std::uint8_t*>(storage.data());
  std::memset(staged, 0, bytes);
  auto* records = reinterpret_cast<DeviceGroup*>(staged + layout.groups);
  CUtensorMap* maps = pointer_array ? reinterpret_cast<CUtensorMap*>(staged + layout.maps) : nullptr;
  CUtensorMap* output_maps = d_maps ? reinterpret_cast<CUtensorMap*>(staged + layout.d_maps) : nullptr;
  DeviceStatus status{};
  const Status built = build_group_records(
      prepare, records, &status.total_tiles, [&](int g, const core::ResolvedGroup& rg, std::int64_t tiles) {
        if (!pointer_array || tiles == 0) return Status::success();
        if (Status s = encode_operand_map(&maps[2 * g], prepare.spec.a_type.element, rg.a.data, rg.k, rg.m, rg.l, rg.a.ld,
                                          map_batch_stride_a(rg), kernel.block_m, kernel.decode);
            !s.ok())
          return Status::error(s.code, g, "a", "its tensor map: " + s.message);
        if (Status s = encode_operand_map(&maps[2 * g + 1], prepare.spec.b_type.element, rg.b.data, rg.k, rg.n, rg.l,
                                          rg.b.ld, map_batch_stride_b(rg), b_box_rows, kernel.decode);
            !s.ok())
          return Status::error(s.code, g, "b", "its tensor map: " + s.message);
        if (records[g].d_map != nullptr) {
          if (Status s = encode_group_output_map(&output_maps[g], rg); !s.ok()) return Status::error(s.code, g, "d", s.message);
          copied_end = layout.d_maps + (static_cast<std::size_t>(g) + 1) * sizeof(CUtensorMap);
        }
        return Status::success();
      });
  if (!built.ok()) return built;  // can_implement has checked the groups already; the maps may still fail
  *order = pointer_array && heavy_first_walk(kernel.swapped, kernel.decode, kernel.scales, kernel.block_m, kernel.block_n)
               ? heavy_tiles_first(records, prepare.num_groups, ctas)
               : core::TileOrder{};
  status.failed_group = kNoFailure;
  status.spec = prepare.spec;
  *total_tiles = status.total_tiles;
  std::memcpy(staged + layout.status, &status, sizeof status);
  const cudaError_t e = cudaMemcpyAsync(workspace, staged, copied_end, cudaMemcpyHostToDevice, stream);
  if (e != cudaSuccess) return cuda_failure(e, "copying the group records to the workspace");
  return Status::success();
}

// True while `stream` is being captured into a CUDA graph: a captured copy would read the host buffer at
// every replay, after later calls have rewritten it, so capture takes the prepare kernel's path.
bool capturing(cudaStream_t stream) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(stream, &status) != cudaSuccess) {
    cudaGetLastError();
    return true;  // unknown: the path that is correct either way
  }
  return status != cudaStreamCaptureStatusNone;
}

}  // namespace

bool device_available() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    cudaGetLastError();  // a missing driver leaves a sticky-looking error; clear it for later calls
    return false;
  }
  const DeviceFacts* facts = current_device_facts();
  return facts != nullptr && facts->sm90;
}

Status can_implement(const GemmArguments& args, const RunOptions& options) {
  if (!fp8_path_runs(args) && !bf16_path_runs(args))
    return Status::error(StatusCode::not_supported, -1, "b_type.recipe",
                         std::string("the cuda back end runs fp8-block128, mxfp8, mxfp4 and nvfp4 (A and B of the same "
                                     "recipe) and FP8 activations (mxfp8, fp8-block128) with FP4 weights (mxfp4, nvfp4); ") +
                             to_string(args.a_type.recipe) + " x " + to_string(args.b_type.recipe) +
                             " runs on the cpu back end (--backend cpu)");
  if (options.path == KernelPath::fp8 && !fp8_path_runs(args))
    return Status::error(StatusCode::not_supported, -1, "path",
                         std::string("kernel path fp8 runs fp8-block128, mxfp8, mxfp4 and mxfp8 x mxfp4, not ") +
                             to_string(args.a_type.recipe) + " x " + to_string(args.b_type.recipe) + ": use bf16 or auto");
  if (options.path == KernelPath::bf16 && !bf16_path_runs(args))
    return Status::error(StatusCode::not_supported, -1, "path",
                         std::string("kernel path bf16 runs the recipes with FP4 weights and mxfp8, not ") +
                             to_string(args.a_type.recipe) + " x " + to_string(args.b_type.recipe) + ": use fp8 or auto");
  if (options.path == KernelPath::staged && !staged_runs(args) && !tokens_staged_by_name(args, options))
    return Status::error(StatusCode::not_supported, -1, "path",
                         std::string("kernel path staged runs mxfp8, mxfp4, nvfp4 and mxfp8 x mxfp4 or nvfp4 in the contiguous "
                                     "form (A's scales linear or mn-major) and the masked form (and fp8-block128 x mxfp4 or "
                                     "nvfp4 there with tile 16,256 or 32,256), not ") +
                             to_string(args.a_type.recipe) + " x " + to_string(args.b_type.recipe) + " in the " +
                             to_string(args.layout) + " form with A's scales " + to_string(args.a_type.scale_layout) +
                             ": use fp8, bf16 or auto");
  if (args.a_major != Major::k)
    return Status::error(StatusCode::not_supported, -1, "a_major",
                         "the cuda back end needs A k-major: Hopper's FP8 tensor cores read both operands K-major");
  if (args.b_major != Major::k)
    return Status::error(StatusCode::not_supported, -1, "b_major",
                         "the cuda back end needs B k-major: Hopper's FP8 tensor cores read both operands K-major");
  if (options.tile_m != 0 || options.tile_n != 0) {
    const bool tokens_tile = staged_tokens_tile(options.tile_m, options.tile_n) && tokens_stage_runs(args);
    const bool swap = (forcible_swapped_tile(options.tile_m, options.tile_n) && swapped_runs(args)) || tokens_tile ||
                      tokens_staged_by_name(args, options);
    const std::string tile = std::to_string(options.tile_m) + "," + std::to_string(options.tile_n);
    if (f16_tokens_runs(args) && tokens_staged_by_name(args, options) && !f16_tokens_tile(options.tile_m, options.tile_n))
      return Status::error(StatusCode::not_supported, -1, "tile",
                           "tile " + tile + " is not built for fp8-block128 tokens on the register-operand kernel: use 16,256 "
                           "or 32,256, or no tile (the planner's choice, 64,256 for groups of 33 rows or more)");
    if (tokens_tile && !tokens_staged_by_name(args, options))
      return Status::error(StatusCode::not_supported, -1, "tile",
                           "tile " + tile + " is the register-operand kernel's with staged tokens: use --kernel-path staged "
                           "(the MoE forms, A's scales linear or mn-major in the contiguous form), or another tile");
    if (swap && options.path == KernelPath::fp8)
      return Status::error(StatusCode::not_supported, -1, "tile",
                           "tile " + tile + " is the register-operand kernel's (FP4 weights decoded to bf16), which kernel "
                           "path fp8 does not use: use --kernel-path bf16 or auto, or another tile");
    const bool wide = block128_wide_tile(options.tile_m, options.tile_n);
    if (wide && (!is_block128(args) || use_bf16_path(args, options)))
      return Status::error(StatusCode::not_supported, -1, "tile",
                           "tile " + tile + " is built for fp8-block128 (A and B) on the FP8 kernel only, not for " +
                               to_string(args.a_type.recipe) + " x " + to_string(args.b_type.recipe) + ": use another tile");
    const bool staged_wide = staged_wide_tile(options.tile_m, options.tile_n);
    if (staged_wide && options.path != KernelPath::staged)
      return Status::error(StatusCode::not_supported, -1, "tile",
                           "tile " + tile + " is built for kernel path staged only: use --kernel-path staged or another tile");
    if (!tile_supported(options.tile_m, options.tile_n) && !swap && !wide && !staged_wide)
      return Status::error(StatusCode::invalid_argument, -1, "tile",
                           "tile " + tile + " is not one of the tiles the sm_90a kernels are built for: " + supported_tiles() +
                               " (and 128,192 for fp8-block128, 128,256 for kernel path staged, 32,256 or 32,384 for FP4 "
                               "weights with mxfp8 or same-recipe tokens, 16,256 for those with kernel path staged, 16,256 "
                               "or 32,256 with kernel path staged for FP4 weights with fp8-block128 tokens)");
    if (choose_plan(args, options).stages == 0)
      return Status::error(StatusCode::not_supported, -1, "tile",
                           "tile " + tile + " leaves the decoding kernel fewer than three stages for " + to_string(args.a_type.recipe) +
                               " x " + to_string(args.b_type.recipe) + ": use another tile or --kernel-path fp8");
  }
  const auto power_of_two = [](int x) { return x > 0 && (x & (x - 1)) == 0; };
  if (!power_of_two(options.cluster_m) || !power_of_two(options.cluster_n) || options.cluster_m * options.cluster_n > 16)
    return Status::error(StatusCode::invalid_argument, -1, "cluster",
                         "cluster " + std::to_string(options.cluster_m) + "," + std::to_string(options.cluster_n) +
                             " is not a valid thread-block cluster (powers of two, at most 16 CTAs)");
  if (options.cluster_m != 1 || options.cluster_n != 1)
    return Status::error(StatusCode::not_supported, -1, "cluster",
                         "this version's sm_90a kernel runs without clusters (TMA multicast): use 1,1");
  if (sm_count() <= 0) return Status::error(StatusCode::cuda_error, -1, "", "cannot read the multiprocessor count");

  const core::CallSpec spec = core::make_call_spec(args);
  if (args.layout == GroupLayout::pointer_array) {
    if (args.descriptions == MemoryLocation::host)
      for (int g = 0; g < args.num_groups; ++g) {
        const core::ResolvedGroup rg = core::resolve_pointer_array(spec, args.groups[g]);
        if (rg.m == 0) continue;
        if (const core::GroupCheck c = check_tma_limits(spec, rg, rg.l, rg.l); !c.ok()) return core::to_status(c, g, spec);
      }
  } else {
    const core::ResolvedGroup whole = core::resolve_moe_whole(spec, args.moe);
    const std::int64_t a_batches = args.layout == GroupLayout::masked ? args.moe.num_groups : 1;
    if (const core::GroupCheck c = check_tma_limits(spec, whole, a_batches, args.moe.num_groups); !c.ok())
      return core::to_status(c, -1, spec);
  }
  return Status::success();
}

namespace {

// The workspace of a staged call: the records and maps for its group count, then the bf16 copies.
std::size_t staged_workspace(const GemmArguments& args) {
  return staged_buffers(args, workspace_layout(group_count(args)).total).end;
}

// The least workspace a call runs with: the records and maps for its group count, plus the bf16 copies
// where the staged path is asked for by name (the tokens' alone with a register-operand tile).
std::size_t minimum_workspace(const GemmArguments& args, const RunOptions& options) {
  const std::size_t records = workspace_layout(group_count(args)).total;
  if (tokens_staged_by_name(args, options)) return staged_tokens(args, records).end;
  return options.path == KernelPath::staged && staged_runs(args) ? staged_workspace(args) : records;
}

// The options a call runs with: the planner's staged choice becomes the staged path where the workspace
// holds the bf16 copies; with less it keeps the default path (workspace_size() asks for the copies).
RunOptions resolve_path(const GemmArguments& args, const RunOptions& options, std::size_t workspace_bytes) {
  RunOptions resolved = options;
  if (workspace_bytes >= staged_workspace(args) && staged_chosen(args, options)) resolved.path = KernelPath::staged;
  return resolved;
}

// Whether `plan` (choose_plan's) reads staged tokens once the workspace holds them: the register-operand
// kernel's plan with tokens decoded on chip, or (fp8-block128 tokens, which that kernel takes only staged)
// the planner's own decoding-kernel plan at decode shapes; both where the pass pays (tokens_stageable).
bool stages_tokens_given_workspace(const GemmArguments& args, const RunOptions& options, const Plan& plan) {
  if (!tokens_stageable(args) || reads_staged_tokens(plan.kernel)) return false;
  if (plan.kernel.swapped) return true;
  return f16_tokens_runs(args) && options.tile_m == 0 && options.tile_n == 0 && options.path != KernelPath::fp8 &&
         plan.small_rows > 0;
}

// The workspace of a call whose register-operand kernel reads staged tokens: the records and maps, then
// the tokens' bf16 copy; 0 where that kernel does not run or cannot take staged tokens.
std::size_t staged_tokens_workspace(const GemmArguments& args, const RunOptions& options) {
  if (!stages_tokens_given_workspace(args, options, choose_plan(args, options))) return 0;
  return staged_tokens(args, workspace_layout(group_count(args)).total).end;
}

// Whether the register-operand kernel of `k` takes B's scale codes by TMA (kernel_traits_swapped.cuh's
// kScaleCodeWindows; measured -7 to -13% against the scale loaders' gathers, bench/NOTES.md version 23): its
// staged-token tiles 256 weights wide, in the MoE forms, with B's codes linear and their base, rows and experts
// 16-byte aligned, as TMA needs of a map. The loaders fetch them elsewhere (into the same windows).
bool scale_codes_by_tma_applies(const GemmArguments& args, const KernelChoice& k) {
  if (!k.swapped || !reads_staged_tokens(k) || k.block_n != 256) return false;
  if (args.layout == GroupLayout::pointer_array || args.b_type.scale_layout != ScaleLayout::linear ||
      (args.b_type.scale != DataType::ue4m3 && args.b_type.scale != DataType::ue8m0))
    return false;
  const core::ResolvedGroup whole = core::resolve_moe_whole(core::make_call_spec(args), args.moe);
  return tma_addressable(args.moe.sfb, whole.sfb.ld, whole.sfb.batch_stride);  // one-byte codes
}

// The split of the last round over K (core::plan_stream_k) of a call of total_tiles tiles, the kernel's own: the
// register-operand kernel's staged-token tiles 256 weights wide in the MoE forms (one K), whose workspace holds the
// partials (staged_tokens); no split (split_ctas 0) for the others. The launch takes the stream-K instantiation
// (KernelChoice::stream_k) where this splits, which needs the tile count on the host: host-resident descriptions.
core::StreamKSplit stream_k_split(const GemmArguments& args, const Plan& plan, std::int64_t total_tiles) {
  const KernelChoice& k = plan.kernel;
  if (!k.swapped || !reads_staged_tokens(k) || k.block_n != 256 || args.layout == GroupLayout::pointer_array)
    return core::StreamKSplit{total_tiles, 0, 0, 0};
  return core::plan_stream_k(total_tiles, plan.grid, static_cast<std::int32_t>(core::ceil_div(args.moe.k, kBlockK)));
}

// The plan of a call with `workspace_bytes` of workspace (options resolved by resolve_path): the
// register-operand kernel reads staged tokens where they pay and the workspace holds them.
Plan plan_with_workspace(const GemmArguments& args, const RunOptions& options, std::size_t workspace_bytes) {
  Plan plan = choose_plan(args, options);
  if (stages_tokens_given_workspace(args, options, plan) &&
      workspace_bytes >= staged_tokens(args, workspace_layout(group_count(args)).total).end) {
    if (!plan.kernel.swapped) {
      // fp8-block128 tokens: from the decoding kernel to the register-operand one (tile: read_staged_tokens).
      plan.kernel.swapped = true;
      plan.kernel.decode = true;
      plan.reason += "; FP4 weights in wgmma registers";
      plan.grid = sm_count();
    }
    read_staged_tokens(&plan, options.tile_m == 0 && options.tile_n == 0);
  }
  if (scale_codes_by_tma_applies(args, plan.kernel)) {
    plan.scale_codes_by_tma = true;
    plan.reason += ", B's scale codes by TMA";
  }
  return plan;
}

}  // namespace

std::size_t workspace_size(const GemmArguments& args, const RunOptions& options) {
  if (staged_chosen(args, options)) return staged_workspace(args);
  return std::max(minimum_workspace(args, options), staged_tokens_workspace(args, options));
}

Status run(const GemmArguments& args, const RunOptions& requested, void* workspace, std::size_t workspace_bytes,
           cudaStream_t stream) {
  const std::int32_t groups = group_count(args);
  const WorkspaceLayout layout = workspace_layout(groups);
  const std::size_t needed = minimum_workspace(args, requested);
  if (workspace == nullptr || workspace_bytes < needed)
    return Status::error(StatusCode::invalid_argument, -1, "workspace",
                         "needs " + std::to_string(needed) + " bytes (workspace_size()), got " +
                             std::to_string(workspace == nullptr ? 0 : workspace_bytes));
  if (reinterpret_cast<std::uintptr_t>(workspace) % 256 != 0)
    return Status::error(StatusCode::invalid_argument, -1, "workspace", "must be 256-byte aligned (cudaMalloc memory is)");
  auto* ws = static_cast<std::uint8_t*>(workspace);
  const RunOptions options = resolve_path(args, requested, workspace_bytes);
  const Plan plan = plan_with_workspace(args, options, workspace_bytes);
  const core::CallSpec spec = core::make_call_spec(args);

  PrepareParams prepare{};
  prepare.spec = spec;
  prepare.num_groups = groups;
  prepare.block_m = plan.kernel.block_m;
  prepare.block_n = plan.kernel.block_n;
  prepare.out_groups = reinterpret_cast<DeviceGroup*>(ws + layout.groups);
  prepare.out_maps = reinterpret_cast<CUtensorMap*>(ws + layout.maps);
  prepare.out_d_maps = reinterpret_cast<CUtensorMap*>(ws + layout.d_maps);
  prepare.output_map_max_k = args.layout == GroupLayout::pointer_array ? output_map_max_k(args, plan.kernel) : -1;
  prepare.status = reinterpret_cast<DeviceStatus*>(ws + layout.status);

  KernelParams kernel{};
  kernel.groups = prepare.out_groups;
  kernel.status = prepare.status;
  kernel.num_groups = groups;
  kernel.band = kTileBand;
  kernel.per_group_maps = args.layout == GroupLayout::pointer_array;
  kernel.d_type = args.d_type;
  kernel.d_n_major = args.d_major == Major::n;
  kernel.has_c = args.has_c;
  kernel.sfa_type = args.a_type.scale;
  kernel.sfb_type = args.b_type.scale;
  kernel.sfa_layout = args.a_type.scale_layout;
  kernel.sfb_layout = args.b_type.scale_layout;
  kernel.a_element = args.a_type.element;
  kernel.b_element = args.b_type.element;

  // Host-resident descriptions: the records are built here (copy_host_records), unless the call is being
  // captured into a graph, which takes the device path with the descriptions copied alongside.
  const bool host = args.descriptions == MemoryLocation::host;
  const bool host_records = host && !capturing(stream);
  StageOperand staging[2];  // the staged path's A and B, or the register-operand kernel's staged tokens (A)
  // B's tile arrives in one TMA box, or two where it is wider than a box may be (the 384-weight tile).
  const int b_box_rows = plan.kernel.block_n / tma_box_loads(plan.kernel.block_n);
  if (args.layout == GroupLayout::pointer_array) {
    prepare.groups = args.groups;
    if (host && !host_records) {
      if (Status s = stage_array(args.groups, static_cast<std::size_t>(groups), ws, layout.descriptions, stream, &prepare.groups);
          !s.ok())
        return s;
    }
    // Templates: everything but address, dims and strides, which the prepare kernel fills per group.
    if (!host_records) {
      if (Status s = encode_operand_map(&prepare.a_template, args.a_type.element, workspace, 128, 256, 1, 128, 128 * 256,
                                        plan.kernel.block_m, plan.kernel.decode);
          !s.ok())
        return s;
      if (Status s = encode_operand_map(&prepare.b_template, args.b_type.element, workspace, 128, 256, 1, 128, 128 * 256,
                                        b_box_rows, plan.kernel.decode);
          !s.ok())
        return s;
      if (prepare.output_map_max_k >= 0 &&
          !encode_output_box_map(&prepare.d_template, workspace, 64, 64, 1, 128, 128 * 64, 64))
        prepare.output_map_max_k = -1;  // the other epilogues write D
    }
  } else {
    prepare.moe = args.moe;
    if (host && !host_records) {
      const std::size_t offsets = static_cast<std::size_t>(groups) + (args.moe.offsets_start_with_zero ? 1 : 0);
      Status s;
      if (args.layout == GroupLayout::contiguous) {
        if (args.moe.offsets_type == IndexType::i32) {
          const std::int32_t* d = nullptr;
          s = stage_array(static_cast<const std::int32_t*>(args.moe.offsets), offsets, ws, layout.offsets, stream, &d);
          prepare.moe.offsets = d;
        } else {
          const std::int64_t* d = nullptr;
          s = stage_array(static_cast<const std::int64_t*>(args.moe.offsets), offsets, ws, layout.offsets, stream, &d);
          prepare.moe.offsets = d;
        }
      } else {
        s = stage_array(args.moe.masked_m, static_cast<std::size_t>(groups), ws, layout.masked_m, stream, &prepare.moe.masked_m);
      }
      if (!s.ok()) return s;
      if (!(s = stage_array(args.moe.alpha, static_cast<std::size_t>(groups), ws, layout.alpha, stream, &prepare.moe.alpha)).ok())
        return s;
      if (!(s = stage_array(args.moe.beta, static_cast<std::size_t>(groups), ws, layout.beta, stream, &prepare.moe.beta)).ok())
        return s;
    }
    // The MoE forms read every group through two maps: A over all rows (contiguous) or all experts
    // (masked), B over all experts; the batch coordinate picks the expert.
    const core::ResolvedGroup whole = core::resolve_moe_whole(spec, args.moe);
    const bool masked = args.layout == GroupLayout::masked;
    const std::int64_t a_batches = masked ? groups : 1;
    const std::int64_t rows = std::max<std::int64_t>(args.moe.rows, 1);
    // What the maps read: the user's operands, or their bf16 copies in the workspace (staged path, written
    // by the staging pass launched right before the GEMM kernel).
    DataType a_element = args.a_type.element, b_element = args.b_type.element;
    const void* a_data = args.moe.a;
    const void* b_data = args.moe.b;
    std::int64_t a_ld = whole.a.ld, a_batch_stride = masked ? whole.a.batch_stride : whole.a.ld * rows;
    std::int64_t b_ld = whole.b.ld, b_batch_stride = whole.b.batch_stride;
    // A as the staging pass reads it, into dst with rows dst_ld elements apart.
    const auto stage_a = [&](std::uint8_t* dst, std::int64_t dst_ld) {
      return stage_operand(args.a_type, args.moe.a, args.moe.rows, args.moe.k, whole.a.ld, a_batches,
                           masked ? whole.a.batch_stride : 0, args.moe.sfa, whole.sfa.ld,
                           masked ? whole.sfa.batch_stride : 0, dst, dst_ld);
    };
    if (plan.kernel.scales == ScaleGranularity::staged) {
      const StagedBuffers staged = staged_buffers(args, layout.total);
      const StageOperand a = stage_a(ws + staged.a, staged.ld);
      const StageOperand b = stage_operand(args.b_type, args.moe.b, args.moe.n, args.moe.k, whole.b.ld, groups,
                                           whole.b.batch_stride, args.moe.sfb, whole.sfb.ld, whole.sfb.batch_stride,
                                           ws + staged.b, staged.ld);
      staging[0] = a;
      staging[1] = b;
      a_element = b_element = DataType::bf16;
      a_data = a.dst;
      b_data = b.dst;
      a_ld = b_ld = staged.ld;
      a_batch_stride = a.dst_batch_stride;
      b_batch_stride = b.dst_batch_stride;
    }
    // Staged tokens: whole 64-deep slices in the weights' K order, read as 128-byte swizzled boxes.
    std::int64_t a_k = args.moe.k;
    bool a_decoded = plan.kernel.decode;
    if (reads_staged_tokens(plan.kernel)) {
      const StagedTokens tokens = staged_tokens(args, layout.total);
      StageOperand a = stage_a(ws + tokens.a, tokens.ld);
      a.weights_order = true;
      if (plan.kernel.a_scales == ScaleGranularity::block128) {
        // fp8-block128 tokens: f16, each row's power of two for the kernel's epilogue.
        a.block128_f16 = true;
        a.factors = reinterpret_cast<float*>(ws + tokens.factors);
        kernel.token_factors = a.factors;
        kernel.token_factor_rows = static_cast<std::int32_t>(args.moe.rows);
        kernel.b_codes = static_cast<const std::uint8_t*>(args.moe.b);
        kernel.b_ld = whole.b.ld;
        kernel.b_batch_stride = whole.b.batch_stride;
        kernel.staged_tokens = a.dst;
        kernel.staged_ld = tokens.ld;
        a_element = DataType::f16;
      } else {
        a_element = DataType::bf16;
      }
      // Where the launch below takes the stream-K instantiation: its partials, and their flags, which the
      // pass zeroes.
      kernel.partials = reinterpret_cast<float*>(ws + tokens.partials);
      kernel.partial_flags = reinterpret_cast<std::int32_t*>(ws + tokens.flags);
      staging[0] = a;
      a_data = a.dst;
      a_k = a_ld = tokens.ld;
      a_batch_stride = a.dst_batch_stride;
      a_decoded = false;
    }
    if (Status s = encode_operand_map(&kernel.a_map, a_element, a_data, a_k, args.moe.rows, a_batches, a_ld,
                                      a_batch_stride, plan.kernel.block_m, a_decoded);
        !s.ok())
      return s;
    if (Status s = encode_operand_map(&kernel.b_map, b_element, b_data, args.moe.k, args.moe.n, groups, b_ld,
                                      b_batch_stride, b_box_rows, plan.kernel.decode);
        !s.ok())
      return s;
    kernel.d_map_ready = encode_output_map(&kernel.d_map, args, plan.kernel, whole);
    if (plan.scale_codes_by_tma) {
      if (Status s = encode_scale_code_map(&kernel.sfb_map, args, whole, plan.kernel.block_n); !s.ok()) return s;
      kernel.sfb_by_tma = true;
    }
  }

  cudaError_t e = cudaSuccess;
  KernelChoice launched = plan.kernel;
  if (host_records) {
    kernel.records_on_host = true;
    std::int64_t total_tiles = 0;
    if (Status s = copy_host_records(prepare, plan.kernel, b_box_rows, layout, ws, stream, plan.grid, &kernel.tile_order,
                                     &total_tiles);
        !s.ok())
      return s;
    if (stream_k_split(args, plan, total_tiles).split_ctas > 0) {
      launched.stream_k = true;
      staging[0].flags_to_zero = kernel.partial_flags;
      staging[0].flag_count = plan.grid;
    }
  } else if ((e = launch_prepare_groups(prepare, stream)) != cudaSuccess) {
    return cuda_failure(e, "launching the prepare kernel");
  }
  if (plan.kernel.scales == ScaleGranularity::staged) {
    // The staging pass goes last before the GEMM kernel, whose programmatic launch then waits for it in
    // griddepcontrol.wait.
    if ((e = launch_stage_bf16(staging[0], staging[1], sm_count(), stream)) != cudaSuccess)
      return cuda_failure(e, "staging A and B as bf16");
    e = launch_staged(plan.kernel, kernel, plan.grid, stream);
  } else if (plan.kernel.swapped) {
    if (reads_staged_tokens(plan.kernel) &&
        (e = launch_stage_bf16(staging[0], StageOperand{}, sm_count(), stream)) != cudaSuccess)
      return cuda_failure(e, "staging the tokens as bf16");
    if (!launch_swapped(launched, kernel, plan.grid, stream, &e)) e = cudaErrorInvalidValue;
  } else if (plan.kernel.decode) {
    if (!launch_decode_fp4(plan.kernel, kernel, plan.grid, stream, &e) &&
        !launch_decode_mixed(plan.kernel, kernel, plan.grid, stream, &e))
      e = cudaErrorInvalidValue;
  } else if (plan.kernel.a_packed || plan.kernel.b_packed) {
    e = launch_mxfp4(plan.kernel, kernel, plan.grid, stream);
  } else if (plan.kernel.scales == ScaleGranularity::mx32) {
    e = launch_mxfp8(plan.kernel, kernel, plan.grid, stream);
  } else {
    e = launch_fp8_block128(plan.kernel, kernel, plan.grid, stream);
  }
  if (e != cudaSuccess) return cuda_failure(e, "launching the sm_90a grouped GEMM kernel");
  return Status::success();
}

Status device_status(const void* workspace, cudaStream_t stream) {
  if (workspace == nullptr) return Status::error(StatusCode::invalid_argument, -1, "workspace", "is null");
  cudaError_t e = cudaStreamSynchronize(stream);
  if (e != cudaSuccess) return cuda_failure(e, "waiting for the grouped GEMM");
  DeviceStatus status;
  e = cudaMemcpy(&status, static_cast<const std::uint8_t*>(workspace) + workspace_layout(0).status, sizeof status,
                 cudaMemcpyDeviceToHost);
  if (e != cudaSuccess) return cuda_failure(e, "reading the device status");
  if (status.failed_group == kNoFailure) return Status::success();
  core::GroupCheck check;
  check.field = static_cast<core::Field>(status.field);
  check.violation = static_cast<core::Violation>(status.violation);
  check.value = status.value;
  check.limit = status.limit;
  return core::to_status(check, status.failed_group, status.spec, StatusCode::device_error);
}

std::string describe_plan(const GemmArguments& args, const RunOptions& requested) {
  // The plan run() takes with workspace_size()'s bytes.
  const std::size_t workspace_bytes = cuda::workspace_size(args, requested);
  const RunOptions options = resolve_path(args, requested, workspace_bytes);
  const Plan plan = plan_with_workspace(args, options, workspace_bytes);
  std::string s = "sm_90a ";
  s += to_string(args.a_type.recipe);
  if (args.b_type.recipe != args.a_type.recipe) s += std::string(" x ") + to_string(args.b_type.recipe);
  if (plan.kernel.swapped)
    s += plan.kernel.a_scales == ScaleGranularity::block128
             ? " (FP4 weights decoded into wgmma's A registers, D^T = B A^T, F16 wgmma)"
             : " (FP4 weights decoded into wgmma's A registers, D^T = B A^T, BF16 wgmma)";
  else if (plan.kernel.decode) s += " (decoded to bf16 on chip, BF16 wgmma)";
  else if (plan.kernel.a_packed || plan.kernel.b_packed) s += " (FP4 widened to e4m3 on chip)";
  else if (plan.kernel.scales == ScaleGranularity::staged) s += " (staged as bf16 in the workspace, BF16 wgmma)";
  s += " kernel: tile " + std::to_string(plan.kernel.block_m) + "x" + std::to_string(plan.kernel.block_n) + "x" +
       std::to_string(kBlockK) + " (" + plan.reason + "), " + std::to_string(plan.stages) +
       " stages, 1 TMA warp + " +
       (plan.kernel.scales == ScaleGranularity::staged ? "no scale loaders" : "3 scale-loader warps") +
       " + " + std::to_string(plan.kernel.swapped ? swapped_consumers(plan.kernel) : 2) + " consumer warpgroups, " +
       std::to_string(plan.grid) +
       " persistent CTAs, cluster 1x1, descriptions on the " +
       (args.descriptions == MemoryLocation::device ? "device (records made by the prepare kernel)"
                                                    : "host (records made on the host, no prepare kernel)");
  if (const std::vector<std::int64_t> rows = host_group_rows(args); !rows.empty() && args.layout != GroupLayout::pointer_array) {
    std::int64_t tiles = 0;
    for (std::int64_t m : rows) tiles += core::group_tile_count(m, args.moe.n, 1, plan.kernel.block_m, plan.kernel.block_n);
    const core::StreamKSplit split = stream_k_split(args, plan, tiles);
    if (split.split_ctas > 0)
      s += ", stream-K: the last round's " + std::to_string(tiles - split.whole_tiles) + " tiles split over K on " +
           std::to_string(split.split_ctas) + " CTAs";
  }
  return s;
}

}  // namespace bsgemm::cuda
