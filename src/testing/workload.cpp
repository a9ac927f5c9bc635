// Random grouped-GEMM workloads: layout of every buffer, random data, quantization, and the
// expected output.
//
// Data
//   A: N(0, 1) values; B: N(0, 1) / sqrt(K) (so that D is O(1) and safe in f16). Every
//   (row, 32-column block) of A and B is multiplied by 2^u, u uniform in {-3, ..., 3}, so that
//   neighbouring block scales differ; a spec's a_exponent / b_exponent scale A and B by a further
//   power of two. C: N(0, 1). Each row of each tensor draws from its own
//   splitmix64 stream, seeded from (seed, tensor, group, batch, row): the data depend on the spec
//   only, never on the thread count or on how rows are split into work.
//   The fp32 rows are quantized with the library's own quantize(), in row ranges that start on a
//   128-row boundary (so that fp8-block128 B blocks and blocked-layout atoms are never split), in
//   parallel over groups and ranges. An nvfp4 operand has one global scale per group (alpha is per
//   group): a first pass finds the amax over all its batches and ranges, and every range is then
//   quantized with that scale; alpha_g = spec.alpha * s_g(A_g) * s_g(B_g).
//
// Strides
//   Every leading dimension is the contiguous extent rounded up to a 16-byte multiple (what every
//   back end requires); with padded_strides one more 16-byte step. Batch strides are whole lines,
//   plus a 32-byte gap when padded. Scale leading dimensions are dense, or, when padded, 16 bytes
//   past the next 16-byte multiple; scale batch strides are dense, or 16 bytes more when padded. A
//   stride equal to the dense default is passed as 0, so that the defaults are exercised too.
#include "src/testing/workload.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <exception>
#include <limits>
#include <mutex>
#include <new>
#include <string>
#include <utility>

#include "bsgemm/formats.hpp"
#include "bsgemm/gemm.hpp"
#include "bsgemm/recipe.hpp"
#include "src/core/resolved_group.hpp"
#include "src/cpu/host_groups.hpp"
#include "src/cpu/parallel_for.hpp"

