// The tile scheduler's math: which output tile of which group a linear tile index is.
//
// All groups' tiles form one sequence: group 0's tiles, then group 1's, ... (a prefix sum over
// per-group tile counts, computed on the device when shapes live there). A persistent CTA takes
// tiles blockIdx.x, blockIdx.x + gridDim.x, ..., so CTAs running at the same time hold neighbouring
// tiles; where a few tiles cost many times the others, the walk starts with them (TileOrder below).
// Inside a group the order is batch-major, then bands of `band` N-blocks: within a band the N-block
// changes fastest, so a wave of CTAs covers about wave/band M-blocks times `band` N-blocks and reads
// each of those A and B tiles from HBM once (the rest hit L2). A band at the right edge may be narrower
// than `band`.
//
// Plain __host__ __device__ code: tests/cpu/test_scheduler.cpp checks on the CPU that every tile of
// every ragged group is produced exactly once.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

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

// The most tiles one group may have (checked with the group's other fields: group_records.hpp), so that the walks
// place a tile inside its group in 32-bit arithmetic (tile_coord_in_group): a 64-bit division is a subroutine on the
// GPU. 2^31 tiles of the smallest tile (16 x 256) are 2^43 outputs, 16 TB of bf16.
inline constexpr std::int64_t kMaxGroupTiles = 0x7FFFFFFF;

