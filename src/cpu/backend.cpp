// The CPU back end: a cache-blocked fp32 GEMM over operands decoded once into packed panels.
//
// How it works
//   1. Every non-empty (group, batch) is cut into slabs: a range of rows of A times a range of
//      columns of B. The ranges are as long as the panel memory budget allows (one range of
//      each for all but very large groups), so each operand row is decoded once per slab.
//   2. Slabs are packed, in order, into waves whose decoded panels fit the budget together; a
//      wave whose slabs share an operand range decodes it once. A wave runs in two parallel
//      phases: decode, then compute. Many small groups thus share one wave (two thread hand-
//      outs in all), and a huge group never needs more than the budget.
//   3. Decode: each row of an operand becomes decode(element) * decode(scale) in fp32 (exact for
//      the 8-bit scale formats; one rounding for fp32 scales), written into micro-panels of
//      W rows stored k-major ([k][W], W = MR for A and NR for B), rows past the end zero.
//   4. Compute: workers pull output tiles (MC x NC) from an atomic counter. A tile walks K in
//      chunks of KC; for each chunk, each NR-column micro-panel of B (KC x NR floats, kept in
//      L1) meets every MR-row micro-panel of A (the tile's A block stays in L2) in the
//      micro-kernel, which keeps an MR x NR block of fp32 sums in registers.
//   5. Epilogue: alpha * sum + beta * C in fp32, rounded to D's type by store_value (RNE). Only
//      the group's own rows are written: rows of a contiguous D outside every group, and rows of
//      a masked group at or past masked_m, are never touched.
//   Threads: up to the number asked for, but no more than one per kMultiplyAddsPerWorker of work,
//   so that a tiny call does not pay for starting threads it cannot use.
//
// The micro-kernel is plain C++ that the compiler vectorizes. Its register tile depends on the
// instruction set (32 vector registers of 16 floats with AVX-512, 16 of 8 with AVX2), so the
// kernel is compiled once per instruction set with its own MR x NR (target attributes rather than
// target_clones, which would give every clone the same tile) and chosen at run time.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <map>
#include <memory>
#include <new>
#include <string>
#include <tuple>
#include <vector>

#include "bsgemm/formats.hpp"
#include "bsgemm/recipe.hpp"
#include "src/core/resolved_group.hpp"
#include "src/cpu/backend.hpp"
#include "src/cpu/host_groups.hpp"
#include "src/cpu/parallel_for.hpp"

namespace bsgemm::cpu {
namespace {

// ---- micro-kernels --------------------------------------------------------------------------------

// c[MR][NR] += sum over k < k_count of a[k][MR] (outer product) b[k][NR]. The sums live in
// registers for the whole loop; with kFma every update is one fused multiply-add (the build uses
// ISO C++, where the compiler does not fuse a * b + c by itself).
template <int MR, int NR, bool kFma>
[[gnu::always_inline]] inline void micro_kernel_body(std::int64_t k_count, const float* __restrict a,
                                                     const float* __restrict b, float* __restrict c) {
  float sums[MR][NR];
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j) sums[i][j] = c[i * NR + j];
  for (std::int64_t k = 0; k < k_count; ++k) {
    const float* a_k = a + k * MR;
    const float* b_k = b + k * NR;
    for (int i = 0; i < MR; ++i) {
      const float a_ik = a_k[i];
      for (int j = 0; j < NR; ++j) {
        if constexpr (kFma) {
          sums[i][j] = __builtin_fmaf(a_ik, b_k[j], sums[i][j]);
        } else {
          sums[i][j] += a_ik * b_k[j];
        }
      }
    }
  }
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j) c[i * NR + j] = sums[i][j];
}

using MicroKernelFn = void (*)(std::int64_t k_count, const float* a, const float* b, float* c);

struct MicroKernel {
  int mr = 0, nr = 0;
  MicroKernelFn fn = nullptr;
};

