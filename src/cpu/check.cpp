// check_output: every element of D against the expected values, with an error normalised by the
// largest value the element's terms could reach (reference.hpp).
//
// The normaliser needs ||a_m|| and ||b_n|| of the decoded operands. Each is computed once: the
// column norms of B of every (group, batch) in a first parallel pass, the row norm of A by the
// task that checks that row. Tasks are (group, batch, chunk of rows); each worker keeps its own
// partial report and the partial reports are merged at the end, ties in the worst element broken
// by position so that the report does not depend on the thread count.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <limits>
#include <string>
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

// Keeps the normaliser positive when a row or column is all zeros (err is then |D - R| / 2^-126).
constexpr double kTiny = 0x1p-126;

// Rows checked per task, and columns of B normed per task: small enough to balance, large
// enough that a task outweighs its hand-out.
constexpr std::int64_t kRowsPerTask = 8;
constexpr std::int64_t kColumnsPerTask = 64;

// The element position a report's "worst" refers to, ordered for deterministic tie-breaks.
struct Position {
  int group = -1;
  std::int64_t l = 0, m = 0, n = 0;
  bool before(const Position& other) const {
    if (group != other.group) return group < other.group;
    if (l != other.l) return l < other.l;
    if (m != other.m) return m < other.m;
    return n < other.n;
  }
};

struct Partial {
  double max_rel_err = -1;  // -1: no element seen yet
  double max_abs_err = 0;
  std::int64_t checked = 0, failures = 0;
  Position worst;
  double worst_value = 0, worst_expected = 0;
  std::vector<FailedElement> listed;  // at most 2 x the list's length, trimmed to the first by position

  void list(const Position& at, double value, double expected, double err, std::size_t limit) {
    if (limit == 0) return;
    listed.push_back(FailedElement{at.group, at.l, at.m, at.n, value, expected, err});
    if (listed.size() >= 2 * limit) keep_first(limit);
  }
  void keep_first(std::size_t limit) {
    std::sort(listed.begin(), listed.end(), [](const FailedElement& x, const FailedElement& y) {
      return Position{x.group, x.l, x.m, x.n}.before(Position{y.group, y.l, y.m, y.n});
    });
    if (listed.size() > limit) listed.resize(limit);
  }

  void take(double err, const Position& at, double value, double expected) {
    if (err > max_rel_err || (err == max_rel_err && at.before(worst))) {
      max_rel_err = err;
      worst = at;
      worst_value = value;
      worst_expected = expected;
    }
  }

  void merge(const Partial& other) {
    if (other.max_rel_err >= 0) take(other.max_rel_err, other.worst, other.worst_value, other.worst_expected);
    if (other.max_abs_err > max_abs_err) max_abs_err = other.max_abs_err;
    checked += other.checked;
    failures += other.failures;
    listed.insert(listed.end(), other.listed.begin(), other.listed.end());
  }
};

// One batch of one non-empty group.
struct Slab {
  int group = 0;
  std::int64_t batch = 0;
  std::vector<double> b_norms;  // ||b_n|| for every column n
};

// The normalised error of value D against expected R (reference.hpp): infinite for a NaN on one
// side only, 0 for matching NaNs or equal values (equal infinities included).
double normalised_error(double d, double r, double scale) {
  const bool d_nan = std::isnan(d), r_nan = std::isnan(r);
  if (d_nan || r_nan) return d_nan && r_nan ? 0.0 : std::numeric_limits<double>::infinity();
  if (d == r) return 0.0;
  return std::fabs(d - r) / scale;
}

std::string format(const char* pattern, double value) {
  char text[64];
  std::snprintf(text, sizeof text, pattern, value);
  return text;
}

}  // namespace

double default_tolerance(const GemmArguments& args) {
  double output_rounding = 0;
  if (args.d_type == DataType::bf16) output_rounding = 0x1p-8;
  if (args.d_type == DataType::f16) output_rounding = 0x1p-10;
  // Hopper's FP8 tensor cores accumulate a block's products with reduced precision before the
  // promotion to fp32; over a 128-deep fp8-block128 block that costs up to ~2^-11.6 of the block's
  // |a|.|b| (measured on the H200), over a 32-deep MX block ~2^-14. By Cauchy-Schwarz the per-block
  // bound holds for the normalised error of the whole sum, whatever K. The CUDA back end's f16 staging of
  // fp8-block128 tokens at decode shapes (each product rounded to f16, 2^-11 at most) stays under the same 2^-10.
  const bool block128 = args.a_type.recipe == Recipe::fp8_block128 || args.b_type.recipe == Recipe::fp8_block128;
  return output_rounding + (block128 ? 0x1p-10 : 0x1p-12);
}