// Tile `local` (0 <= local < L * tiles_m * tiles_n) of a group, in the banded order described above, in
// 64-bit arithmetic: the definition, which the kernels' 32-bit form (tile_coord_in_group) is tested against.
BSGEMM_HD constexpr TileCoord tile_coord_wide(std::int64_t local, std::int32_t tiles_m, std::int32_t tiles_n,
                                              std::int32_t band) {
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

// The same in 32-bit arithmetic, for a group whose local index, batch and band counts fit.
BSGEMM_HD constexpr TileCoord tile_coord_narrow(std::uint32_t local, std::uint32_t per_batch, std::uint32_t band_tiles,
                                                std::int32_t tiles_n, std::int32_t band) {
  TileCoord c;
  const std::uint32_t l = local / per_batch;
  const std::uint32_t in_batch = local - l * per_batch;
  const std::uint32_t band_index = in_batch / band_tiles;
  const std::int32_t band_start = static_cast<std::int32_t>(band_index) * band;
  const std::uint32_t width = static_cast<std::uint32_t>(tiles_n - band_start < band ? tiles_n - band_start : band);
  const std::uint32_t in_band = in_batch - band_index * band_tiles;
  const std::uint32_t row = in_band / width;
  c.l = static_cast<std::int32_t>(l);
  c.m_block = static_cast<std::int32_t>(row);
  c.n_block = band_start + static_cast<std::int32_t>(in_band - row * width);
  return c;
}

// tile_coord_narrow for a group of at most kMaxGroupTiles tiles, as every group that reaches a kernel is: its
// local index and tile count fit, and so does its band's (the band no wider than the group, which leaves the
// order as it is).
BSGEMM_HD constexpr TileCoord tile_coord_in_group(std::int64_t local, std::int32_t tiles_m, std::int32_t tiles_n,
                                                  std::int32_t band) {
  const std::uint32_t band_width = static_cast<std::uint32_t>(band < tiles_n ? band : tiles_n);
  return tile_coord_narrow(static_cast<std::uint32_t>(local), static_cast<std::uint32_t>(tiles_m) * static_cast<std::uint32_t>(tiles_n),
                           band_width * static_cast<std::uint32_t>(tiles_m), tiles_n, band);
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

// The walk's order where a few tiles cost many times the others (host-visible pointer-array groups of
// different K; the reference system's example has 3 tiles of K = 1536 beside 700 of K = 32). Placed anywhere
// in the round-robin walk, such a tile finishes last on a CTA that also ran its share of the light tiles. The
// host puts their groups first (plan_heavy_first), and the walk has two phases:
//   positions [0, heavy_tiles): CTA c < heavy_tiles takes position c, its heavy tile;
//   positions [heavy_tiles, light_phase_end): the other CTAs' rounds of light tiles while the heavy ones run,
//     round-robin over CTAs heavy_tiles .. ctas - 1;
//   positions from light_phase_end on: round-robin over all CTAs.
// light_phase_end = heavy_tiles + rounds * (ctas - heavy_tiles). The default (0, 0) is the plain walk. Every
// CTA's positions increase, so advance_to_group's forward search still holds.
struct TileOrder {
  std::int64_t heavy_tiles = 0;
  std::int64_t light_phase_end = 0;
};

// The first position CTA `cta` takes.
BSGEMM_HD constexpr std::int64_t first_scheduled_tile(std::int64_t cta, const TileOrder& o) {
  return cta < o.heavy_tiles || o.heavy_tiles < o.light_phase_end ? cta : o.light_phase_end + cta;
}

// The position CTA `cta` of `ctas` takes after `tile`.
BSGEMM_HD constexpr std::int64_t next_scheduled_tile(std::int64_t tile, std::int64_t cta, std::int64_t ctas,
                                                     const TileOrder& o) {
  if (tile < o.heavy_tiles) return o.light_phase_end + cta;
  if (tile < o.light_phase_end) {
    const std::int64_t next = tile + (ctas - o.heavy_tiles);
    return next < o.light_phase_end ? next : o.light_phase_end + cta;
  }
  return tile + ctas;
}

// A tile's cost for plan_heavy_first: its k-blocks of 128 plus a fixed share for what every tile pays (the
// loads' latency, the epilogue). Run 100 measured the example's tiles (bench/NOTES.md, session 20): mxfp8 1.3
// us a k-block and 3.4 us a tile (2.6 k-blocks), the decoding kernel 0.9 and 5.4 (6). 2 plans mxfp8's heavy
// tile beside the 4 rounds of light tiles it lasts (4 planned 3, and the heavy CTAs ended last); the FP4
// recipes' light tiles bound their calls with 3 or 4 rounds alike.
inline constexpr std::int64_t kTileFixedCost = 2;

// Host side: the walk's group order and TileOrder for groups of `tiles[g]` tiles with K = `k[g]` on `ctas`
// persistent CTAs. Groups whose tiles cost at least twice the cheapest group's are heavy; they go first (in
// their own order) when they are at most a quarter of the CTAs' worth of tiles and cost at least twice the
// dearest light tile, with as many light rounds beside them as fit in one heavy tile. Else the order is the
// groups' own and the walk plain. order[i] is the group walked i-th.
inline TileOrder plan_heavy_first(const std::vector<std::int64_t>& tiles, const std::vector<std::int64_t>& k,
                                  std::int64_t ctas, std::vector<int>* order) {
  const int groups = static_cast<int>(tiles.size());
  order->resize(static_cast<std::size_t>(groups));
  for (int g = 0; g < groups; ++g) (*order)[static_cast<std::size_t>(g)] = g;
  const auto cost = [&](int g) { return ceil_div(k[static_cast<std::size_t>(g)], 128) + kTileFixedCost; };
  const auto has_tiles = [&](int g) { return tiles[static_cast<std::size_t>(g)] > 0; };
  std::int64_t cheapest = -1;
  for (int g = 0; g < groups; ++g)
    if (has_tiles(g) && (cheapest < 0 || cost(g) < cheapest)) cheapest = cost(g);
  const auto heavy = [&](int g) { return has_tiles(g) && cost(g) >= 2 * cheapest; };
  std::int64_t heavy_tiles = 0, light_tiles = 0, heavy_cost = 0, light_cost = 0;
  for (int g = 0; g < groups; ++g) {
    if (!has_tiles(g)) continue;
    if (heavy(g)) {
      heavy_tiles += tiles[static_cast<std::size_t>(g)];
      heavy_cost = heavy_cost == 0 ? cost(g) : std::min(heavy_cost, cost(g));
    } else {
      light_tiles += tiles[static_cast<std::size_t>(g)];
      light_cost = std::max(light_cost, cost(g));
    }
  }
  const std::int64_t rounds = light_cost > 0 ? heavy_cost / light_cost : 0;
  if (heavy_tiles == 0 || light_tiles == 0 || 4 * heavy_tiles > ctas || rounds < 2) return TileOrder{};
  std::stable_partition(order->begin(), order->end(), heavy);
  return TileOrder{heavy_tiles, heavy_tiles + rounds * (ctas - heavy_tiles)};
}

// The last round's tiles split over K across the CTAs ("stream-K"). A persistent walk of whole tiles takes as
// long as its fullest CTA: ceil(total / ctas) rounds, however few tiles the last one has (the register-operand
// kernel measured 0.250 ms for 448 tiles of 64 x 256 on 132 SMs and 0.257 for 528, 0.310 for 544; bench/NOTES.md
// session 22). Where the last round is at most half full, the walk takes the full rounds' tiles whole,
// round-robin as before, and deals the last round's k-blocks (its tiles, all k_blocks deep, one after another)
// out to split_ctas CTAs in shares that differ by at most one k-block and are at least kStreamKMinBlocks deep.
// A share may begin inside a tile and end inside the next: the CTA whose share holds a tile's first k-block owns
// the tile (adds the other shares' fp32 partials and stores it); a CTA's other part of a tile, its share's
// first, is a partial for the owner. Every CTA thus holds at most one partial, and makes it first: the owner,
// which reaches its tile's end later, does not wait on a CTA that waits on it.
inline constexpr std::int32_t kStreamKMinBlocks = 4;

struct StreamKSplit {
  std::int64_t whole_tiles = 0;    // tiles [0, whole_tiles) walked whole
  std::uint32_t split_blocks = 0;  // the k-blocks of tiles [whole_tiles, total)
  std::uint32_t split_ctas = 0;    // the CTAs [0, split_ctas) that share them (0: no split)
  std::int32_t k_blocks = 0;       // every tile's
};

// The split of `total` tiles of k_blocks k-blocks each for `ctas` CTAs (no split: whole_tiles = total). 32-bit
// arithmetic throughout (a 64-bit division is a subroutine call on the GPU, whose saved registers the
// register-operand kernel's roles cannot spare): calls of more than 2^31 tiles, or splits of 2^32 k-blocks or
// more, walk whole tiles.
BSGEMM_HD constexpr StreamKSplit plan_stream_k(std::int64_t total, std::int64_t ctas, std::int32_t k_blocks) {
  StreamKSplit s;
  s.whole_tiles = total;
  s.k_blocks = k_blocks;
  if (total <= 0 || total > 0x7FFFFFFFll || ctas <= 0 || ctas > 0xFFFFll || k_blocks < 2 * kStreamKMinBlocks) return s;
  const std::uint32_t tiles = static_cast<std::uint32_t>(total), grid = static_cast<std::uint32_t>(ctas);
  const std::uint32_t last = tiles - (tiles - 1) / grid * grid;  // the last round's tiles, 1 .. ctas
  // Fuller last rounds stay whole: the split walk's kernel is 2-5% slower where nothing splits, and it measured
  // no faster at 64-91% full last rounds, 5-9% faster at 12-39% (bench/NOTES.md session 23).
  if (2ull * last > grid || static_cast<std::uint64_t>(last) * static_cast<std::uint32_t>(k_blocks) > 0xFFFFFFFFull) return s;
  s.whole_tiles = total - last;
  s.split_blocks = last * static_cast<std::uint32_t>(k_blocks);
  const std::uint32_t most = s.split_blocks / static_cast<std::uint32_t>(kStreamKMinBlocks);
  s.split_ctas = most < grid ? (most > 0 ? most : 1u) : grid;
  return s;
}

// The CTAs' shares of a split: split_blocks = split_ctas * q + r, the first r shares one k-block deeper.
struct StreamKShares {
  std::uint32_t q = 0, r = 0;
  // The first k-block (counted over the split tiles) of CTA cta's share, cta in [0, split_ctas]; the share ends
  // where CTA cta + 1's begins.
  BSGEMM_HD constexpr std::uint32_t begin(std::uint32_t cta) const { return cta * q + (cta < r ? cta : r); }
};
BSGEMM_HD constexpr StreamKShares stream_k_shares(const StreamKSplit& s) {
  return StreamKShares{s.split_blocks / s.split_ctas, s.split_blocks % s.split_ctas};
}
BSGEMM_HD constexpr std::uint32_t stream_k_share_begin(const StreamKSplit& s, std::uint32_t cta) {
  return stream_k_shares(s).begin(cta);
}

// A piece of the walk: k-blocks [kb_begin, kb_end) of tile `tile`.
struct WorkUnit {
  std::int64_t tile = 0;
  std::int32_t kb_begin = 0, kb_end = 0;
};

// Unit `step` (0, 1, ...) of CTA cta's walk among `ctas`: its whole tiles cta, cta + ctas, ... below
// whole_tiles, then its share of the split, one unit per tile it touches; false past the last. Computed from
// the step alone, so that a walk keeps one counter (the register-operand kernel's consumers hold it across
// their mainloop and epilogue, at 96 registers).
BSGEMM_HD constexpr bool stream_k_unit(const StreamKSplit& s, std::uint32_t cta, std::uint32_t ctas, std::uint32_t step,
                                       WorkUnit* u) {
  const std::int64_t tile = cta + static_cast<std::int64_t>(step) * ctas;
  if (tile < s.whole_tiles) {
    u->tile = tile;
    u->kb_begin = 0;
    u->kb_end = s.k_blocks;
    return true;
  }
  if (cta >= s.split_ctas) return false;
  // With a split, whole_tiles is a multiple of ctas below 2^31.
  const std::uint32_t j = step - static_cast<std::uint32_t>(s.whole_tiles) / ctas;  // the unit's index in the share
  const StreamKShares shares = stream_k_shares(s);
  const std::uint32_t begin = shares.begin(cta), end = shares.begin(cta + 1);
  const std::uint32_t blocks = static_cast<std::uint32_t>(s.k_blocks);
  const std::uint32_t t = begin / blocks + j;  // the unit's tile among the split ones
  const std::uint32_t first = t * blocks;
  const std::uint32_t unit_begin = j == 0 ? begin : first;
  if (unit_begin >= end) return false;
  u->tile = s.whole_tiles + t;
  u->kb_begin = static_cast<std::int32_t>(unit_begin - first);
  u->kb_end = static_cast<std::int32_t>((end < first + blocks ? end : first + blocks) - first);
  return true;
}

// The CTAs whose partials the owner (CTA owner) of split tile `tile` adds: [owner + 1, the returned CTA).
BSGEMM_HD constexpr std::uint32_t stream_k_contributors_end(const StreamKSplit& s, std::uint32_t owner, std::int64_t tile) {
  const std::uint32_t tile_end = static_cast<std::uint32_t>(tile - s.whole_tiles + 1) * static_cast<std::uint32_t>(s.k_blocks);
  const StreamKShares shares = stream_k_shares(s);
  std::uint32_t c = owner + 1;
  while (c < s.split_ctas && shares.begin(c) < tile_end) ++c;
  return c;
}

}  // namespace bsgemm::core