#if defined(__GNUC__) && defined(__x86_64__)
#define BSGEMM_CPU_X86_KERNELS 1
// 14 x 32: 28 zmm accumulators, 2 for the row of B, 1 for the broadcast of A.
[[gnu::target("avx512f,fma")]] void micro_kernel_avx512(std::int64_t k_count, const float* a, const float* b,
                                                        float* c) {
  micro_kernel_body<14, 32, true>(k_count, a, b, c);
}
// 4 x 24: 12 ymm accumulators, 3 for the row of B, 1 for the broadcast.
[[gnu::target("avx2,fma")]] void micro_kernel_avx2(std::int64_t k_count, const float* a, const float* b, float* c) {
  micro_kernel_body<4, 24, true>(k_count, a, b, c);
}
#endif

// Any target: 4 x 8 fits the 16 registers of baseline x86-64 (SSE2) and most other ISAs; fused
// only where fmaf is a hardware instruction (else a library call would make it slower).
#if defined(__FP_FAST_FMAF)
constexpr bool kPortableFma = true;
#else
constexpr bool kPortableFma = false;
#endif
void micro_kernel_portable(std::int64_t k_count, const float* a, const float* b, float* c) {
  micro_kernel_body<4, 8, kPortableFma>(k_count, a, b, c);
}

// The fastest micro-kernel this CPU runs (decided once per process).
MicroKernel select_micro_kernel() {
#if defined(BSGEMM_CPU_X86_KERNELS)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) return {14, 32, micro_kernel_avx512};
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return {4, 24, micro_kernel_avx2};
#endif
  return {4, 8, micro_kernel_portable};
}

// ---- blocking -------------------------------------------------------------------------------------

// Micro-panels of A and of B per output tile (MC = MR * kTilePanelsM, NC = NR * kTilePanelsN),
// and the K chunk over which a B micro-panel stays in L1.
constexpr int kTilePanelsM = 8;
constexpr int kTilePanelsN = 8;
constexpr std::int64_t kChunkK = 256;
// Decoded panels held at once (floats): 64 MiB. Only a K so large that one tile's rows of A and
// of B exceed it ((MC + NC) * K floats: K above about 45000 with the AVX-512 tile) makes a
// single slab, and so its wave, larger.
constexpr std::int64_t kPanelBudgetFloats = std::int64_t{16} << 20;
// Decoded elements per decode task: enough to outweigh the hand-out, few enough to balance.
constexpr std::int64_t kDecodeTaskFloats = std::int64_t{1} << 15;
// Multiply-adds that justify one more worker thread: 2^22 take some 30 us on one core, a few times
// what starting a thread costs, so small calls run on fewer threads (or only the caller's).
constexpr double kMultiplyAddsPerWorker = 0x1p22;

// Rows [row0, row1) of one operand of one (group, batch), decoded into micro-panels of `width`
// rows at `offset` floats into the wave's panel memory.
struct PanelJob {
  OperandView op;
  const DecodeTable* table = nullptr;
  std::int64_t batch = 0, k = 0;
  std::int64_t row0 = 0, row1 = 0;
  int width = 0;
  std::size_t offset = 0;

  std::int64_t micro_panels() const { return (row1 - row0 + width - 1) / width; }
  std::size_t floats() const { return static_cast<std::size_t>(micro_panels() * width * k); }
};

struct DecodeTask {
  int panel = 0;
  std::int64_t first = 0, last = 0;  // micro-panels [first, last)
};

// Rows [m0, m1) x columns [n0, n1) of one (group, batch); A rows start at micro-panel 0 of
// a_panel, B columns at micro-panel 0 of b_panel.
struct Slab {
  int group = 0;
  std::int64_t batch = 0;
  std::int64_t m0 = 0, m1 = 0, n0 = 0, n1 = 0;
  int a_panel = 0, b_panel = 0;
};

struct TileTask {
  int slab = 0;
  std::int64_t m0 = 0, n0 = 0;  // first row and column of the tile, relative to the slab
};

struct Wave {
  std::vector<PanelJob> panels;
  std::vector<Slab> slabs;
  std::vector<DecodeTask> decodes;
  std::vector<TileTask> tiles;
  std::size_t floats = 0;
};

struct Blocking {
  MicroKernel kernel;
  std::int64_t tile_m = 0, tile_n = 0;
};

