// The prepare kernel: one CTA that turns any description form into the DeviceGroup records the main kernel walks,
// before the main kernel starts, without the host ever reading device memory. It runs for device-resident
// descriptions (and for host-resident ones inside a graph capture); otherwise the host builds the same records from
// the same code (group_records.hpp, cuda_backend.cpp).
//
// Pass 1 (each thread a run of consecutive groups): the group's rows (from GroupProblem, offsets or masked_m), the
// same validity rules the host applies (core/group_checks.hpp) plus TMA's limits, and its tile count. Two
// block-wide scans then give each group its first tile and, for a blocked-layout SFA of the contiguous form, its
// first scale row. Pass 2 writes the records and, for the pointer-array form, edits two tensor maps per group (A
// and B), and a third (D) where group_output_map_applies, from host-encoded templates with tensormap.replace. When
// any group is invalid, the lowest such group is reported in the status and the main kernel writes nothing.
#include <cuda_runtime.h>

#include <cstdint>

#include "src/core/resolved_group.hpp"
#include "src/cuda/ptx/sync.cuh"
#include "src/cuda/ptx/tma.cuh"
#include "src/cuda/sm90/group_records.hpp"
#include "src/cuda/sm90/launch.hpp"
#include "src/cuda/sm90/params.hpp"

