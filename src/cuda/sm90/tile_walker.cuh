// A persistent CTA's walk over the tiles of all groups (the scheduler's device side). Every role of a
// CTA (TMA producer, scale loaders, consumers) walks the same sequence with its own walker.
#pragma once

#include <cstdint>

#include "src/core/tile_scheduler.hpp"
#include "src/cuda/sm90/params.hpp"

namespace bsgemm::cuda {

struct TileWalker {
  const DeviceGroup* groups;
  std::int32_t num_groups;
  std::int32_t band;
  std::int64_t total;
  std::int64_t tile;
  std::int32_t group = 0;

  __device__ explicit TileWalker(const KernelParams& p)
      : groups(p.groups), num_groups(p.num_groups), band(p.band), total(p.status->total_tiles),
        tile(static_cast<std::int64_t>(blockIdx.x) - gridDim.x) {}

  // Moves to this CTA's next tile; false when there is none.
  __device__ bool next(core::TileCoord* coord, const DeviceGroup** g) {
    tile += gridDim.x;
    if (tile >= total) return false;
    group = core::advance_to_group(group, num_groups, tile, [this](std::int32_t i) { return groups[i].tile_end; });
    *g = &groups[group];
    *coord = core::tile_coord(tile - (*g)->tile_begin, (*g)->tiles_m, (*g)->tiles_n, band);
    return true;
  }
};

}  // namespace bsgemm::cuda
