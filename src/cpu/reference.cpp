// The fp64 reference: D from the definition in problem.hpp.
//
// Every element and block scale is decoded as cpu::decoded_value decodes it, straight from the
// definition (cpu::RowDecoder, a row at a time, gives the same values bit for bit). Products of two
// decoded values (each an fp32 value times an fp32 scale) are exact in fp64 and the sums carry 53 bits,
// so the result is the exact one to within far less than any back end's rounding. Element (m, n) is the
// fp64 sum of its K products taken in order k = 0, 1, ..., K - 1. Rather than decoding its two factors at
// every product, a block of the output decodes the columns of B and each row of A it needs once and
// reuses them: the same doubles multiplied and summed in the same order, so the result is bit for bit the
// element-at-a-time one (a CPU test compares the two), at a small fraction of the decodes; the blocks run
// on all hardware threads.
#include <algorithm>
#include <cstdint>
#include <new>
#include <utility>
#include <vector>

#include "bsgemm/formats.hpp"
#include "bsgemm/gemm.hpp"
#include "bsgemm/reference.hpp"
#include "src/core/resolved_group.hpp"
#include "src/cpu/host_groups.hpp"
#include "src/cpu/parallel_for.hpp"

namespace bsgemm {
namespace {

// An output block: kBlockRows rows of D by kBlockColumns columns, whose decoded columns of B (kBlockColumns
// x K doubles) it holds while it runs.
constexpr std::int64_t kBlockRows = cpu::kReferenceBlockRows;
constexpr std::int64_t kBlockColumns = cpu::kReferenceBlockColumns;
// Elements of a row of D summed side by side (kBlockColumns is a multiple).
constexpr int kColumnsAtOnce = 4;
static_assert(kBlockColumns % kColumnsAtOnce == 0);

// Elements n .. n + W - 1 of a row of D, side by side: sums[j] is the in-order fp64 sum over k of a_row[k] times
// column j's b_columns[j K + k]. Their additions are independent, so they overlap instead of each waiting on the last
// (an fp64 add's latency bounds a single sum).
template <int W>
void sum_side_by_side(const double* a_row, const double* b_columns, std::int64_t k_count, double (&sums)[W]) {
  for (int j = 0; j < W; ++j) sums[j] = 0;
  for (std::int64_t k = 0; k < k_count; ++k) {
    const double a_value = a_row[k];
    for (int j = 0; j < W; ++j) sums[j] += a_value * b_columns[j * k_count + k];
  }
}

// One batch of one non-empty group.
struct Slab {
  std::size_t group = 0;
  std::int64_t batch = 0;
};

}  // namespace

Status reference_gemm(const GemmArguments& args, ExpectedOutput* out) {
  if (out == nullptr) return Status::error(StatusCode::invalid_argument, -1, "out", "the output pointer is null");
  out->clear();
  // The CPU back end's half of can_implement: host-resident descriptions, valid in every group.
  RunOptions cpu_options;
  cpu_options.backend = Backend::cpu;
  if (Status s = can_implement(args, cpu_options); !s.ok()) return s;

  const std::vector<core::ResolvedGroup> groups = cpu::resolve_host_groups(args);
  const bool d_n_contiguous = args.d_major == Major::n;
  try {
    std::vector<Slab> slabs;
    std::vector<std::int64_t> first_block{0};  // each slab's first block, then the total
    ExpectedOutput result(groups.size());
    for (std::size_t g = 0; g < groups.size(); ++g) {
      const core::ResolvedGroup& group = groups[g];
      if (group.m == 0) continue;  // an empty group: nothing is read, nothing is expected
      result[g].resize(static_cast<std::size_t>(std::int64_t{group.l} * group.m * group.n));
      const std::int64_t row_blocks = (group.m + kBlockRows - 1) / kBlockRows;
      const std::int64_t per_batch = row_blocks * ((group.n + kBlockColumns - 1) / kBlockColumns);
      for (std::int64_t l = 0; l < group.l; ++l) {
        slabs.push_back(Slab{g, l});
        first_block.push_back(first_block.back() + per_batch);
      }
    }
    cpu::parallel_for(first_block.back(), 0, [&](std::int64_t block, int) {
      const std::size_t s = cpu::range_of_task(first_block, block);
      const Slab& slab = slabs[s];
      const core::ResolvedGroup& group = groups[slab.group];
      const std::int64_t k_count = group.k, l = slab.batch;
      const std::int64_t column_blocks = (group.n + kBlockColumns - 1) / kBlockColumns;
      const std::int64_t m0 = (block - first_block[s]) / column_blocks * kBlockRows;
      const std::int64_t n0 = (block - first_block[s]) % column_blocks * kBlockColumns;
      const std::int64_t m1 = std::min<std::int64_t>(m0 + kBlockRows, group.m);
      const std::int64_t n1 = std::min<std::int64_t>(n0 + kBlockColumns, group.n);
      const cpu::RowDecoder a(cpu::operand_a(args, group));
      const cpu::RowDecoder b(cpu::operand_b(args, group));
      // b_columns[(n - n0) K + k] and a_row[k]: the decoded values every product of the block uses.
      std::vector<double> b_columns(static_cast<std::size_t>((n1 - n0) * k_count));
      std::vector<double> a_row(static_cast<std::size_t>(k_count));
      for (std::int64_t n = n0; n < n1; ++n) b.decode_row(l, n, k_count, b_columns.data() + (n - n0) * k_count);
      std::vector<double>& d = result[slab.group];
      const auto store = [&](std::int64_t m, std::int64_t n, double sum) {
        double value = static_cast<double>(group.alpha) * sum;
        if (args.has_c) {
          const std::int64_t c_index = l * group.c.batch_stride + core::matrix_offset(d_n_contiguous, m, n, group.c.ld);
          value += static_cast<double>(group.beta) * static_cast<double>(load_value(args.d_type, group.c.data, c_index));
        }
        d[static_cast<std::size_t>((l * group.m + m) * group.n + n)] = value;
      };
      for (std::int64_t m = m0; m < m1; ++m) {
        a.decode_row(l, m, k_count, a_row.data());
        std::int64_t n = n0;
        for (; n + kColumnsAtOnce <= n1; n += kColumnsAtOnce) {
          double sums[kColumnsAtOnce];
          sum_side_by_side(a_row.data(), b_columns.data() + (n - n0) * k_count, k_count, sums);
          for (int j = 0; j < kColumnsAtOnce; ++j) store(m, n + j, sums[j]);
        }
        for (; n < n1; ++n) {  // the group's last columns, fewer than kColumnsAtOnce
          double sum[1];
          sum_side_by_side(a_row.data(), b_columns.data() + (n - n0) * k_count, k_count, sum);
          store(m, n, sum[0]);
        }
      }
    });
    *out = std::move(result);
  } catch (const std::bad_alloc&) {
    return Status::error(StatusCode::internal_error, -1, "",
                         "the reference could not allocate the expected output or a block's decoded operands");
  }
  return Status::success();
}

}  // namespace bsgemm