namespace bsgemm::testing {
namespace {

// ---- random numbers --------------------------------------------------------------------------------

// splitmix64 (Steele, Lea and Flood, 2014): a 64-bit counter through a bijective mixer. Good
// enough statistically for test data, and seeding one stream per row costs nothing.
constexpr std::uint64_t kGolden = 0x9E3779B97F4A7C15ull;

constexpr std::uint64_t mix64(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

struct SplitMix64 {
  std::uint64_t state;
  std::uint64_t next() { return mix64(state += kGolden); }
};

enum class Tensor : std::uint64_t { a = 1, b = 2, c = 3 };

// The seed of one row's stream: every coordinate goes through the mixer in turn.
std::uint64_t row_seed(std::uint64_t seed, Tensor tensor, int group, std::int64_t batch, std::int64_t row) {
  std::uint64_t h = mix64(seed + kGolden);
  h = mix64(h ^ static_cast<std::uint64_t>(tensor));
  h = mix64(h ^ static_cast<std::uint64_t>(static_cast<std::int64_t>(group)));
  h = mix64(h ^ static_cast<std::uint64_t>(batch));
  return mix64(h ^ static_cast<std::uint64_t>(row));
}

// Two independent N(0, 1) values (Marsaglia's polar method: a point uniform in the unit disc,
// from two 32-bit halves of the stream, scaled by sqrt(-2 ln s / s); no trigonometry).
void normal_pair(SplitMix64& rng, float* z0, float* z1) {
  for (;;) {
    const std::uint64_t bits = rng.next();
    const float u = static_cast<float>(static_cast<std::int32_t>(bits >> 32)) * 0x1p-31f;  // [-1, 1)
    const float v = static_cast<float>(static_cast<std::int32_t>(bits)) * 0x1p-31f;
    const float s = u * u + v * v;
    if (s >= 1.0f || s == 0.0f) continue;
    const float f = std::sqrt(-2.0f * std::log(s) / s);
    *z0 = u * f;
    *z1 = v * f;
    return;
  }
}

// One row of k values ~ N(0, 1), times 2^u per 32-column block when `block_exponents`, times factor.
void random_row(std::uint64_t seed, Tensor tensor, int group, std::int64_t batch, std::int64_t row, std::int64_t k,
                bool block_exponents, float factor, float* out) {
  static constexpr float kPowersOfTwo[7] = {0.125f, 0.25f, 0.5f, 1.0f, 2.0f, 4.0f, 8.0f};  // 2^u, u = -3..3
  SplitMix64 rng{row_seed(seed, tensor, group, batch, row)};
  for (std::int64_t k0 = 0; k0 < k; k0 += 32) {
    float block_factor = factor;
    if (block_exponents) block_factor = factor * kPowersOfTwo[rng.next() % 7];
    const std::int64_t k1 = std::min<std::int64_t>(k0 + 32, k);
    for (std::int64_t i = k0; i < k1; i += 2) {
      float z0, z1;
      normal_pair(rng, &z0, &z1);
      out[i] = z0 * block_factor;
      if (i + 1 < k1) out[i + 1] = z1 * block_factor;
    }
  }
}

// ---- buffers and strides ---------------------------------------------------------------------------

Buffer allocate(std::string name, std::size_t bytes) {
  auto* memory = static_cast<std::uint8_t*>(::operator new[](std::max<std::size_t>(bytes, 1), std::align_val_t{64}));
  std::memset(memory, 0, bytes);
  Buffer buffer;
  buffer.name = std::move(name);
  buffer.bytes = bytes;
  buffer.data =
      std::shared_ptr<std::uint8_t[]>(memory, [](std::uint8_t* p) { ::operator delete[](p, std::align_val_t{64}); });
  return buffer;
}

std::string indexed(const char* name, int index) { return std::string(name) + "[" + std::to_string(index) + "]"; }

// Elements of type t in 16 bytes.
std::int64_t elements_in_16_bytes(DataType t) { return 128 / bits_of(t); }

// A strided matrix (data or scales) as laid out in its buffer: the strides handed to the
// arguments (0 where the dense default is meant) and the effective ones.
struct Geometry {
  std::int64_t ld = 0, batch_stride = 0;          // effective
  std::int64_t ld_arg = 0, batch_stride_arg = 0;  // as passed (0: the default)
  std::int64_t batch_extent = 0;                  // elements one batch spans (what the last batch needs)
  std::int64_t elements(std::int64_t batches) const { return (batches - 1) * batch_stride + batch_extent; }
};

// A data matrix of rows x cols of type t, `col_contiguous` as in core::matrix_offset.
Geometry data_geometry(DataType t, bool col_contiguous, std::int64_t rows, std::int64_t cols, bool padded) {
  const std::int64_t step = elements_in_16_bytes(t);
  const std::int64_t extent = col_contiguous ? cols : rows, lines = col_contiguous ? rows : cols;
  Geometry g;
  g.ld = round_up(extent, step) + (padded ? step : 0);
  g.ld_arg = g.ld == extent ? 0 : g.ld;
  g.batch_extent = core::matrix_extent(col_contiguous, rows, cols, g.ld);
  // Whole lines (the dense default) keep every batch 16-byte aligned.
  g.batch_stride = lines * g.ld + (padded ? 2 * step : 0);
  const std::int64_t dense_batch_stride = core::dense_batch_stride(col_contiguous, rows, cols, g.ld);
  g.batch_stride_arg = g.batch_stride == dense_batch_stride ? 0 : g.batch_stride;
  return g;
}

// A scale matrix of rows x cols in `layout`, elements of type `scale`.
Geometry scale_geometry(ScaleLayout layout, DataType scale, std::int64_t rows, std::int64_t cols, bool padded) {
  const std::int64_t step = 16 / core::scale_bytes(scale);
  Geometry g;
  const std::int64_t dense = default_scale_ld(layout, rows, cols);
  g.ld = (padded && layout != ScaleLayout::blocked_128x4) ? round_up(dense, step) + step : dense;
  g.ld_arg = g.ld == dense ? 0 : g.ld;
  g.batch_extent = scale_extent(layout, rows, cols, g.ld);
  const std::int64_t dense_batch_stride = core::dense_scale_batch_stride(layout, rows, cols, g.ld);
  g.batch_stride = dense_batch_stride + (padded ? step : 0);
  g.batch_stride_arg = g.batch_stride == dense_batch_stride ? 0 : g.batch_stride;
  return g;
}

// ---- what gets filled ------------------------------------------------------------------------------

// One operand matrix (one batch of one group, or one group's rows of a shared tensor) to draw and
// quantize. `owner` names the (group, operand) whose nvfp4 global scale it shares.
struct OperandFill {
  Operand which = Operand::a;
  OperandType type;
  Major major = Major::k;
  int group = 0;
  std::int64_t batch = 0;
  std::int64_t rows = 0, k = 0;
  std::uint8_t* data = nullptr;  // element (0, 0)
  std::int64_t ld = 0;
  std::uint8_t* scales = nullptr;  // scale (0, 0)
  std::int64_t scale_ld = 0;
  int owner = 0;
};

// One matrix of C (d_type, d_major).
struct OutputFill {
  int group = 0;
  std::int64_t batch = 0;
  std::int64_t rows = 0, cols = 0;
  std::uint8_t* data = nullptr;
  std::int64_t ld = 0;
};

// A range of rows of one fill.
struct RowRange {
  int fill = 0;
  std::int64_t row0 = 0, row1 = 0;
};

// The most bytes of nvfp4 operands' values kept from the pass that takes their amax to their
// quantization (beyond it they are drawn twice): 4 GiB, which the decode benchmark's 940 million weights fit.
constexpr std::int64_t kKeptDrawBytes = std::int64_t{4} << 30;

// Rows per quantization range: about 2^20 values, a multiple of 128, and for fp8-block128 B in the
// blocked layout a multiple of 128 scale rows (128 * 128 rows) so that no atom is split.
std::int64_t rows_per_range(const OperandFill& f) {
  std::int64_t rows = 128 * std::max<std::int64_t>(1, (std::int64_t{1} << 20) / (128 * f.k));
  if (f.which == Operand::b && f.type.recipe == Recipe::fp8_block128 &&
      f.type.scale_layout == ScaleLayout::blocked_128x4)
    rows = round_up(rows, 128 * 128);
  return rows;
}

template <class Fill>
std::vector<RowRange> split_rows(const std::vector<Fill>& fills, std::int64_t (*rows_per)(const Fill&)) {
  std::vector<RowRange> ranges;
  for (std::size_t i = 0; i < fills.size(); ++i) {
    const std::int64_t step = rows_per(fills[i]);
    for (std::int64_t r = 0; r < fills[i].rows; r += step)
      ranges.push_back({static_cast<int>(i), r, std::min(r + step, fills[i].rows)});
  }
  return ranges;
}

std::int64_t output_rows_per_range(const OutputFill& f) {
  return std::max<std::int64_t>(1, (std::int64_t{1} << 16) / f.cols);
}

Tensor tensor_of(Operand which) { return which == Operand::a ? Tensor::a : Tensor::b; }

float operand_factor(const OperandFill& f, const WorkloadSpec& spec) {
  const double spread = f.which == Operand::a ? 1.0 : 1.0 / std::sqrt(static_cast<double>(f.k));
  return static_cast<float>(std::ldexp(spread, f.which == Operand::a ? spec.a_exponent : spec.b_exponent));
}

// The fp32 rows [range.row0, range.row1) of a fill, row-major with ld k.
void draw_rows(const OperandFill& f, const RowRange& range, const WorkloadSpec& spec, std::vector<float>& out) {
  out.resize(static_cast<std::size_t>((range.row1 - range.row0) * f.k));
  const float factor = operand_factor(f, spec);
  for (std::int64_t r = range.row0; r < range.row1; ++r)
    random_row(spec.seed, tensor_of(f.which), f.group, f.batch, r, f.k, true, factor,
               out.data() + static_cast<std::size_t>((r - range.row0) * f.k));
}

// Where a fill's values come from besides a draw: rows [0, held_rows) of a cache entry, and an entry being drawn
// (rows [0, fill rows)) that each range's draw also goes into.
struct CachedRows {
  const float* held = nullptr;
  std::int64_t held_rows = 0;
  float* store = nullptr;
};

// The fp32 rows [range.row0, range.row1) of a fill, row-major with ld k: in the cache where it holds them, else
// drawn into `scratch` (and copied into the cache's entry being drawn, if any).
const float* obtain_rows(const OperandFill& f, const RowRange& range, const WorkloadSpec& spec, const CachedRows& cached,
                         std::vector<float>& scratch) {
  const auto first = static_cast<std::size_t>(range.row0 * f.k);
  if (cached.held != nullptr && range.row1 <= cached.held_rows) return cached.held + first;
  draw_rows(f, range, spec, scratch);
  if (cached.store != nullptr) std::copy(scratch.begin(), scratch.end(), cached.store + first);
  return scratch.data();
}

// The QuantizedOperand for rows [row0, row1) of a fill.
QuantizedOperand range_operand(const OperandFill& f, std::int64_t row0, std::int64_t row1) {
  QuantizedOperand q;
  q.type = f.type;
  q.which = f.which;
  q.rows = row1 - row0;
  q.k = f.k;
  q.major = f.major;
  const std::int64_t element_offset = f.major == Major::k ? row0 * f.ld : row0;
  q.data = f.data + bytes_for(f.type.element, element_offset);
  q.ld = f.ld;
  const std::int64_t cols = scale_cols(f.type.recipe, f.k);
  const std::int64_t scale_row0 = cpu::scale_row_of(f.type.recipe, f.which, row0);
  q.scales =
      f.scales + scale_offset(f.type.scale_layout, scale_row0, 0, cols, f.scale_ld) * core::scale_bytes(f.type.scale);
  q.scale_ld = f.scale_ld;
  return q;
}

Status invalid_spec(int group, const char* field, const std::string& explanation) {
  return Status::error(StatusCode::invalid_argument, group, field, explanation);
}

// Shapes the buffers can be laid out for; the rest is can_implement's job.
Status check_spec(const WorkloadSpec& spec) {
  if (spec.groups.empty()) return invalid_spec(-1, "groups", "the workload has no groups");
  if (spec.groups.size() > static_cast<std::size_t>(std::numeric_limits<std::int32_t>::max()))
    return invalid_spec(-1, "groups", "more groups than an int32 counts");
  const bool moe = spec.layout != GroupLayout::pointer_array;
  for (std::size_t i = 0; i < spec.groups.size(); ++i) {
    const GroupShape& s = spec.groups[i];
    const int g = static_cast<int>(i);
    if (s.m < 0) return invalid_spec(g, "m", std::to_string(s.m) + " is negative");
    if (s.n < 1) return invalid_spec(g, "n", std::to_string(s.n) + " is smaller than 1");
    if (s.k < 1) return invalid_spec(g, "k", std::to_string(s.k) + " is smaller than 1");
    if (s.l < 1) return invalid_spec(g, "l", std::to_string(s.l) + " is smaller than 1");
    if (moe && s.l != 1)
      return invalid_spec(g, "l", "the contiguous and masked layouts have one batch per group (L = 1)");
    if (moe && (s.n != spec.groups[0].n || s.k != spec.groups[0].k))
      return invalid_spec(g, "n",
                          "the contiguous and masked layouts need one N and one K for all groups (group 0 has " +
                              std::to_string(spec.groups[0].n) + " x " + std::to_string(spec.groups[0].k) + ")");
  }
  if (spec.moe_rows < 0) return invalid_spec(-1, "rows", std::to_string(spec.moe_rows) + " is negative");
  return Status::success();
}

}  // namespace

// ---- DrawCache -----------------------------------------------------------------------------------------

const DrawCache::Entry* DrawCache::find(const Key& key) const {
  for (const Entry& entry : entries_)
    if (entry.complete && entry.key == key) return &entry;
  return nullptr;
}

DrawCache::Entry* DrawCache::reserve(const Key& key, std::int64_t rows) {
  for (const Entry& entry : entries_)
    if (entry.key == key) return nullptr;
  Entry entry;
  entry.key = key;
  entry.rows = rows;
  const std::int64_t bytes = bytes_of(entry);
  if (bytes > max_bytes_ - bytes_) return nullptr;
  try {
    entry.values.reset(new float[static_cast<std::size_t>(rows * key.k)]);
  } catch (const std::bad_alloc&) {
    return nullptr;  // the cache only saves time: without room the values are drawn each time
  }
  bytes_ += bytes;
  entries_.push_back(std::move(entry));
  return &entries_.back();
}

void DrawCache::finish(bool drawn) {
  for (Entry& entry : entries_) {
    if (entry.complete) continue;
    if (drawn) {
      entry.complete = true;
      ++stores_;
    } else {
      bytes_ -= bytes_of(entry);
    }
  }
  if (!drawn) std::erase_if(entries_, [](const Entry& entry) { return !entry.complete; });
}

// ---- HostWorkload::create ------------------------------------------------------------------------------

Status HostWorkload::create(const WorkloadSpec& spec, HostWorkload* out, DrawCache* cache) {
  if (out == nullptr) return invalid_spec(-1, "out", "the output pointer is null");
  if (Status s = check_spec(spec); !s.ok()) return s;
  try {
    HostWorkload w;
    w.spec_ = spec;
    GemmArguments& args = w.args_;
    args.a_type = spec.a_type;
    args.b_type = spec.b_type;
    args.a_major = spec.a_major;
    args.b_major = spec.b_major;
    args.d_major = spec.d_major;
    args.d_type = spec.d_type;
    args.has_c = spec.beta != 0.0f;
    args.layout = spec.layout;
    args.descriptions = MemoryLocation::host;

    const bool padded = spec.padded_strides;
    const bool a_k = spec.a_major == Major::k, b_k = spec.b_major == Major::k, d_n = spec.d_major == Major::n;
    const DataType a_elem = spec.a_type.element, b_elem = spec.b_type.element;
    const std::int64_t groups = static_cast<std::int64_t>(spec.groups.size());
    std::vector<OperandFill> operands;
    std::vector<OutputFill> outputs;
    // Owners of nvfp4 global scales: 2 * group + (0 for A, 1 for B).
    auto owner = [](int group, Operand which) { return 2 * group + (which == Operand::a ? 0 : 1); };

    if (spec.layout == GroupLayout::pointer_array) {
      args.num_groups = static_cast<std::int32_t>(groups);
      w.groups_.resize(spec.groups.size());
      for (int g = 0; g < static_cast<int>(groups); ++g) {
        const GroupShape& s = spec.groups[static_cast<std::size_t>(g)];
        GroupProblem& p = w.groups_[static_cast<std::size_t>(g)];
        p.m = s.m;
        p.n = s.n;
        p.k = s.k;
        p.l = s.l;
        p.alpha = spec.alpha;
        p.beta = spec.beta;
        if (s.m == 0) continue;  // an empty group: nothing is read or written, so it has no buffers
        const Geometry ga = data_geometry(a_elem, a_k, s.m, s.k, padded);
        const Geometry gb = data_geometry(b_elem, b_k, s.n, s.k, padded);
        const Geometry gd = data_geometry(spec.d_type, d_n, s.m, s.n, padded);
        const std::int64_t a_rows = scale_rows(spec.a_type.recipe, Operand::a, s.m),
                           a_cols = scale_cols(spec.a_type.recipe, s.k);
        const std::int64_t b_rows = scale_rows(spec.b_type.recipe, Operand::b, s.n),
                           b_cols = scale_cols(spec.b_type.recipe, s.k);
        const Geometry gsa = scale_geometry(spec.a_type.scale_layout, spec.a_type.scale, a_rows, a_cols, padded);
        const Geometry gsb = scale_geometry(spec.b_type.scale_layout, spec.b_type.scale, b_rows, b_cols, padded);
        Buffer a = allocate(indexed("A", g), static_cast<std::size_t>(bytes_for(a_elem, ga.elements(s.l))));
        Buffer b = allocate(indexed("B", g), static_cast<std::size_t>(bytes_for(b_elem, gb.elements(s.l))));
        Buffer sfa = allocate(indexed("SFA", g),
                              static_cast<std::size_t>(gsa.elements(s.l) * core::scale_bytes(spec.a_type.scale)));
        Buffer sfb = allocate(indexed("SFB", g),
                              static_cast<std::size_t>(gsb.elements(s.l) * core::scale_bytes(spec.b_type.scale)));
        Buffer d = allocate(indexed("D", g), static_cast<std::size_t>(bytes_for(spec.d_type, gd.elements(s.l))));
        p.a = a.get();
        p.b = b.get();
        p.sfa = sfa.get();
        p.sfb = sfb.get();
        p.d = d.get();
        p.lda = ga.ld_arg;
        p.ldb = gb.ld_arg;
        p.ldd = gd.ld_arg;
        p.batch_stride_a = ga.batch_stride_arg;
        p.batch_stride_b = gb.batch_stride_arg;
        p.batch_stride_d = gd.batch_stride_arg;
        p.sfa_ld = gsa.ld_arg;
        p.sfb_ld = gsb.ld_arg;
        p.sfa_batch_stride = gsa.batch_stride_arg;
        p.sfb_batch_stride = gsb.batch_stride_arg;
        for (std::int64_t l = 0; l < s.l; ++l) {
          operands.push_back({Operand::a, spec.a_type, spec.a_major, g, l, s.m, s.k,
                              a.get() + bytes_for(a_elem, l * ga.batch_stride), ga.ld,
                              sfa.get() + l * gsa.batch_stride * core::scale_bytes(spec.a_type.scale), gsa.ld,
                              owner(g, Operand::a)});
          operands.push_back({Operand::b, spec.b_type, spec.b_major, g, l, s.n, s.k,
                              b.get() + bytes_for(b_elem, l * gb.batch_stride), gb.ld,
                              sfb.get() + l * gsb.batch_stride * core::scale_bytes(spec.b_type.scale), gsb.ld,
                              owner(g, Operand::b)});
        }
        if (args.has_c) {
          Buffer c = allocate(indexed("C", g), static_cast<std::size_t>(bytes_for(spec.d_type, gd.elements(s.l))));
          p.c = c.get();
          p.ldc = gd.ld_arg;
          p.batch_stride_c = gd.batch_stride_arg;
          for (std::int64_t l = 0; l < s.l; ++l)
            outputs.push_back({g, l, s.m, s.n, c.get() + bytes_for(spec.d_type, l * gd.batch_stride), gd.ld});
          w.buffers_.push_back(std::move(c));
        }
        for (Buffer* buffer : {&a, &b, &sfa, &sfb, &d}) w.buffers_.push_back(std::move(*buffer));
      }
      args.groups = w.groups_.data();
    } else {
      const bool contiguous = spec.layout == GroupLayout::contiguous;
      const std::int32_t n = spec.groups[0].n, k = spec.groups[0].k;
      std::int64_t sum_m = 0, max_m = 0;
      for (const GroupShape& s : spec.groups) {
        sum_m += s.m;
        max_m = std::max<std::int64_t>(max_m, s.m);
      }
      const std::int64_t rows = spec.moe_rows != 0 ? spec.moe_rows : (contiguous ? sum_m : max_m);
      // The masked form repeats A, SFA, C and D per group; the contiguous form has one of each.
      const std::int64_t ad_batches = contiguous ? 1 : groups;
      MoeGroups& moe = args.moe;
      moe.num_groups = static_cast<std::int32_t>(groups);
      moe.n = n;
      moe.k = k;
      moe.rows = rows;
      const Geometry ga = data_geometry(a_elem, a_k, rows, k, padded);
      const Geometry gb = data_geometry(b_elem, b_k, n, k, padded);
      const Geometry gd = data_geometry(spec.d_type, d_n, rows, n, padded);
      const std::int64_t a_cols = scale_cols(spec.a_type.recipe, k);
      const std::int64_t b_rows = scale_rows(spec.b_type.recipe, Operand::b, n),
                         b_cols = scale_cols(spec.b_type.recipe, k);
      // A blocked SFA of the contiguous form gives each group a block of round_up(M_g, 128) rows;
      // sized as problem.hpp asks, it also fits any other group sizes written into the offsets later
      // (the CUDA-graph replay tests do that).
      const std::int64_t sfa_rows = contiguous && spec.a_type.scale_layout == ScaleLayout::blocked_128x4
                                        ? contiguous_blocked_sfa_rows(rows, static_cast<std::int32_t>(groups))
                                        : rows;
      const Geometry gsa = scale_geometry(spec.a_type.scale_layout, spec.a_type.scale, sfa_rows, a_cols, padded);
      const Geometry gsb = scale_geometry(spec.b_type.scale_layout, spec.b_type.scale, b_rows, b_cols, padded);
      const std::int64_t sfa_bytes = core::scale_bytes(spec.a_type.scale),
                         sfb_bytes = core::scale_bytes(spec.b_type.scale);
      Buffer a = allocate("A", static_cast<std::size_t>(bytes_for(a_elem, ga.elements(ad_batches))));
      Buffer b = allocate("B", static_cast<std::size_t>(bytes_for(b_elem, gb.elements(groups))));
      Buffer sfa = allocate("SFA", static_cast<std::size_t>(gsa.elements(ad_batches) * sfa_bytes));
      Buffer sfb = allocate("SFB", static_cast<std::size_t>(gsb.elements(groups) * sfb_bytes));
      Buffer d = allocate("D", static_cast<std::size_t>(bytes_for(spec.d_type, gd.elements(ad_batches))));
      moe.a = a.get();
      moe.b = b.get();
      moe.sfa = sfa.get();
      moe.sfb = sfb.get();
      moe.d = d.get();
      moe.lda = ga.ld_arg;
      moe.ldb = gb.ld_arg;
      moe.ldd = gd.ld_arg;
      moe.ldc = gd.ld_arg;
      moe.sfa_ld = gsa.ld_arg;
      moe.sfb_ld = gsb.ld_arg;
      // Strides between groups: B and SFB in both forms, A, SFA, C and D in the masked form.
      moe.batch_stride_b = gb.batch_stride_arg;
      moe.sfb_batch_stride = gsb.batch_stride_arg;
      if (!contiguous) {
        moe.batch_stride_a = ga.batch_stride_arg;
        moe.batch_stride_c = gd.batch_stride_arg;
        moe.batch_stride_d = gd.batch_stride_arg;
        moe.sfa_batch_stride = gsa.batch_stride_arg;
      }
      moe.alpha_value = spec.alpha;
      moe.beta_value = spec.beta;
      Buffer c;
      if (args.has_c) {
        c = allocate("C", static_cast<std::size_t>(bytes_for(spec.d_type, gd.elements(ad_batches))));
        moe.c = c.get();
      }

      if (contiguous) {
        const bool with_zero = spec.offsets_start_with_zero;
        const std::size_t entries = spec.groups.size() + (with_zero ? 1 : 0);
        const std::size_t entry_bytes = spec.offsets_type == IndexType::i32 ? 4 : 8;
        Buffer offsets = allocate("offsets", entries * entry_bytes);
        std::int64_t end = 0;
        for (std::size_t i = 0; i < entries; ++i) {
          if (!(with_zero && i == 0)) end += spec.groups[i - (with_zero ? 1 : 0)].m;
          if (spec.offsets_type == IndexType::i32) {
            reinterpret_cast<std::int32_t*>(offsets.get())[i] = static_cast<std::int32_t>(end);
          } else {
            reinterpret_cast<std::int64_t*>(offsets.get())[i] = end;
          }
        }
        moe.offsets = offsets.get();
        moe.offsets_type = spec.offsets_type;
        moe.offsets_start_with_zero = with_zero;
        w.buffers_.push_back(std::move(offsets));
      } else {
        w.masked_m_.resize(spec.groups.size());
        for (std::size_t i = 0; i < spec.groups.size(); ++i) w.masked_m_[i] = spec.groups[i].m;
        moe.masked_m = w.masked_m_.data();
      }

      // What each group fills: its rows of A (contiguous) or its whole A[g] (masked: rows beyond
      // m_g hold random data too, which must not reach D), and its B[g].
      std::int64_t begin = 0, sfa_block_row0 = 0;
      for (int g = 0; g < static_cast<int>(groups); ++g) {
        const std::int64_t m_g = spec.groups[static_cast<std::size_t>(g)].m;
        if (contiguous && m_g > 0 && begin + m_g <= rows) {
          const std::int64_t sfa_offset = spec.a_type.scale_layout == ScaleLayout::blocked_128x4
                                              ? sfa_block_row0 * round_up(a_cols, 4)
                                              : scale_offset(spec.a_type.scale_layout, begin, 0, a_cols, gsa.ld);
          operands.push_back({Operand::a, spec.a_type, spec.a_major, g, 0, m_g, k,
                              a.get() + bytes_for(a_elem, core::matrix_offset(a_k, begin, 0, ga.ld)), ga.ld,
                              sfa.get() + sfa_offset * sfa_bytes, gsa.ld, owner(g, Operand::a)});
          if (args.has_c)
            outputs.push_back(
                {g, 0, m_g, n, c.get() + bytes_for(spec.d_type, core::matrix_offset(d_n, begin, 0, gd.ld)), gd.ld});
        }
        if (!contiguous && rows > 0) {
          operands.push_back({Operand::a, spec.a_type, spec.a_major, g, 0, rows, k,
                              a.get() + bytes_for(a_elem, g * ga.batch_stride), ga.ld,
                              sfa.get() + g * gsa.batch_stride * sfa_bytes, gsa.ld, owner(g, Operand::a)});
          if (args.has_c)
            outputs.push_back({g, 0, rows, n, c.get() + bytes_for(spec.d_type, g * gd.batch_stride), gd.ld});
        }
        operands.push_back({Operand::b, spec.b_type, spec.b_major, g, 0, n, k,
                            b.get() + bytes_for(b_elem, g * gb.batch_stride), gb.ld,
                            sfb.get() + g * gsb.batch_stride * sfb_bytes, gsb.ld, owner(g, Operand::b)});
        begin += m_g;
        sfa_block_row0 += round_up(m_g, 128);
      }
      for (Buffer* buffer : {&a, &b, &sfa, &sfb, &d}) w.buffers_.push_back(std::move(*buffer));
      if (args.has_c) w.buffers_.push_back(std::move(c));
    }

    // Everything can_implement can say about the description, before any data is drawn.
    RunOptions cpu_options;
    cpu_options.backend = Backend::cpu;
    if (Status s = can_implement(args, cpu_options); !s.ok()) return s;

    const int threads = cpu::resolve_thread_count(spec.threads);
    std::vector<std::vector<float>> scratch(static_cast<std::size_t>(threads));
    const std::vector<RowRange> ranges = split_rows(operands, &rows_per_range);

    // Each fill's values from the cache where it holds them; the rest are drawn, and go into it where they fit. The
    // entries are all reserved before any range is drawn, so their values stay where they are while the ranges run.
    std::vector<CachedRows> cached(operands.size());
    if (cache != nullptr) {
      for (std::size_t i = 0; i < operands.size(); ++i) {
        const OperandFill& f = operands[i];
        const DrawCache::Key key{spec.seed, static_cast<int>(f.which), f.group, f.batch, f.k,
                                 f.which == Operand::a ? spec.a_exponent : spec.b_exponent};
        if (const DrawCache::Entry* held = cache->find(key)) {
          cached[i].held = held->values.get();
          cached[i].held_rows = held->rows;
          if (held->rows >= f.rows) ++cache->hits_;
        } else if (DrawCache::Entry* entry = cache->reserve(key, f.rows)) {
          cached[i].store = entry->values.get();
        }
      }
    }
    // A failure below gives back the entries this call reserved (their values were not all drawn).
    struct FinishCache {
      DrawCache* cache;
      bool drawn = false;
      ~FinishCache() {
        if (cache != nullptr) cache->finish(drawn);
      }
    } finish_cache{cache};

    // nvfp4: the amax of every (group, operand) over all its batches and ranges, then s_g. The values
    // drawn for it are kept for the quantization below while they fit kKeptDrawBytes, else drawn again.
    std::vector<float> global_scale(static_cast<std::size_t>(2 * groups), 1.0f);
    std::vector<std::vector<float>> kept(ranges.size());
    if (spec.a_type.recipe == Recipe::nvfp4 || spec.b_type.recipe == Recipe::nvfp4) {
      std::int64_t nvfp4_values = 0;
      for (const RowRange& range : ranges) {
        const OperandFill& f = operands[static_cast<std::size_t>(range.fill)];
        if (f.type.recipe == Recipe::nvfp4) nvfp4_values += (range.row1 - range.row0) * f.k;
      }
      const bool keep = nvfp4_values * static_cast<std::int64_t>(sizeof(float)) <= kKeptDrawBytes;
      std::vector<float> range_amax(ranges.size(), 0.0f);
      cpu::parallel_for(static_cast<std::int64_t>(ranges.size()), threads, [&](std::int64_t t, int worker) {
        const RowRange& range = ranges[static_cast<std::size_t>(t)];
        const OperandFill& f = operands[static_cast<std::size_t>(range.fill)];
        if (f.type.recipe != Recipe::nvfp4) return;
        // Values the cache holds, or is being given, are read from it again below rather than kept.
        const CachedRows& source = cached[static_cast<std::size_t>(range.fill)];
        const bool kept_here = keep && source.held == nullptr && source.store == nullptr;
        std::vector<float>& values =
            kept_here ? kept[static_cast<std::size_t>(t)] : scratch[static_cast<std::size_t>(worker)];
        const float* rows = obtain_rows(f, range, spec, source, values);
        float amax = 0.0f;
        const std::int64_t count = (range.row1 - range.row0) * f.k;
        for (std::int64_t i = 0; i < count; ++i) amax = std::max(amax, std::fabs(rows[i]));
        range_amax[static_cast<std::size_t>(t)] = amax;
      });
      std::vector<float> owner_amax(global_scale.size(), 0.0f);
      for (std::size_t t = 0; t < ranges.size(); ++t) {
        float& amax = owner_amax[static_cast<std::size_t>(operands[static_cast<std::size_t>(ranges[t].fill)].owner)];
        amax = std::max(amax, range_amax[t]);
      }
      for (std::size_t o = 0; o < global_scale.size(); ++o) {
        const bool nvfp4 = (o % 2 == 0 ? spec.a_type : spec.b_type).recipe == Recipe::nvfp4;
        if (nvfp4) global_scale[o] = nvfp4_global_scale(owner_amax[o]);
      }
      // What this pass drew into the cache serves the quantization below too.
      for (std::size_t i = 0; i < operands.size(); ++i) {
        if (operands[i].type.recipe != Recipe::nvfp4 || cached[i].store == nullptr) continue;
        cached[i] = CachedRows{cached[i].store, operands[i].rows, nullptr};
      }
    }

    // Draw and quantize every range.
    Status failure;
    std::mutex failure_mutex;
    cpu::parallel_for(static_cast<std::int64_t>(ranges.size()), threads, [&](std::int64_t t, int worker) {
      const RowRange& range = ranges[static_cast<std::size_t>(t)];
      const OperandFill& f = operands[static_cast<std::size_t>(range.fill)];
      std::vector<float>& values = scratch[static_cast<std::size_t>(worker)];
      const float* rows = nullptr;
      if (kept[static_cast<std::size_t>(t)].empty()) {
        rows = obtain_rows(f, range, spec, cached[static_cast<std::size_t>(range.fill)], values);
      } else {
        values.swap(kept[static_cast<std::size_t>(t)]);
        kept[static_cast<std::size_t>(t)] = std::vector<float>();  // its memory goes now, not at the end
        rows = values.data();
      }
      QuantizeOptions options = spec.quantize;
      float returned_scale = 1.0f;
      if (f.type.recipe == Recipe::nvfp4) options.nvfp4_global_scale = global_scale[static_cast<std::size_t>(f.owner)];
      const Status s = quantize(rows, f.k, range_operand(f, range.row0, range.row1), options, &returned_scale);
      if (!s.ok()) {
        const std::lock_guard<std::mutex> lock(failure_mutex);
        if (failure.ok()) failure = s;
      }
    });
    if (!failure.ok()) return failure;
    finish_cache.drawn = true;

    // C ~ N(0, 1) in D's type and major.
    const std::vector<RowRange> c_ranges = split_rows(outputs, &output_rows_per_range);
    cpu::parallel_for(static_cast<std::int64_t>(c_ranges.size()), threads, [&](std::int64_t t, int worker) {
      const RowRange& range = c_ranges[static_cast<std::size_t>(t)];
      const OutputFill& f = outputs[static_cast<std::size_t>(range.fill)];
      std::vector<float>& values = scratch[static_cast<std::size_t>(worker)];
      values.resize(static_cast<std::size_t>(f.cols));
      for (std::int64_t r = range.row0; r < range.row1; ++r) {
        random_row(spec.seed, Tensor::c, f.group, f.batch, r, f.cols, false, 1.0f, values.data());
        for (std::int64_t col = 0; col < f.cols; ++col)
          store_value(spec.d_type, f.data, core::matrix_offset(d_n, r, col, f.ld),
                      values[static_cast<std::size_t>(col)]);
      }
    });

    // alpha_g = alpha * s_g(A_g) * s_g(B_g); the global scales are 1 for the other recipes.
    const bool nvfp4 = spec.a_type.recipe == Recipe::nvfp4 || spec.b_type.recipe == Recipe::nvfp4;
    if (spec.layout == GroupLayout::pointer_array) {
      for (int g = 0; g < static_cast<int>(groups); ++g)
        w.groups_[static_cast<std::size_t>(g)].alpha = spec.alpha *
                                                       global_scale[static_cast<std::size_t>(owner(g, Operand::a))] *
                                                       global_scale[static_cast<std::size_t>(owner(g, Operand::b))];
    } else if (nvfp4) {
      w.moe_alpha_.resize(static_cast<std::size_t>(groups));
      for (int g = 0; g < static_cast<int>(groups); ++g)
        w.moe_alpha_[static_cast<std::size_t>(g)] = spec.alpha *
                                                    global_scale[static_cast<std::size_t>(owner(g, Operand::a))] *
                                                    global_scale[static_cast<std::size_t>(owner(g, Operand::b))];
      args.moe.alpha = w.moe_alpha_.data();
    }
    *out = std::move(w);
  } catch (const std::bad_alloc&) {
    return Status::error(StatusCode::internal_error, -1, "", "not enough host memory for the workload's buffers");
  } catch (const std::exception& e) {
    return Status::error(StatusCode::internal_error, -1, "", std::string("creating the workload failed: ") + e.what());
  }
  return Status::success();
}

// ---- queries -----------------------------------------------------------------------------------------

void HostWorkload::poison_output() {
  for (Buffer& buffer : buffers_)
    if (is_output_buffer(buffer)) std::memset(buffer.get(), 0xFF, buffer.bytes);
}

double HostWorkload::flops() const {
  double total = 0;
  for (const GroupShape& s : spec_.groups) total += 2.0 * s.m * s.n * s.k * s.l;
  return total;
}

double HostWorkload::min_bytes() const {
  const OperandType& a = spec_.a_type;
  const OperandType& b = spec_.b_type;
  const auto scale_bytes = [](const OperandType& t, Operand which, double rows, std::int64_t k) {
    return static_cast<double>(scale_rows(t.recipe, which, static_cast<std::int64_t>(rows))) * scale_cols(t.recipe, k) *
           core::scale_bytes(t.scale);
  };
  double total = 0;
  for (const GroupShape& s : spec_.groups) {
    if (s.m == 0) continue;  // a perfect kernel reads nothing of an empty group, not even its B
    const double m = s.m, n = s.n, k = s.k, batches = s.l;
    double bytes = static_cast<double>(bytes_for(a.element, static_cast<std::int64_t>(m * k))) +
                   scale_bytes(a, Operand::a, m, s.k);
    bytes += static_cast<double>(bytes_for(b.element, static_cast<std::int64_t>(n * k))) +
             scale_bytes(b, Operand::b, n, s.k);
    const double output = static_cast<double>(bits_of(spec_.d_type)) / 8 * m * n;
    bytes += output * (args_.has_c ? 2 : 1);
    total += bytes * batches;
  }
  return total;
}

// ---- expected_output ---------------------------------------------------------------------------------

Status expected_output(const HostWorkload& workload, bool exact, int threads, ExpectedOutput* out) {
  if (out == nullptr) return Status::error(StatusCode::invalid_argument, -1, "out", "the output pointer is null");
  out->clear();
  if (exact) return reference_gemm(workload.args(), out);

  // A twin of the arguments whose C and D are dense, n-major fp32 (C converted exactly), run on the
  // CPU back end; its D, widened to double, is the expected output.
  try {
    const GemmArguments& args = workload.args();
    GemmArguments twin = args;
    twin.d_type = DataType::f32;
    twin.d_major = Major::n;
    const std::vector<core::ResolvedGroup> groups = cpu::resolve_host_groups(args);
    const bool d_n = args.d_major == Major::n;
    std::vector<Buffer> storage;
    std::vector<GroupProblem> twin_groups;
    // Copies C of group g (its own rows) into a dense fp32 [l][m][ld] at `to`.
    auto convert_c = [&](const core::ResolvedGroup& g, float* to, std::int64_t ld) {
      for (std::int64_t l = 0; l < g.l; ++l)
        for (std::int64_t m = 0; m < g.m; ++m)
          for (std::int64_t n = 0; n < g.n; ++n)
            to[(l * g.m + m) * ld + n] =
                load_value(args.d_type, g.c.data, l * g.c.batch_stride + core::matrix_offset(d_n, m, n, g.c.ld));
    };
    if (args.layout == GroupLayout::pointer_array) {
      twin_groups.assign(args.groups, args.groups + args.num_groups);
      for (std::size_t i = 0; i < groups.size(); ++i) {
        const core::ResolvedGroup& g = groups[i];
        GroupProblem& p = twin_groups[i];
        if (g.m == 0) continue;
        const std::int64_t ld = round_up(g.n, 4);  // 16-byte rows
        const auto bytes = static_cast<std::size_t>(std::int64_t{g.l} * g.m * ld * 4);
        storage.push_back(allocate("D", bytes));
        p.d = storage.back().get();
        p.ldd = ld;
        p.batch_stride_d = g.m * ld;
        if (args.has_c) {
          storage.push_back(allocate("C", bytes));
          convert_c(g, reinterpret_cast<float*>(storage.back().get()), ld);
          p.c = storage.back().get();
          p.ldc = ld;
          p.batch_stride_c = g.m * ld;
        }
      }
      twin.groups = twin_groups.data();
    } else {
      // One fp32 D (and C) of the whole form's rows; group g's C rows are copied where the twin's
      // resolution will look for them.
      const bool masked = args.layout == GroupLayout::masked;
      const std::int64_t ld = round_up(args.moe.n, 4);
      const std::int64_t per_group = args.moe.rows * ld;
      const std::int64_t total = masked ? per_group * args.moe.num_groups : per_group;
      storage.push_back(allocate("D", static_cast<std::size_t>(std::max<std::int64_t>(total, 1) * 4)));
      twin.moe.d = storage.back().get();
      twin.moe.ldd = ld;
      twin.moe.batch_stride_d = masked ? per_group : 0;
      if (args.has_c) {
        storage.push_back(allocate("C", static_cast<std::size_t>(std::max<std::int64_t>(total, 1) * 4)));
        auto* c = reinterpret_cast<float*>(storage.back().get());
        twin.moe.c = c;
        twin.moe.ldc = ld;
        twin.moe.batch_stride_c = masked ? per_group : 0;
        const std::vector<core::ResolvedGroup> twin_groups_resolved = cpu::resolve_host_groups(twin);
        for (std::size_t i = 0; i < groups.size(); ++i)
          if (groups[i].m > 0)
            convert_c(groups[i], static_cast<float*>(const_cast<void*>(twin_groups_resolved[i].c.data)), ld);
      }
    }
    RunOptions options;
    options.backend = Backend::cpu;
    options.cpu_threads = threads;
    if (Status s = run(twin, options, nullptr, 0); !s.ok()) return s;

    const std::vector<core::ResolvedGroup> resolved = cpu::resolve_host_groups(twin);
    ExpectedOutput result(resolved.size());
    for (std::size_t i = 0; i < resolved.size(); ++i) {
      const core::ResolvedGroup& g = resolved[i];
      std::vector<double>& values = result[i];
      values.resize(static_cast<std::size_t>(std::int64_t{g.l} * g.m * g.n));
      const auto* d = static_cast<const float*>(g.d.data);
      for (std::int64_t l = 0; l < g.l; ++l)
        for (std::int64_t m = 0; m < g.m; ++m)
          for (std::int64_t n = 0; n < g.n; ++n)
            values[static_cast<std::size_t>((l * g.m + m) * g.n + n)] = d[l * g.d.batch_stride + m * g.d.ld + n];
    }
    *out = std::move(result);
  } catch (const std::bad_alloc&) {
    return Status::error(StatusCode::internal_error, -1, "",
                         "not enough host memory for the fp32 output of the expected values");
  }
  return Status::success();
}

bool is_output_buffer(const Buffer& buffer) { return buffer.name == "D" || buffer.name.rfind("D[", 0) == 0; }

std::string written_outside_groups(const HostWorkload& workload) {
  const GemmArguments& args = workload.args();
  std::vector<const Buffer*> outputs;
  for (const Buffer& b : workload.buffers())
    if (is_output_buffer(b)) outputs.push_back(&b);
  std::vector<std::vector<bool>> owned(outputs.size());
  for (std::size_t i = 0; i < outputs.size(); ++i) owned[i].assign(outputs[i]->bytes, false);
  const std::int64_t element_bytes = bits_of(args.d_type) / 8;
  const bool d_n = args.d_major == Major::n;
  for (const core::ResolvedGroup& g : cpu::resolve_host_groups(args)) {
    if (g.m == 0) continue;
    const auto* base = static_cast<const std::uint8_t*>(g.d.data);
    std::size_t which = outputs.size();
    for (std::size_t i = 0; i < outputs.size(); ++i)
      if (base >= outputs[i]->get() && base < outputs[i]->get() + outputs[i]->bytes) which = i;
    if (which == outputs.size()) return "a group's D lies outside every D buffer";
    for (std::int64_t l = 0; l < g.l; ++l)
      for (std::int64_t m = 0; m < g.m; ++m)
        for (std::int64_t n = 0; n < g.n; ++n) {
          const std::int64_t index = l * g.d.batch_stride + core::matrix_offset(d_n, m, n, g.d.ld);
          const std::int64_t offset = (base - outputs[which]->get()) + index * element_bytes;
          if (offset + element_bytes > static_cast<std::int64_t>(outputs[which]->bytes))
            return "a group's D runs past the end of " + outputs[which]->name;
          for (std::int64_t byte = 0; byte < element_bytes; ++byte) owned[which][static_cast<std::size_t>(offset + byte)] = true;
        }
  }
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    std::int64_t written = 0, first = -1;
    for (std::size_t byte = 0; byte < outputs[i]->bytes; ++byte)
      if (!owned[i][byte] && outputs[i]->get()[byte] != 0xFF) {
        if (first < 0) first = static_cast<std::int64_t>(byte);
        ++written;
      }
    if (written > 0)
      return outputs[i]->name + ": " + std::to_string(written) + " bytes outside the groups were written, the first at byte " +
             std::to_string(first);
  }
  return "";
}

}  // namespace bsgemm::testing
