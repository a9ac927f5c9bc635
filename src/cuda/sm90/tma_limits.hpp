// TMA's own limits, on top of the rules every back end shares (core/group_checks.hpp): a tensor map's
// strides must stay below 2^40 bytes. Checked on the host for host-resident descriptions and by the
// prepare kernel for device-resident ones.
#pragma once

#include <cstdint>

#include "bsgemm/config.hpp"
#include "src/core/group_checks.hpp"

namespace bsgemm::cuda {

inline constexpr std::int64_t kTmaMaxStrideBytes = std::int64_t{1} << 40;

// Whether a tensor map can address a tensor at `base` whose outer strides are these byte counts: a non-null
// 16-byte aligned base, strides that are multiples of 16 bytes and below kTmaMaxStrideBytes
// (cuTensorMapEncodeTiled's rules). Where it cannot, the kernels take their paths without that map.
BSGEMM_HD inline bool tma_stride_addressable(std::int64_t bytes) { return bytes % 16 == 0 && bytes < kTmaMaxStrideBytes; }
BSGEMM_HD inline bool tma_addressable(const void* base, std::int64_t ld_bytes, std::int64_t batch_bytes) {
  return base != nullptr && reinterpret_cast<std::uintptr_t>(base) % 16 == 0 && tma_stride_addressable(ld_bytes) &&
         tma_stride_addressable(batch_bytes);
}

BSGEMM_HD inline core::GroupCheck check_tma_stride(core::Field field, DataType type, std::int64_t stride) {
  if (bytes_for(type, stride) >= kTmaMaxStrideBytes)
    return core::fail(field, core::Violation::too_large, stride, kTmaMaxStrideBytes / bytes_for(type, 1) - 1);
  return {};
}

BSGEMM_HD inline core::GroupCheck check_tma_limits(const core::CallSpec& s, const core::ResolvedGroup& g, std::int64_t a_batches,
                                                   std::int64_t b_batches) {
  core::GroupCheck r;
  if (!(r = check_tma_stride(core::Field::lda, s.a_type.element, g.a.ld)).ok()) return r;
  if (a_batches > 1 && !(r = check_tma_stride(core::Field::batch_stride_a, s.a_type.element, g.a.batch_stride)).ok()) return r;
  if (!(r = check_tma_stride(core::Field::ldb, s.b_type.element, g.b.ld)).ok()) return r;
  if (b_batches > 1 && !(r = check_tma_stride(core::Field::batch_stride_b, s.b_type.element, g.b.batch_stride)).ok()) return r;
  return {};
}

}  // namespace bsgemm::cuda
