// The GEMM kernels' group records (DeviceGroup) from any description form, as __host__ __device__
// code: the prepare kernel (prepare_groups.cu) builds them on the device when the descriptions live in
// device memory; with host-resident descriptions the host builds them itself (cuda_backend.cpp) and
// copies them with the status, so that no prepare kernel runs before the GEMM. Both go through these
// functions, so the records cannot differ between the two.
#pragma once

#include <cstdint>

#include "bsgemm/config.hpp"
#include "bsgemm/recipe.hpp"
#include "src/core/group_checks.hpp"
#include "src/core/resolved_group.hpp"
#include "src/core/tile_scheduler.hpp"
#include "src/core/validate.hpp"
#include "src/cuda/sm90/params.hpp"
#include "src/cuda/sm90/tma_limits.hpp"

namespace bsgemm::cuda {

// Rows, first row (contiguous form), validity and output tiles of a group (tiles: 0 where it is invalid).
struct GroupRows {
  std::int64_t m = 0, begin = 0;
  std::int64_t tiles = 0;
  core::GroupCheck check;
};

// Group g's rows, validity and tiles, the kernels' bound on a group's tiles (core::kMaxGroupTiles) included.
BSGEMM_HD inline GroupRows group_rows(const PrepareParams& p, int g) {
  GroupRows r;
  std::int64_t n = p.moe.n, l = 1;  // the MoE forms' N, one batch; a pointer-array group's own
  switch (p.spec.layout) {
    case GroupLayout::pointer_array: {
      const core::ResolvedGroup rg = core::resolve_pointer_array(p.spec, p.groups[g]);
      r.m = rg.m;
      n = rg.n;
      l = rg.l;
      r.check = core::check_group(p.spec, rg);
      if (r.check.ok() && rg.m > 0) r.check = check_tma_limits(p.spec, rg, rg.l, rg.l);
      break;
    }
    case GroupLayout::contiguous: {
      std::int64_t end;
      core::contiguous_bounds(p.moe, g, &r.begin, &end);
      r.check = core::check_contiguous_bounds(r.begin, end, p.moe.rows);
      r.m = end - r.begin;
      break;
    }
    case GroupLayout::masked: {
      r.m = p.moe.masked_m[g];
      r.check = core::check_masked_rows(r.m, p.moe.rows);
      break;
    }
  }
  if (r.check.ok() && r.m > 0) {
    const std::int64_t tiles = core::group_tile_count(r.m, n, l, p.block_m, p.block_n);
    if (tiles > core::kMaxGroupTiles) r.check = core::fail(core::Field::m, core::Violation::too_many_tiles, tiles, core::kMaxGroupTiles);
    else r.tiles = tiles;
  }
  return r;
}

// Rows group g takes in a blocked_128x4 SFA of the contiguous form (the next group's sfa_block_row0 is
// this one's plus these).
BSGEMM_HD inline std::int64_t group_scale_block_rows(const GroupRows& rows) {
  return round_up(rows.m > 0 ? rows.m : 0, 128);
}

// The batch strides (elements) of a pointer-array group's A, B and D maps: with one batch the stride is
// never stepped, and TMA is given a valid one.
BSGEMM_HD inline std::int64_t map_batch_stride_a(const core::ResolvedGroup& rg) {
  return rg.l > 1 ? rg.a.batch_stride : rg.a.ld * rg.m;
}
BSGEMM_HD inline std::int64_t map_batch_stride_b(const core::ResolvedGroup& rg) {
  return rg.l > 1 ? rg.b.batch_stride : rg.b.ld * rg.n;
}
BSGEMM_HD inline std::int64_t map_batch_stride_d(const core::ResolvedGroup& rg) {
  return rg.l > 1 ? rg.d.batch_stride : rg.d.ld * rg.m;
}

// Whether pointer-array group rg gets a D map for the TMA-store epilogue (DeviceGroup::d_map): the call's D
// suits it (PrepareParams::output_map_max_k >= 0: 16-bit, n-major, no C, a kernel built with the boxes), the
// group's K is one whose tiles store that way, and TMA can address its D (16-byte aligned address and
// strides, below TMA's stride limit) with rows that end on a 16-byte boundary: a store clipped at an N whose
// row is not a multiple of 16 bytes failed the GPU tier (N = 130 and 300; 136 and 160 passed). The others go
// through the register or staged epilogues.
BSGEMM_HD inline bool group_output_map_applies(const PrepareParams& p, const core::ResolvedGroup& rg) {
  if (rg.k > p.output_map_max_k || rg.m < 1 || rg.n < 1 || (2 * rg.n) % 16 != 0) return false;
  return tma_addressable(rg.d.data, 2 * rg.d.ld, 2 * map_batch_stride_d(rg));
}

// The record of valid group g: its tiles are [tile_begin, tile_begin + tiles) of the whole sequence;
// *resolved receives the group as resolved (the pointer-array form's maps are made from it).
BSGEMM_HD inline DeviceGroup make_device_group(const PrepareParams& p, int g, const GroupRows& rows, std::int64_t tile_begin,
                                               std::int64_t tiles, std::int64_t sfa_block_row0,
                                               core::ResolvedGroup* resolved) {
  core::ResolvedGroup rg;
  DeviceGroup d{};
  switch (p.spec.layout) {
    case GroupLayout::pointer_array:
      rg = core::resolve_pointer_array(p.spec, p.groups[g]);
      d.a_map = p.out_maps + 2 * g;
      d.b_map = p.out_maps + 2 * g + 1;
      if (group_output_map_applies(p, rg)) d.d_map = p.out_d_maps + g;
      break;
    case GroupLayout::contiguous:
      rg = core::resolve_contiguous(p.spec, p.moe, g, rows.begin, rows.begin + rows.m, sfa_block_row0,
                                    core::moe_alpha(p.moe, g), core::moe_beta(p.moe, g));
      d.a_row0 = static_cast<std::int32_t>(rows.begin);
      d.b_batch0 = g;
      break;
    case GroupLayout::masked:
      rg = core::resolve_masked(p.spec, p.moe, g, static_cast<std::int32_t>(rows.m), core::moe_alpha(p.moe, g),
                                core::moe_beta(p.moe, g));
      d.a_batch0 = g;
      d.b_batch0 = g;
      break;
  }
  d.m = rg.m;
  d.n = rg.n;
  d.k = rg.k;
  d.l = rg.l;
  d.tile_begin = tile_begin;
  d.tile_end = tile_begin + tiles;
  d.tiles_m = static_cast<std::int32_t>(core::ceil_div(rg.m, p.block_m));
  d.tiles_n = static_cast<std::int32_t>(core::ceil_div(rg.n, p.block_n));
  d.sfa = rg.sfa.data;
  d.sfb = rg.sfb.data;
  d.sfa_ld = rg.sfa.ld;
  d.sfa_batch_stride = rg.sfa.batch_stride;
  d.sfb_ld = rg.sfb.ld;
  d.sfb_batch_stride = rg.sfb.batch_stride;
  d.c = rg.c.data;
  d.d = const_cast<void*>(rg.d.data);
  d.ldc = rg.c.ld;
  d.batch_stride_c = rg.c.batch_stride;
  d.ldd = rg.d.ld;
  d.batch_stride_d = rg.d.batch_stride;
  d.alpha = rg.alpha;
  d.beta = rg.beta;
  *resolved = rg;
  return d;
}

// Every group's record in order, on the host (the prepare kernel computes the same ones with its threads
// in parallel): on_group(g, resolved group, tiles) returns a Status and sees each group after its record,
// for the pointer-array form's maps. *total_tiles receives the tiles of all groups.
template <class OnGroup>
Status build_group_records(const PrepareParams& p, DeviceGroup* records, std::int64_t* total_tiles, OnGroup&& on_group) {
  std::int64_t tile_begin = 0, sfa_block_row0 = 0;
  for (int g = 0; g < p.num_groups; ++g) {
    const GroupRows rows = group_rows(p, g);
    if (!rows.check.ok()) return core::to_status(rows.check, g, p.spec);
    const std::int64_t tiles = rows.tiles;
    core::ResolvedGroup rg;
    records[g] = make_device_group(p, g, rows, tile_begin, tiles, sfa_block_row0, &rg);
    if (Status s = on_group(g, rg, tiles); !s.ok()) return s;
    tile_begin += tiles;
    sfa_block_row0 += group_scale_block_rows(rows);
  }
  *total_tiles = tile_begin;
  return Status::success();
}

}  // namespace bsgemm::cuda
