// A persistent CTA's walk over the tiles of all groups (the scheduler's device side). Every role of a
// CTA (TMA producer, scale loaders, consumers) walks the same sequence with its own walker.
#pragma once

#include <cstdint>
#include <cstring>

#include "src/core/tile_scheduler.hpp"
#include "src/cuda/sm90/kernel_traits.cuh"
#include "src/cuda/sm90/params.hpp"

namespace bsgemm::cuda {

// One field of a group description through the read-only data path (ld.global.nc): the descriptions do
// not change while the kernel runs, and plain loads of them would be issued again after any store to
// global memory, which for all the compiler knows could alias them.
template <class T>
__device__ __forceinline__ T read_only(const T& field) {
  static_assert(sizeof(T) == 4 || sizeof(T) == 8);
  T value;
  if constexpr (sizeof(T) == 4) {
    const unsigned bits = __ldg(reinterpret_cast<const unsigned*>(&field));
    memcpy(&value, &bits, 4);
  } else {
    const unsigned long long bits = __ldg(reinterpret_cast<const unsigned long long*>(&field));
    memcpy(&value, &bits, 8);
  }
  return value;
}

// What a TileWalker keeps of its current group, with KeepGroup: the group's tiles [group_begin, group_end) and
// grid (group_end 0: none yet); nothing without.
template <bool KeepGroup>
struct KeptGroup {};
template <>
struct KeptGroup<true> {
  std::int64_t group_begin = 0, group_end = 0;
  std::int32_t tiles_m = 0, tiles_n = 0;
};

// What a walk needs of the group that holds a tile: its index, tile range and grid.
struct FoundGroup {
  std::int32_t group;
  std::int64_t begin, end;
  std::int32_t tiles_m, tiles_n;
};

// The group that holds `tile` (tile < the walk's total), searching from `group` on, by a whole converged warp: lane
// i reads group + i's record, so that a round of loads covers 32 groups and is in flight at once, and the first lane
// whose group ends past the tile hands its fields to the others. advance_to_group waits on each group's end in turn,
// which a round-robin walk over groups smaller than the grid pays at every tile: 2.1-2.3 kcycles a tile of the
// register-operand kernel's consumers at decode shapes, eight groups a step (bench/NOTES.md session 24).
__device__ __forceinline__ FoundGroup find_group_by_warp(const DeviceGroup* groups, std::int32_t num_groups,
                                                         std::int32_t group, std::int64_t tile) {
  const int lane = static_cast<int>(threadIdx.x % 32);
  for (;; group += 32) {
    const std::int32_t mine = group + lane;
    std::int64_t begin = 0, end = INT64_MAX;  // past the last group: nothing lies beyond it, and no tile reaches it
    std::int32_t tiles_m = 0, tiles_n = 0;
    if (mine < num_groups) {
      const DeviceGroup& r = groups[mine];
      begin = read_only(r.tile_begin);
      end = read_only(r.tile_end);
      tiles_m = read_only(r.tiles_m);
      tiles_n = read_only(r.tiles_n);
    }
    const unsigned holds = __ballot_sync(0xFFFFFFFFu, tile < end);
    if (holds != 0) {
      const int first = __ffs(holds) - 1;
      return {group + first, __shfl_sync(0xFFFFFFFFu, begin, first), __shfl_sync(0xFFFFFFFFu, end, first),
              __shfl_sync(0xFFFFFFFFu, tiles_m, first), __shfl_sync(0xFFFFFFFFu, tiles_n, first)};
    }
  }
}

// Two walks over the same sequence. The heavy-first one takes the host's TileOrder (core/tile_scheduler.hpp);
// the plain one walks round-robin, for the instantiations params.hpp's heavy_first_walk leaves out. Any walk
// that takes every position once covers every tile, whatever the order of the records.
// KeepGroup: the walker keeps its group's tile range and grid in registers and reads the records only when
// the walk leaves the group. The consumers' walk does where their registers allow (their next tile waits for
// it: a one-k-block tile's walk spent about 1 kcycle on those reads and 64-bit divisions, bench/NOTES.md
// session 21); the producers, which run ahead, keep their registers. Both place the tile in its group in 32-bit
// arithmetic (no group has more than core::kMaxGroupTiles tiles: group_records.hpp checks it), which took the
// register-operand kernel's decode rows 0.2-1.8% faster than the 64-bit divisions (bench/NOTES.md version 44).
// Search: by_lane (advance_to_group) works for any caller, one lane included (the TMA producer); by_warp
// (find_group_by_warp) needs every lane of the calling warps walking, converged: the consumers, each kernel's
// with its traits' kConsumerSearch.
template <bool HeavyFirst, bool KeepGroup = false, GroupSearch Search = GroupSearch::by_lane>
struct TileWalker : KeptGroup<KeepGroup> {
  const DeviceGroup* groups;
  std::int32_t num_groups;
  std::int32_t band;
  std::int64_t total;
  std::int64_t tile;  // the previous tile (before the first: -1, or the plain walk's first less gridDim.x)
  std::int32_t group = 0;