// Rows per slab range: a multiple of the tile, as many as half the budget holds (at least a tile).
std::int64_t range_rows(std::int64_t k, std::int64_t tile) {
  return std::max<std::int64_t>(1, kPanelBudgetFloats / 2 / k / tile) * tile;
}

// Cuts every group into slabs and the slabs into waves (see the top of the file).
std::vector<Wave> plan_waves(const GemmArguments& args, const std::vector<core::ResolvedGroup>& groups,
                             const Blocking& blocking, const DecodeTable& a_table, const DecodeTable& b_table) {
  std::vector<Wave> waves(1);
  // Panels already in the current wave: (operand, group, batch, first row) -> panel index.
  std::map<std::tuple<int, int, std::int64_t, std::int64_t>, int> wave_panels;
  auto add_panel = [&](Wave& wave, const PanelJob& job, std::tuple<int, int, std::int64_t, std::int64_t> key) {
    const auto found = wave_panels.find(key);
    if (found != wave_panels.end()) return found->second;
    const int index = static_cast<int>(wave.panels.size());
    wave.panels.push_back(job);
    wave.panels.back().offset = wave.floats;
    wave.floats += job.floats();
    wave_panels.emplace(key, index);
    return index;
  };
  for (std::size_t g = 0; g < groups.size(); ++g) {
    const core::ResolvedGroup& group = groups[g];
    if (group.m == 0) continue;
    const OperandView a = operand_a(args, group), b = operand_b(args, group);
    const std::int64_t a_range = range_rows(group.k, blocking.tile_m), b_range = range_rows(group.k, blocking.tile_n);
    for (std::int64_t l = 0; l < group.l; ++l) {
      for (std::int64_t m0 = 0; m0 < group.m; m0 += a_range) {
        const std::int64_t m1 = std::min<std::int64_t>(m0 + a_range, group.m);
        for (std::int64_t n0 = 0; n0 < group.n; n0 += b_range) {
          const std::int64_t n1 = std::min<std::int64_t>(n0 + b_range, group.n);
          const PanelJob a_job{a, &a_table, l, group.k, m0, m1, blocking.kernel.mr, 0};
          const PanelJob b_job{b, &b_table, l, group.k, n0, n1, blocking.kernel.nr, 0};
          const auto a_key = std::make_tuple(0, static_cast<int>(g), l, m0);
          const auto b_key = std::make_tuple(1, static_cast<int>(g), l, n0);
          // A new wave when this slab's new panels would not fit beside the wave's.
          const std::size_t extra =
              (wave_panels.count(a_key) ? 0 : a_job.floats()) + (wave_panels.count(b_key) ? 0 : b_job.floats());
          if (!waves.back().slabs.empty() &&
              waves.back().floats + extra > static_cast<std::size_t>(kPanelBudgetFloats)) {
            waves.emplace_back();
            wave_panels.clear();
          }
          Wave& wave = waves.back();
          Slab slab{static_cast<int>(g), l, m0, m1, n0, n1, 0, 0};
          slab.a_panel = add_panel(wave, a_job, a_key);
          slab.b_panel = add_panel(wave, b_job, b_key);
          const int slab_index = static_cast<int>(wave.slabs.size());
          wave.slabs.push_back(slab);
          for (std::int64_t tn = 0; tn < n1 - n0; tn += blocking.tile_n)
            for (std::int64_t tm = 0; tm < m1 - m0; tm += blocking.tile_m) wave.tiles.push_back({slab_index, tm, tn});
        }
      }
    }
  }
  for (Wave& wave : waves) {
    for (std::size_t p = 0; p < wave.panels.size(); ++p) {
      const PanelJob& job = wave.panels[p];
      const std::int64_t per_task = std::max<std::int64_t>(1, kDecodeTaskFloats / (job.width * job.k));
      for (std::int64_t first = 0; first < job.micro_panels(); first += per_task)
        wave.decodes.push_back({static_cast<int>(p), first, std::min(first + per_task, job.micro_panels())});
    }
  }
  return waves;
}

// ---- decode ---------------------------------------------------------------------------------------

// The most rows a micro-panel has (MR or NR of any micro-kernel above).
constexpr int kMaxPanelWidth = 32;

