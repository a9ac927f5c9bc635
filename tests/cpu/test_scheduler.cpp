// The tile scheduler's math (src/core/tile_scheduler.hpp), checked on the CPU for exact coverage:
// simulated persistent grids walk all tiles of ragged groups, and every (group, batch, m-block,
// n-block) must come out exactly once.
#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <random>
#include <tuple>
#include <vector>

#include "src/core/tile_scheduler.hpp"

namespace {

using bsgemm::core::advance_to_group;
using bsgemm::core::ceil_div;
using bsgemm::core::group_tile_count;
using bsgemm::core::tile_coord;

TEST(TileScheduler, GroupTileCount) {
  EXPECT_EQ(group_tile_count(0, 4096, 1, 128, 128), 0);
  EXPECT_EQ(group_tile_count(1, 1, 1, 128, 128), 1);
  EXPECT_EQ(group_tile_count(128, 128, 1, 128, 128), 1);
  EXPECT_EQ(group_tile_count(129, 128, 1, 128, 128), 2);
  EXPECT_EQ(group_tile_count(129, 257, 3, 128, 128), 2 * 3 * 3);
  EXPECT_EQ(group_tile_count(16, 3072, 1, 64, 256), 12);
}

// Within one group every index maps to a distinct in-range coordinate, and all are reached.
TEST(TileScheduler, TileCoordIsABijection) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 400; ++trial) {
    const int tiles_m = 1 + static_cast<int>(rng() % 40);
    const int tiles_n = 1 + static_cast<int>(rng() % 40);
    const int l = 1 + static_cast<int>(rng() % 3);
    const int band = 1 + static_cast<int>(rng() % 12);
    std::vector<int> seen(static_cast<std::size_t>(l) * tiles_m * tiles_n, 0);
    for (std::int64_t t = 0; t < static_cast<std::int64_t>(seen.size()); ++t) {
      const auto c = tile_coord(t, tiles_m, tiles_n, band);
      ASSERT_GE(c.l, 0);
      ASSERT_LT(c.l, l);
      ASSERT_GE(c.m_block, 0);
      ASSERT_LT(c.m_block, tiles_m);
      ASSERT_GE(c.n_block, 0);
      ASSERT_LT(c.n_block, tiles_n);
      ++seen[(static_cast<std::size_t>(c.l) * tiles_m + c.m_block) * tiles_n + c.n_block];
    }
    for (int count : seen) ASSERT_EQ(count, 1) << "tiles_m " << tiles_m << " tiles_n " << tiles_n << " band " << band;
  }
}

// Consecutive tiles of a full band share an M-block and walk `band` N-blocks (the L2 reuse the order is for).
TEST(TileScheduler, BandOrder) {
  const auto c0 = tile_coord(0, 10, 20, 8);
  const auto c7 = tile_coord(7, 10, 20, 8);
  const auto c8 = tile_coord(8, 10, 20, 8);
  EXPECT_EQ(c0.m_block, 0);
  EXPECT_EQ(c0.n_block, 0);
  EXPECT_EQ(c7.m_block, 0);
  EXPECT_EQ(c7.n_block, 7);
  EXPECT_EQ(c8.m_block, 1);
  EXPECT_EQ(c8.n_block, 0);
  // The last band of 20 N-blocks in bands of 8 is 4 wide: it starts after 2 * 8 * 10 tiles.
  const auto last = tile_coord(2 * 8 * 10 + 5, 10, 20, 8);
  EXPECT_EQ(last.n_block, 16 + 1);
  EXPECT_EQ(last.m_block, 1);
}

// A persistent grid over many ragged groups (empty ones included) covers every tile exactly once.
TEST(TileScheduler, PersistentGridCoversRaggedGroupsExactlyOnce) {
  std::mt19937 rng(11);
  for (int trial = 0; trial < 60; ++trial) {
    const int num_groups = 1 + static_cast<int>(rng() % 300);
    const int block_m = (rng() % 2) ? 128 : 64, block_n = (rng() % 2) ? 128 : 256;
    const int band = 1 + static_cast<int>(rng() % 16);
    struct Group {
      std::int64_t m, n, l, begin, end;
    };
    std::vector<Group> groups(num_groups);
    std::int64_t total = 0;
    for (auto& g : groups) {
      const int kind = static_cast<int>(rng() % 5);
      g.m = kind == 0 ? 0 : kind == 1 ? 1 + rng() % 3 : static_cast<std::int64_t>(rng() % 700);
      g.n = 1 + rng() % 600;
      g.l = 1 + rng() % 2;
      g.begin = total;
      total += group_tile_count(g.m, g.n, g.l, block_m, block_n);
      g.end = total;
    }
    const auto tile_end = [&](std::int32_t g) { return groups[g].end; };
    std::map<std::tuple<int, int, int, int>, int> seen;
    const int grid = 1 + static_cast<int>(rng() % 140);
    for (int cta = 0; cta < grid; ++cta) {
      std::int32_t group = 0;
      for (std::int64_t tile = cta; tile < total; tile += grid) {
        group = advance_to_group(group, num_groups, tile, tile_end);
        ASSERT_LT(group, num_groups);
        const Group& g = groups[group];
        ASSERT_GE(tile, g.begin);
        const auto c = tile_coord(tile - g.begin, static_cast<std::int32_t>(ceil_div(g.m, block_m)),
                                  static_cast<std::int32_t>(ceil_div(g.n, block_n)), band);
        ASSERT_LT(static_cast<std::int64_t>(c.m_block) * block_m, g.m);
        ASSERT_LT(static_cast<std::int64_t>(c.n_block) * block_n, g.n);
        ASSERT_LT(c.l, g.l);
        ++seen[{group, c.l, c.m_block, c.n_block}];
      }
      EXPECT_EQ(advance_to_group(group, num_groups, total, tile_end), num_groups);
    }
    std::int64_t expected = 0;
    for (int gi = 0; gi < num_groups; ++gi) {
      const Group& g = groups[gi];
      for (int l = 0; l < g.l; ++l)
        for (int mb = 0; mb * block_m < g.m; ++mb)
          for (int nb = 0; nb * block_n < g.n; ++nb) {
            const auto it = seen.find({gi, l, mb, nb});
            ASSERT_NE(it, seen.end()) << "group " << gi << " tile (" << l << "," << mb << "," << nb << ") missed";
            ASSERT_EQ(it->second, 1);
            ++expected;
          }
    }
    EXPECT_EQ(static_cast<std::int64_t>(seen.size()), expected);
    EXPECT_EQ(expected, total);
  }
}

}  // namespace
