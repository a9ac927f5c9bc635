// The tile scheduler's math: which output tile of which group a linear tile index is.
//
// All groups' tiles form one sequence: group 0's tiles, then group 1's, ... (a prefix sum over
// per-group tile counts, computed on the device when shapes live there). A persistent CTA takes
// tiles blockIdx.x, blockIdx.x + gridDim.x, ..., so CTAs running at the same time hold neighbouring
// tiles. Inside a group the order is batch-major, then bands of `band` N-blocks: within a band the
// N-block changes fastest, so a wave of CTAs covers about wave/band M-blocks times `band` N-blocks and
// reads each of those A and B tiles from HBM once (the rest hit L2). A band at the right edge may be
// narrower than `band`.
//
// Plain __host__ __device__ code: tests/cpu/test_scheduler.cpp checks on the CPU that every tile of
// every ragged group is produced exactly once.
#pragma once

#include <cstdint>

#include "bsgemm/config.hpp"

namespace bsgemm::core {

struct TileCoord {
  std::int32_t l = 0;        // batch
  std::int32_t m_block = 0;  // row block of D
  std::int32_t n_block = 0;  // column block of D
};

BSGEMM_HD constexpr std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

// Output tiles of one group: L x ceil(M / block_m) x ceil(N / block_n); 0 for an empty group.
BSGEMM_HD constexpr std::int64_t group_tile_count(std::int64_t m, std::int64_t n, std::int64_t l, int block_m,
                                                  int block_n) {
  return m <= 0 ? 0 : l * ceil_div(m, block_m) * ceil_div(n, block_n);
}

// Tile `local` (0 <= local < L * tiles_m * tiles_n) of a group, in the banded order described above.
BSGEMM_HD constexpr TileCoord tile_coord(std::int64_t local, std::int32_t tiles_m, std::int32_t tiles_n, std::int32_t band) {
  const std::int64_t per_batch = static_cast<std::int64_t>(tiles_m) * tiles_n;
  TileCoord c;
  c.l = static_cast<std::int32_t>(local / per_batch);
  const std::int64_t in_batch = local - c.l * per_batch;
  const std::int64_t band_tiles = static_cast<std::int64_t>(band) * tiles_m;
  const std::int32_t band_index = static_cast<std::int32_t>(in_batch / band_tiles);
  const std::int32_t band_start = band_index * band;
  const std::int32_t width = tiles_n - band_start < band ? tiles_n - band_start : band;
  const std::int64_t in_band = in_batch - band_index * band_tiles;
  c.m_block = static_cast<std::int32_t>(in_band / width);
  c.n_block = band_start + static_cast<std::int32_t>(in_band % width);
  return c;
}

// The group that holds linear tile `tile`, searching forward from `group` (tiles only grow along a
// persistent CTA's walk, so the search is amortised over the whole walk). `tile_end(g)` is the
// exclusive end of group g's tiles in the sequence; empty groups are skipped. Returns num_groups when
// the tile is past the last group.
template <class TileEnd>
BSGEMM_HD inline std::int32_t advance_to_group(std::int32_t group, std::int32_t num_groups, std::int64_t tile,
                                              const TileEnd& tile_end) {
  while (group < num_groups && tile >= tile_end(group)) ++group;
  return group;
}

}  // namespace bsgemm::core