// One block of K of the first `rows` rows of a micro-panel: dst[k * width + i] =
// value(element (i, k0 + k)) * scales[i] for k < count, where element (i, k) sits at index
// row_index[i] + k * k_step. The loop runs over k outside and rows inside, so that the panel is
// written in order; the W source rows are read in parallel streams.
template <bool kFp4>
void decode_block(const std::uint8_t* bytes, const std::int64_t* row_index, int rows, std::int64_t k0,
                  std::int64_t count, std::int64_t k_step, const float* scales, const DecodeTable& table, float* dst,
                  int width) {
  for (std::int64_t k = 0; k < count; ++k) {
    const std::int64_t offset = (k0 + k) * k_step;
    float* out = dst + k * width;
    for (int i = 0; i < rows; ++i) {
      const std::int64_t index = row_index[i] + offset;
      const unsigned code = kFp4 ? (bytes[index >> 1] >> ((index & 1) * 4)) & 0xFu : bytes[index];
      out[i] = table.value[code] * scales[i];
    }
  }
}

// Decodes micro-panels [first, last) of `job` into `panel` (the job's place in panel memory).
void decode_micro_panels(const PanelJob& job, std::int64_t first, std::int64_t last, float* panel) {
  const OperandView& op = job.op;
  const std::int64_t k_count = job.k;
  const std::int64_t block = block_k(op.type.recipe);
  const bool fp4 = bits_of(op.type.element) == 4;
  const auto* bytes = static_cast<const std::uint8_t*>(op.data.data);
  // Along K, elements of a row are 1 apart (k-major) or ld apart.
  const std::int64_t k_step = op.k_contiguous ? 1 : op.data.ld;
  std::int64_t row_index[kMaxPanelWidth];
  std::int64_t scale_row[kMaxPanelWidth];
  float scales[kMaxPanelWidth];
  for (std::int64_t p = first; p < last; ++p) {
    float* dst = panel + static_cast<std::size_t>(p * job.width * k_count);
    const std::int64_t row_first = job.row0 + p * job.width;
    const int rows = static_cast<int>(std::min<std::int64_t>(job.width, job.row1 - row_first));
    // Rows past the operand's end stay zero, so their sums are zero and never reach D.
    if (rows < job.width) std::memset(dst, 0, static_cast<std::size_t>(job.width * k_count) * sizeof(float));
    for (int i = 0; i < rows; ++i) {
      row_index[i] =
          job.batch * op.data.batch_stride + core::matrix_offset(op.k_contiguous, row_first + i, 0, op.data.ld);
      scale_row[i] = scale_row_of(op.type.recipe, op.which, row_first + i);
    }
    for (std::int64_t kb = 0; kb < op.scale_cols; ++kb) {
      for (int i = 0; i < rows; ++i)
        scales[i] = load_value(op.type.scale, op.scales.data,
                               job.batch * op.scales.batch_stride +
                                   scale_offset(op.type.scale_layout, scale_row[i], kb, op.scale_cols, op.scales.ld));
      const std::int64_t k0 = kb * block, count = std::min(block, k_count - k0);
      float* out = dst + k0 * job.width;
      if (fp4) {
        decode_block<true>(bytes, row_index, rows, k0, count, k_step, scales, *job.table, out, job.width);
      } else {
        decode_block<false>(bytes, row_index, rows, k0, count, k_step, scales, *job.table, out, job.width);
      }
    }
  }
}

// ---- compute --------------------------------------------------------------------------------------

// Where a finished tile goes: D (and C) indices of its element (0, 0) and the index steps per
// row and per column, which cover both majors.
struct TileOutput {
  const float* sums = nullptr;  // micro-tiles [i][j] of MR x NR
  std::int64_t panels_m = 0, panels_n = 0;
  int mr = 0, nr = 0;
  std::int64_t rows = 0, cols = 0;  // the valid part of the tile
  float alpha = 1.0f, beta = 0.0f;
  bool has_c = false;
  void* d = nullptr;
  const void* c = nullptr;
  std::int64_t d_origin = 0, d_row_step = 0, d_col_step = 0;
  std::int64_t c_origin = 0, c_row_step = 0, c_col_step = 0;
};