CheckReport check_output(const GemmArguments& args, const ExpectedOutput& expected, const CheckOptions& options) {
  CheckReport report;
  report.tolerance = options.tolerance > 0 ? options.tolerance : default_tolerance(args);
  RunOptions cpu_options;
  cpu_options.backend = Backend::cpu;
  if (Status s = can_implement(args, cpu_options); !s.ok()) {
    report.error = "the arguments are invalid: " + s.message;
    return report;
  }
  const std::vector<core::ResolvedGroup> groups = cpu::resolve_host_groups(args);
  if (expected.size() != groups.size()) {
    report.error = "the expected output holds " + std::to_string(expected.size()) + " groups, the arguments " +
                   std::to_string(groups.size());
    return report;
  }
  std::vector<Slab> slabs;
  for (std::size_t g = 0; g < groups.size(); ++g) {
    const core::ResolvedGroup& group = groups[g];
    const auto size = static_cast<std::size_t>(std::int64_t{group.l} * group.m * group.n);
    if (expected[g].size() != size) {
      report.worst_group = static_cast<int>(g);
      report.error = "group " + std::to_string(g) + ": the expected output holds " +
                     std::to_string(expected[g].size()) + " values, the group has " + std::to_string(size) +
                     " (L x M x N)";
      return report;
    }
    if (group.m == 0) continue;
    for (std::int64_t l = 0; l < group.l; ++l) slabs.push_back(Slab{static_cast<int>(g), l, {}});
  }

  try {
    // Pass 1: the norm of every column of B, per (group, batch).
    std::vector<std::int64_t> column_task_begin(slabs.size() + 1, 0);
    for (std::size_t s = 0; s < slabs.size(); ++s) {
      const std::int64_t n = groups[static_cast<std::size_t>(slabs[s].group)].n;
      slabs[s].b_norms.resize(static_cast<std::size_t>(n));
      column_task_begin[s + 1] = column_task_begin[s] + (n + kColumnsPerTask - 1) / kColumnsPerTask;
    }
    cpu::parallel_for(column_task_begin.back(), options.threads, [&](std::int64_t task, int) {
      const std::size_t s = cpu::range_of_task(column_task_begin, task);
      Slab& slab = slabs[s];
      const core::ResolvedGroup& group = groups[static_cast<std::size_t>(slab.group)];
      const cpu::RowDecoder b(cpu::operand_b(args, group));
      std::vector<double> column(static_cast<std::size_t>(group.k));
      const std::int64_t n0 = (task - column_task_begin[s]) * kColumnsPerTask;
      const std::int64_t n1 = std::min<std::int64_t>(n0 + kColumnsPerTask, group.n);
      for (std::int64_t n = n0; n < n1; ++n) {
        b.decode_row(slab.batch, n, group.k, column.data());
        double sum = 0;
        for (const double v : column) sum += v * v;
        slab.b_norms[static_cast<std::size_t>(n)] = std::sqrt(sum);
      }
    });

    // Pass 2: rows of D, each with its row norm of A.
    std::vector<std::int64_t> row_task_begin(slabs.size() + 1, 0);
    for (std::size_t s = 0; s < slabs.size(); ++s) {
      const std::int64_t m = groups[static_cast<std::size_t>(slabs[s].group)].m;
      row_task_begin[s + 1] = row_task_begin[s] + (m + kRowsPerTask - 1) / kRowsPerTask;
    }
    std::vector<Partial> partials(static_cast<std::size_t>(cpu::resolve_thread_count(options.threads)));
    const bool d_n_contiguous = args.d_major == Major::n;
    const double tolerance = report.tolerance;
    const auto listed_limit = static_cast<std::size_t>(std::max(options.list_failures, 0));
    cpu::parallel_for(row_task_begin.back(), options.threads, [&](std::int64_t task, int worker) {
      const std::size_t s = cpu::range_of_task(row_task_begin, task);
      const Slab& slab = slabs[s];
      const core::ResolvedGroup& group = groups[static_cast<std::size_t>(slab.group)];
      const std::vector<double>& want = expected[static_cast<std::size_t>(slab.group)];
      const cpu::RowDecoder a(cpu::operand_a(args, group));
      std::vector<double> row(static_cast<std::size_t>(group.k));
      const double alpha = std::fabs(static_cast<double>(group.alpha));
      const double beta = static_cast<double>(group.beta);
      Partial& partial = partials[static_cast<std::size_t>(worker)];
      const std::int64_t m0 = (task - row_task_begin[s]) * kRowsPerTask;
      const std::int64_t m1 = std::min<std::int64_t>(m0 + kRowsPerTask, group.m);
      for (std::int64_t m = m0; m < m1; ++m) {
        a.decode_row(slab.batch, m, group.k, row.data());
        double sum = 0;
        for (const double v : row) sum += v * v;
        const double a_norm = std::sqrt(sum);
        for (std::int64_t n = 0; n < group.n; ++n) {
          const std::int64_t offset = core::matrix_offset(d_n_contiguous, m, n, group.d.ld);
          const double d = load_value(args.d_type, group.d.data, slab.batch * group.d.batch_stride + offset);
          const double r = want[static_cast<std::size_t>((slab.batch * group.m + m) * group.n + n)];
          double c_term = 0;
          if (args.has_c) {
            const std::int64_t c_offset = core::matrix_offset(d_n_contiguous, m, n, group.c.ld);
            c_term =
                std::fabs(beta * load_value(args.d_type, group.c.data, slab.batch * group.c.batch_stride + c_offset));
          }
          const double scale = alpha * a_norm * slab.b_norms[static_cast<std::size_t>(n)] + c_term + kTiny;
          const double err = normalised_error(d, r, scale);
          const Position at{slab.group, slab.batch, m, n};
          ++partial.checked;
          if (!(err <= tolerance)) {
            ++partial.failures;
            partial.list(at, d, r, err, listed_limit);
          }
          if (!std::isnan(d) && !std::isnan(r) && d != r && std::fabs(d - r) > partial.max_abs_err)
            partial.max_abs_err = std::fabs(d - r);
          partial.take(err, at, d, r);
        }
      }
    });

    Partial total;
    for (const Partial& p : partials) total.merge(p);
    report.checked = total.checked;
    report.failures = total.failures;
    report.max_abs_err = total.max_abs_err;
    report.max_rel_err = total.max_rel_err < 0 ? 0 : total.max_rel_err;
    report.worst_group = total.worst.group;
    report.worst_l = total.worst.l;
    report.worst_m = total.worst.m;
    report.worst_n = total.worst.n;
    report.worst_value = total.worst_value;
    report.worst_expected = total.worst_expected;
    total.keep_first(listed_limit);
    report.listed = std::move(total.listed);
    report.pass = total.failures == 0;
  } catch (const std::exception& e) {
    report = CheckReport{};
    report.tolerance = options.tolerance > 0 ? options.tolerance : default_tolerance(args);
    report.error = std::string("the check could not run: ") + e.what();
  }
  return report;
}

std::string CheckReport::summary() const {
  if (!error.empty()) return "FAIL: nothing compared: " + error;
  std::string text = pass ? "PASS: " : "FAIL: ";
  if (!pass) text += std::to_string(failures) + " of ";
  text += std::to_string(checked) + " elements";
  text += pass ? " within" : " above";
  text += format(" tolerance %.3g", tolerance);
  text += format("; max normalised error %.3g", max_rel_err);
  text += format(", max abs error %.3g", max_abs_err);
  if (worst_group >= 0) {
    text += "; worst: group " + std::to_string(worst_group) + ", batch " + std::to_string(worst_l) + ", row " +
            std::to_string(worst_m) + ", column " + std::to_string(worst_n);
    text += format(": wrote %.9g", worst_value);
    text += format(", expected %.9g", worst_expected);
  }
  return text;
}

}  // namespace bsgemm
