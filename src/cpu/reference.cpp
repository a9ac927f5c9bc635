// The fp64 reference: D from the definition in problem.hpp, one element at a time.
//
// Nothing here is blocked, cached or threaded: every product decodes its two elements and their
// block scales afresh (cpu::decoded_value), so that the code can be checked against the
// definition by reading it. Products of two decoded values (each an fp32 value times an fp32
// scale) are exact in fp64 and the sums carry 53 bits, so the result is the exact one to within
// far less than any back end's rounding.
#include <cstdint>
#include <utility>
#include <vector>

#include "bsgemm/formats.hpp"
#include "bsgemm/gemm.hpp"
#include "bsgemm/reference.hpp"
#include "src/core/resolved_group.hpp"
#include "src/cpu/host_groups.hpp"

namespace bsgemm {

Status reference_gemm(const GemmArguments& args, ExpectedOutput* out) {
  if (out == nullptr) return Status::error(StatusCode::invalid_argument, -1, "out", "the output pointer is null");
  out->clear();
  // The CPU back end's half of can_implement: host-resident descriptions, valid in every group.
  RunOptions cpu_options;
  cpu_options.backend = Backend::cpu;
  if (Status s = can_implement(args, cpu_options); !s.ok()) return s;

  const std::vector<core::ResolvedGroup> groups = cpu::resolve_host_groups(args);
  const bool d_n_contiguous = args.d_major == Major::n;
  ExpectedOutput result(groups.size());
  for (std::size_t g = 0; g < groups.size(); ++g) {
    const core::ResolvedGroup& group = groups[g];
    const std::int64_t m_count = group.m, n_count = group.n, k_count = group.k, batches = group.l;
    if (m_count == 0) continue;  // an empty group: nothing is read, nothing is expected
    const cpu::OperandView a = cpu::operand_a(args, group);
    const cpu::OperandView b = cpu::operand_b(args, group);
    std::vector<double>& d = result[g];
    d.resize(static_cast<std::size_t>(batches * m_count * n_count));
    for (std::int64_t l = 0; l < batches; ++l) {
      for (std::int64_t m = 0; m < m_count; ++m) {
        for (std::int64_t n = 0; n < n_count; ++n) {
          double sum = 0;
          for (std::int64_t k = 0; k < k_count; ++k)
            sum += cpu::decoded_value(a, l, m, k) * cpu::decoded_value(b, l, n, k);
          double value = static_cast<double>(group.alpha) * sum;
          if (args.has_c) {
            const std::int64_t c_index =
                l * group.c.batch_stride + core::matrix_offset(d_n_contiguous, m, n, group.c.ld);
            value +=
                static_cast<double>(group.beta) * static_cast<double>(load_value(args.d_type, group.c.data, c_index));
          }
          d[static_cast<std::size_t>((l * m_count + m) * n_count + n)] = value;
        }
      }
    }
  }
  *out = std::move(result);
  return Status::success();
}

}  // namespace bsgemm