// alpha * sum (+ beta * C) in fp32, stored as kType with round-to-nearest-even. kType is a
// template argument so that load_value and store_value reduce to the one conversion.
template <DataType kType>
void write_tile_as(const TileOutput& t) {
  const std::int64_t micro_tile = std::int64_t{t.mr} * t.nr;
  for (std::int64_t i = 0; i < t.panels_m; ++i) {
    const std::int64_t r0 = i * t.mr, row_count = std::min<std::int64_t>(t.mr, t.rows - r0);
    for (std::int64_t j = 0; j < t.panels_n; ++j) {
      const std::int64_t c0 = j * t.nr, col_count = std::min<std::int64_t>(t.nr, t.cols - c0);
      const float* micro = t.sums + (i * t.panels_n + j) * micro_tile;
      for (std::int64_t rr = 0; rr < row_count; ++rr) {
        const std::int64_t d_row = t.d_origin + (r0 + rr) * t.d_row_step + c0 * t.d_col_step;
        const std::int64_t c_row = t.c_origin + (r0 + rr) * t.c_row_step + c0 * t.c_col_step;
        for (std::int64_t cc = 0; cc < col_count; ++cc) {
          float value = t.alpha * micro[rr * t.nr + cc];
          if (t.has_c) value += t.beta * load_value(kType, t.c, c_row + cc * t.c_col_step);
          store_value(kType, t.d, d_row + cc * t.d_col_step, value);
        }
      }
    }
  }
}

// One output tile: the fp32 sums in `sums`, then the epilogue.
void compute_tile(const GemmArguments& args, const core::ResolvedGroup& group, const Wave& wave, const TileTask& task,
                  const Blocking& blocking, const float* panels, float* sums) {
  const Slab& slab = wave.slabs[static_cast<std::size_t>(task.slab)];
  const PanelJob& a_job = wave.panels[static_cast<std::size_t>(slab.a_panel)];
  const PanelJob& b_job = wave.panels[static_cast<std::size_t>(slab.b_panel)];
  const int mr = blocking.kernel.mr, nr = blocking.kernel.nr;
  const std::int64_t k_count = group.k;
  const std::int64_t rows = std::min(blocking.tile_m, slab.m1 - slab.m0 - task.m0);
  const std::int64_t cols = std::min(blocking.tile_n, slab.n1 - slab.n0 - task.n0);
  const std::int64_t panels_m = (rows + mr - 1) / mr, panels_n = (cols + nr - 1) / nr;
  const float* a_panels = panels + a_job.offset + static_cast<std::size_t>(task.m0 * k_count);
  const float* b_panels = panels + b_job.offset + static_cast<std::size_t>(task.n0 * k_count);
  const std::size_t micro_tile = static_cast<std::size_t>(mr * nr);
  std::memset(sums, 0, static_cast<std::size_t>(panels_m * panels_n) * micro_tile * sizeof(float));
  for (std::int64_t k0 = 0; k0 < k_count; k0 += kChunkK) {
    const std::int64_t chunk = std::min(kChunkK, k_count - k0);
    for (std::int64_t j = 0; j < panels_n; ++j) {
      const float* b = b_panels + static_cast<std::size_t>((j * k_count + k0) * nr);
      for (std::int64_t i = 0; i < panels_m; ++i) {
        const float* a = a_panels + static_cast<std::size_t>((i * k_count + k0) * mr);
        blocking.kernel.fn(chunk, a, b, sums + static_cast<std::size_t>(i * panels_n + j) * micro_tile);
      }
    }
  }

  // D(m, n) is at m * ld + n (n-major) or n * ld + m (m-major); C has D's major.
  const bool d_n_contiguous = args.d_major == Major::n;
  const std::int64_t m_first = slab.m0 + task.m0, n_first = slab.n0 + task.n0;
  TileOutput out;
  out.sums = sums;
  out.panels_m = panels_m;
  out.panels_n = panels_n;
  out.mr = mr;
  out.nr = nr;
  out.rows = rows;
  out.cols = cols;
  out.alpha = group.alpha;
  out.beta = group.beta;
  out.has_c = args.has_c;
  // TensorRef holds every tensor as const; D's pointer came from the user's writable d.
  out.d = const_cast<void*>(group.d.data);
  out.d_origin = slab.batch * group.d.batch_stride + core::matrix_offset(d_n_contiguous, m_first, n_first, group.d.ld);
  out.d_row_step = d_n_contiguous ? group.d.ld : 1;
  out.d_col_step = d_n_contiguous ? 1 : group.d.ld;
  if (args.has_c) {
    out.c = group.c.data;
    out.c_origin =
        slab.batch * group.c.batch_stride + core::matrix_offset(d_n_contiguous, m_first, n_first, group.c.ld);
    out.c_row_step = d_n_contiguous ? group.c.ld : 1;
    out.c_col_step = d_n_contiguous ? 1 : group.c.ld;
  }
  switch (args.d_type) {
    case DataType::f16: write_tile_as<DataType::f16>(out); break;
    case DataType::bf16: write_tile_as<DataType::bf16>(out); break;
    default: write_tile_as<DataType::f32>(out); break;
  }
}