namespace bsgemm::cuda {

namespace {

constexpr int kPrepareThreads = 256;

// Exclusive prefix of `value` over the block's threads; *total receives the sum of all.
__device__ std::int64_t block_exclusive_scan(std::int64_t value, std::int64_t* warp_sums, std::int64_t* total) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  std::int64_t inclusive = value;
#pragma unroll
  for (int offset = 1; offset < 32; offset *= 2) {
    const std::int64_t other = __shfl_up_sync(0xFFFFFFFFu, inclusive, offset);
    if (lane >= offset) inclusive += other;
  }
  if (lane == 31) warp_sums[warp] = inclusive;
  __syncthreads();
  constexpr int kWarps = kPrepareThreads / 32;
  if (warp == 0) {
    std::int64_t s = lane < kWarps ? warp_sums[lane] : 0;
#pragma unroll
    for (int offset = 1; offset < 32; offset *= 2) {
      const std::int64_t other = __shfl_up_sync(0xFFFFFFFFu, s, offset);
      if (lane >= offset) s += other;
    }
    if (lane < kWarps) warp_sums[lane] = s;
  }
  __syncthreads();
  const std::int64_t before = (warp == 0 ? 0 : warp_sums[warp - 1]) + inclusive - value;
  *total = warp_sums[kWarps - 1];
  __syncthreads();  // warp_sums is reused by the next scan
  return before;
}

// Copies `map_template` to `map` and points it at one group's tensor: dims (K in bytes, rows, batches);
// ld and batch stride in elements of `element`.
__device__ __noinline__ void write_group_map(CUtensorMap* map, const CUtensorMap& map_template, DataType element, const void* data,
                                std::int64_t k, std::int64_t rows, std::int64_t batches, std::int64_t ld,
                                std::int64_t batch_stride) {
  const std::int64_t ld_bytes = bytes_for(element, ld), batch_bytes = bytes_for(element, batch_stride);
  *map = map_template;
  ptx::tensormap_replace_address(map, data);
  ptx::tensormap_replace_dim<0>(map, static_cast<std::uint32_t>(bytes_for(element, k)));
  ptx::tensormap_replace_dim<1>(map, static_cast<std::uint32_t>(rows));
  ptx::tensormap_replace_dim<2>(map, static_cast<std::uint32_t>(batches));
  ptx::tensormap_replace_stride<0>(map, static_cast<std::uint64_t>(ld_bytes));
  ptx::tensormap_replace_stride<1>(map, static_cast<std::uint64_t>(batch_bytes));
}

// Copies `map_template` (16-bit D, encoded by encode_output_box_map) to `map` and points it at one group's D:
// dims (N, M, L) in elements, strides in bytes.
__device__ __noinline__ void write_output_map(CUtensorMap* map, const CUtensorMap& map_template, const core::ResolvedGroup& rg) {
  *map = map_template;
  ptx::tensormap_replace_address(map, rg.d.data);
  ptx::tensormap_replace_dim<0>(map, static_cast<std::uint32_t>(rg.n));
  ptx::tensormap_replace_dim<1>(map, static_cast<std::uint32_t>(rg.m));
  ptx::tensormap_replace_dim<2>(map, static_cast<std::uint32_t>(rg.l));
  ptx::tensormap_replace_stride<0>(map, static_cast<std::uint64_t>(2 * rg.d.ld));
  ptx::tensormap_replace_stride<1>(map, static_cast<std::uint64_t>(2 * map_batch_stride_d(rg)));
}

__global__ void __launch_bounds__(kPrepareThreads) prepare_groups_kernel(const __grid_constant__ PrepareParams p) {
  __shared__ std::int64_t warp_sums[kPrepareThreads / 32];
  __shared__ std::int32_t failed_group;
  if (threadIdx.x == 0) failed_group = kNoFailure;
  __syncthreads();
  // The GEMM kernel may start its CTAs now; it waits for this grid's writes before reading them.
  ptx::launch_dependents();

  const int num_groups = p.num_groups;
  const int per_thread = (num_groups + kPrepareThreads - 1) / kPrepareThreads;
  const int first = threadIdx.x * per_thread;
  const int last = first + per_thread < num_groups ? first + per_thread : num_groups;

  // Pass 1: rows, validity, tiles. The record fields serve as scratch until pass 2 rewrites them. With at
  // most one group per thread (up to 256 groups) pass 2 reuses its rows instead of resolving it again.
  std::int64_t my_tiles = 0, my_padded_rows = 0;
  GroupRows first_rows;
  for (int g = first; g < last; ++g) {
    const GroupRows rows = group_rows(p, g);
    if (g == first) first_rows = rows;
    if (!rows.check.ok()) atomicMin(&failed_group, g);
    p.out_groups[g].tile_begin = rows.tiles;
    my_tiles += rows.tiles;
    my_padded_rows += group_scale_block_rows(rows);
  }
  std::int64_t total_tiles, total_padded_rows;
  std::int64_t tile_begin = block_exclusive_scan(my_tiles, warp_sums, &total_tiles);
  std::int64_t padded_row = block_exclusive_scan(my_padded_rows, warp_sums, &total_padded_rows);

  if (failed_group == kNoFailure) {
    // Pass 2: the records and the pointer-array tensor maps.
    for (int g = first; g < last; ++g) {
      const GroupRows rows = g == first ? first_rows : group_rows(p, g);
      const std::int64_t tiles = p.out_groups[g].tile_begin;
      core::ResolvedGroup rg;
      const DeviceGroup record = make_device_group(p, g, rows, tile_begin, tiles, padded_row, &rg);
      p.out_groups[g] = record;
      if (p.spec.layout == GroupLayout::pointer_array && tiles > 0) {
        write_group_map(p.out_maps + 2 * g, p.a_template, p.spec.a_type.element, rg.a.data, rg.k, rg.m, rg.l, rg.a.ld,
                        map_batch_stride_a(rg));
        write_group_map(p.out_maps + 2 * g + 1, p.b_template, p.spec.b_type.element, rg.b.data, rg.k, rg.n, rg.l, rg.b.ld,
                        map_batch_stride_b(rg));
        if (record.d_map != nullptr) write_output_map(p.out_d_maps + g, p.d_template, rg);
      }
      tile_begin += tiles;
      padded_row += group_scale_block_rows(rows);
    }
    if (p.spec.layout == GroupLayout::pointer_array) ptx::fence_tensormap_release();
  }

  if (threadIdx.x == 0) {
    DeviceStatus status{};
    status.failed_group = failed_group;
    status.spec = p.spec;
    status.total_tiles = failed_group == kNoFailure ? total_tiles : 0;
    if (failed_group != kNoFailure) {
      const core::GroupCheck check = group_rows(p, failed_group).check;
      status.field = static_cast<std::uint8_t>(check.field);
      status.violation = static_cast<std::uint8_t>(check.violation);
      status.value = check.value;
      status.limit = check.limit;
    }
    *p.status = status;
  }
}

}  // namespace

cudaError_t launch_prepare_groups(const PrepareParams& params, cudaStream_t stream) {
  prepare_groups_kernel<<<1, kPrepareThreads, 0, stream>>>(params);
  return cudaGetLastError();
}

}  // namespace bsgemm::cuda