  __device__ explicit TileWalker(const KernelParams& p)
      : groups(p.groups), num_groups(p.num_groups), band(p.band), total(p.status->total_tiles),
        tile(HeavyFirst ? -1 : static_cast<std::int64_t>(blockIdx.x) - gridDim.x) {}

  // Moves to this CTA's next tile; false when there is none. p: the kernel's parameters (their TileOrder is
  // read where used, a constant-bank load, rather than held in registers across the roles' loops).
  __device__ bool next(const KernelParams& p, core::TileCoord* coord, const DeviceGroup** g) {
    if constexpr (HeavyFirst)
      tile = tile < 0 ? core::first_scheduled_tile(blockIdx.x, p.tile_order)
                      : core::next_scheduled_tile(tile, blockIdx.x, gridDim.x, p.tile_order);
    else
      tile += gridDim.x;
    if (tile >= total) return false;
    if constexpr (KeepGroup) {
      // Positions only grow along a CTA's walk, so a tile below the kept end is in the kept group.
      if (tile >= this->group_end) {
        if constexpr (Search == GroupSearch::by_warp) {
          const FoundGroup f = find_group_by_warp(groups, num_groups, group, tile);
          group = f.group;
          this->group_begin = f.begin;
          this->group_end = f.end;
          this->tiles_m = f.tiles_m;
          this->tiles_n = f.tiles_n;
        } else {
          group = core::advance_to_group(group, num_groups, tile, [this](std::int32_t i) { return read_only(groups[i].tile_end); });
          const DeviceGroup& r = groups[group];
          this->group_begin = read_only(r.tile_begin);
          this->group_end = read_only(r.tile_end);
          this->tiles_m = read_only(r.tiles_m);
          this->tiles_n = read_only(r.tiles_n);
        }
      }
      *g = &groups[group];
      *coord = core::tile_coord_in_group(tile - this->group_begin, this->tiles_m, this->tiles_n, band);
    } else if constexpr (Search == GroupSearch::by_warp) {
      const FoundGroup f = find_group_by_warp(groups, num_groups, group, tile);
      group = f.group;
      *g = &groups[group];
      *coord = core::tile_coord_in_group(tile - f.begin, f.tiles_m, f.tiles_n, band);
    } else {
      group = core::advance_to_group(group, num_groups, tile, [this](std::int32_t i) { return read_only(groups[i].tile_end); });
      *g = &groups[group];
      *coord = core::tile_coord_in_group(tile - read_only((*g)->tile_begin), read_only((*g)->tiles_m),
                                         read_only((*g)->tiles_n), band);
    }
    return true;
  }
};

// The walk of the kernels whose Traits::kStreamK splits the last round over K: units of k-blocks [kb_begin,
// kb_end) of a tile (core::stream_k_unit). The host launches them only where its own core::plan_stream_k of the
// same tile count, grid and K splits (cuda_backend.cpp's stream_k_split), so the kernel's plan is the host's.
// Every group has the same K (the MoE forms), read from group 0. It keeps a unit counter and its group: the split
// is worked out again from the parameters at each unit (two loads and 32-bit arithmetic), and the group search
// and tile_coord_in_group are TileWalker's plain ones, on the records and band of the parameters.
struct StreamKTileWalker {
  std::uint32_t step = 0;
  std::int32_t group = 0;

  // The split of the kernel's tiles: the same in every role and CTA.
  __device__ static core::StreamKSplit split_of(const KernelParams& p) {
    const std::int64_t total = p.status->total_tiles;
    const std::int32_t k_blocks =
        p.num_groups > 0 ? static_cast<std::int32_t>(core::ceil_div(read_only(p.groups[0].k), kBlockK)) : 0;
    return core::plan_stream_k(total, gridDim.x, k_blocks);
  }

  // Moves to this CTA's next unit of `split` (split_of's); false when there is none.
  __device__ bool next(const KernelParams& p, const core::StreamKSplit& split, core::WorkUnit* u, core::TileCoord* coord,
                       const DeviceGroup** g) {
    if (!core::stream_k_unit(split, blockIdx.x, gridDim.x, step, u)) return false;
    ++step;
    const DeviceGroup* groups = p.groups;
    group = core::advance_to_group(group, p.num_groups, u->tile, [groups](std::int32_t i) { return read_only(groups[i].tile_end); });
    *g = &groups[group];
    *coord = core::tile_coord_in_group(u->tile - read_only((*g)->tile_begin), read_only((*g)->tiles_m),
                                       read_only((*g)->tiles_n), p.band);
    return true;
  }
  __device__ bool next(const KernelParams& p, core::WorkUnit* u, core::TileCoord* coord, const DeviceGroup** g) {
    return next(p, split_of(p), u, coord, g);
  }
};

}  // namespace bsgemm::cuda