// 64-byte aligned float storage (a cache line; whole vectors for the micro-kernel's loads).
struct AlignedFloats {
  struct Free {
    void operator()(float* p) const { ::operator delete[](p, std::align_val_t{64}); }
  };
  std::unique_ptr<float[], Free> data;
  explicit AlignedFloats(std::size_t count)
      : data(static_cast<float*>(
            ::operator new[](std::max<std::size_t>(count, 1) * sizeof(float), std::align_val_t{64}))) {}
};

}  // namespace

Status run(const GemmArguments& args, int threads) {
  try {
    static const MicroKernel kernel = select_micro_kernel();
    Blocking blocking;
    blocking.kernel = kernel;
    blocking.tile_m = std::int64_t{blocking.kernel.mr} * kTilePanelsM;
    blocking.tile_n = std::int64_t{blocking.kernel.nr} * kTilePanelsN;
    const std::vector<core::ResolvedGroup> groups = resolve_host_groups(args);
    const DecodeTable a_table(args.a_type.element), b_table(args.b_type.element);
    const std::vector<Wave> waves = plan_waves(args, groups, blocking, a_table, b_table);

    std::size_t panel_floats = 0;
    for (const Wave& wave : waves) panel_floats = std::max(panel_floats, wave.floats);
    const AlignedFloats panels(panel_floats);
    double multiply_adds = 0;
    for (const core::ResolvedGroup& g : groups) multiply_adds += static_cast<double>(g.l) * g.m * g.n * g.k;
    const int workers = static_cast<int>(
        std::clamp(multiply_adds / kMultiplyAddsPerWorker, 1.0, static_cast<double>(resolve_thread_count(threads))));
    std::vector<AlignedFloats> sums;
    sums.reserve(static_cast<std::size_t>(workers));
    for (int w = 0; w < workers; ++w) sums.emplace_back(static_cast<std::size_t>(blocking.tile_m * blocking.tile_n));

    for (const Wave& wave : waves) {
      parallel_for(static_cast<std::int64_t>(wave.decodes.size()), workers, [&](std::int64_t t, int) {
        const DecodeTask& task = wave.decodes[static_cast<std::size_t>(t)];
        const PanelJob& job = wave.panels[static_cast<std::size_t>(task.panel)];
        decode_micro_panels(job, task.first, task.last, panels.data.get() + job.offset);
      });
      parallel_for(static_cast<std::int64_t>(wave.tiles.size()), workers, [&](std::int64_t t, int worker) {
        const TileTask& task = wave.tiles[static_cast<std::size_t>(t)];
        const core::ResolvedGroup& group =
            groups[static_cast<std::size_t>(wave.slabs[static_cast<std::size_t>(task.slab)].group)];
        compute_tile(args, group, wave, task, blocking, panels.data.get(),
                     sums[static_cast<std::size_t>(worker)].data.get());
      });
    }
  } catch (const std::bad_alloc&) {
    return Status::error(StatusCode::internal_error, -1, "", "the cpu back end could not allocate its working memory");
  } catch (const std::exception& e) {
    return Status::error(StatusCode::internal_error, -1, "", std::string("the cpu back end failed: ") + e.what());
  }
  return Status::success();
}

}  // namespace bsgemm::cpu
