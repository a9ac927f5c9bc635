// The tile scheduler's math (src/core/tile_scheduler.hpp), checked on the CPU for exact coverage:
// simulated persistent grids walk all tiles of ragged groups, and every (group, batch, m-block,
// n-block) must come out exactly once.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <random>
#include <tuple>
#include <vector>

#include "src/core/tile_scheduler.hpp"

namespace {

using bsgemm::core::advance_to_group;
using bsgemm::core::ceil_div;
using bsgemm::core::first_scheduled_tile;
using bsgemm::core::group_tile_count;
using bsgemm::core::next_scheduled_tile;
using bsgemm::core::plan_heavy_first;
using bsgemm::core::plan_stream_k;
using bsgemm::core::stream_k_contributors_end;
using bsgemm::core::StreamKSplit;
using bsgemm::core::stream_k_unit;
using bsgemm::core::tile_coord_in_group;
using bsgemm::core::TileOrder;
using bsgemm::core::WorkUnit;

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
      const auto c = tile_coord_in_group(t, tiles_m, tiles_n, band);
      const auto w = bsgemm::core::tile_coord_wide(t, tiles_m, tiles_n, band);
      ASSERT_EQ(c.l, w.l);
      ASSERT_EQ(c.m_block, w.m_block);
      ASSERT_EQ(c.n_block, w.n_block);
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

// The walks' 32-bit arithmetic for groups of at most kMaxGroupTiles tiles (tile_coord_in_group) gives the 64-bit
// arithmetic's coordinates, bands wider than the group included, up to the group's last tile at the limit.
TEST(TileScheduler, TileCoordInGroupAgreesUpToTheLimit) {
  using bsgemm::core::kMaxGroupTiles;
  const auto wide = bsgemm::core::tile_coord_wide;
  std::mt19937_64 rng(12);
  for (int trial = 0; trial < 20000; ++trial) {
    const auto tiles_m = static_cast<std::int32_t>(1 + rng() % (trial % 2 ? 40000 : 64));
    const auto tiles_n = static_cast<std::int32_t>(1 + rng() % (trial % 3 ? 40000 : 64));
    const auto band = static_cast<std::int32_t>(1 + rng() % (trial % 5 ? 16 : 100000));
    const std::int64_t per_batch = static_cast<std::int64_t>(tiles_m) * tiles_n;
    const std::int64_t l = 1 + static_cast<std::int64_t>(rng() % std::max<std::int64_t>(1, std::min<std::int64_t>(4, kMaxGroupTiles / per_batch)));
    if (l * per_batch > kMaxGroupTiles) continue;
    const std::int64_t local = trial % 7 == 0 ? l * per_batch - 1 : static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(l * per_batch));
    const auto a = tile_coord_in_group(local, tiles_m, tiles_n, band), b = wide(local, tiles_m, tiles_n, band);
    ASSERT_EQ(a.l, b.l) << local << " " << tiles_m << " " << tiles_n << " " << band;
    ASSERT_EQ(a.m_block, b.m_block) << local << " " << tiles_m << " " << tiles_n << " " << band;
    ASSERT_EQ(a.n_block, b.n_block) << local << " " << tiles_m << " " << tiles_n << " " << band;
  }
  // The largest group: 46341 x 46340 tiles (2147441940), its last tile, a band of 8 and one wider than the group.
  for (const std::int32_t band : {8, 50000}) {
    const std::int64_t last = std::int64_t{46341} * 46340 - 1;
    ASSERT_LE(last + 1, kMaxGroupTiles);
    const auto a = tile_coord_in_group(last, 46341, 46340, band), b = wide(last, 46341, 46340, band);
    EXPECT_EQ(a.m_block, b.m_block);
    EXPECT_EQ(a.n_block, b.n_block);
    EXPECT_EQ(a.m_block, 46340);
    EXPECT_EQ(a.n_block, 46339);
  }
}

// Consecutive tiles of a full band share an M-block and walk `band` N-blocks (the L2 reuse the order is for).
TEST(TileScheduler, BandOrder) {
  const auto c0 = tile_coord_in_group(0, 10, 20, 8);
  const auto c7 = tile_coord_in_group(7, 10, 20, 8);
  const auto c8 = tile_coord_in_group(8, 10, 20, 8);
  EXPECT_EQ(c0.m_block, 0);
  EXPECT_EQ(c0.n_block, 0);
  EXPECT_EQ(c7.m_block, 0);
  EXPECT_EQ(c7.n_block, 7);
  EXPECT_EQ(c8.m_block, 1);
  EXPECT_EQ(c8.n_block, 0);
  // The last band of 20 N-blocks in bands of 8 is 4 wide: it starts after 2 * 8 * 10 tiles.
  const auto last = tile_coord_in_group(2 * 8 * 10 + 5, 10, 20, 8);
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
        const auto c = tile_coord_in_group(tile - g.begin, static_cast<std::int32_t>(ceil_div(g.m, block_m)),
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

// The two-phase walk (heavy tiles first) and the plain one: every position below the total is taken by
// exactly one CTA, each CTA's positions increase, the heavy CTAs take their heavy tile first and nothing of
// the light phase, and the light phase goes to the other CTAs in rounds.
TEST(TileScheduler, HeavyFirstWalkCoversEveryPositionOnce) {
  std::mt19937 rng(23);
  for (int trial = 0; trial < 2000; ++trial) {
    const std::int64_t ctas = 1 + static_cast<std::int64_t>(rng() % 160);
    TileOrder order;
    if (trial % 4 != 0) {
      order.heavy_tiles = static_cast<std::int64_t>(rng() % static_cast<std::uint32_t>(ctas));
      const std::int64_t rounds = order.heavy_tiles == 0 ? 0 : static_cast<std::int64_t>(rng() % 6);
      order.light_phase_end = order.heavy_tiles + rounds * (ctas - order.heavy_tiles);
    }
    const std::int64_t total = static_cast<std::int64_t>(rng() % 3000);
    std::vector<int> taken(static_cast<std::size_t>(total), 0);
    for (std::int64_t cta = 0; cta < ctas; ++cta) {
      std::int64_t previous = -1;
      int step = 0;
      for (std::int64_t tile = first_scheduled_tile(cta, order); tile < total;
           tile = next_scheduled_tile(tile, cta, ctas, order), ++step) {
        ASSERT_GT(tile, previous) << "cta " << cta;
        previous = tile;
        ++taken[static_cast<std::size_t>(tile)];
        if (cta < order.heavy_tiles) {
          if (step == 0) ASSERT_EQ(tile, cta);
          else ASSERT_GE(tile, order.light_phase_end);
        } else {
          ASSERT_GE(tile, order.heavy_tiles);
        }
      }
    }
    for (std::int64_t t = 0; t < total; ++t)
      ASSERT_EQ(taken[static_cast<std::size_t>(t)], 1) << "position " << t << " of " << total << ", ctas " << ctas
                                                       << ", heavy " << order.heavy_tiles << ", phase end "
                                                       << order.light_phase_end;
  }
}

// The reference system's example: (8192, 1280, 32), (32, 384, 1536), (640, 1280, 32), (640, 160, 32) in
// 128 x 128 tiles on 132 CTAs. Its three tiles of K = 1536 (12 k-blocks + 2) against the others' one (+ 2)
// go first, beside four rounds of light tiles on the other 129 CTAs.
TEST(TileScheduler, PlanHeavyFirstOnTheExample) {
  std::vector<int> order;
  const TileOrder o = plan_heavy_first({640, 3, 50, 10}, {32, 1536, 32, 32}, 132, &order);
  EXPECT_EQ(order, (std::vector<int>{1, 0, 2, 3}));
  EXPECT_EQ(o.heavy_tiles, 3);
  EXPECT_EQ(o.light_phase_end, 3 + 4 * 129);
}

// Where the plain walk stays: one K for all groups; heavy tiles worth more than a quarter of the CTAs; a
// heavy tile less than twice the dearest light one; no light tiles. Empty groups count for nothing.
TEST(TileScheduler, PlanHeavyFirstLeavesBalancedWalksAlone) {
  std::vector<int> order;
  const auto plain = [&](const TileOrder& o) {
    EXPECT_EQ(o.heavy_tiles, 0);
    EXPECT_EQ(o.light_phase_end, 0);
    for (std::size_t i = 0; i < order.size(); ++i) EXPECT_EQ(order[i], static_cast<int>(i));
  };
  plain(plan_heavy_first({640, 3, 50}, {7168, 7168, 7168}, 132, &order));
  plain(plan_heavy_first({640, 34, 50}, {32, 1536, 32}, 132, &order));
  plain(plan_heavy_first({640, 3, 50}, {32, 896, 384}, 132, &order));  // 9 against the dearest light's 5
  plain(plan_heavy_first({0, 3}, {32, 1536}, 132, &order));
  // An empty group of small K is not the cheapest; the heavy group goes first past it.
  const TileOrder o = plan_heavy_first({0, 700, 3}, {32, 128, 2048}, 132, &order);
  EXPECT_EQ(order, (std::vector<int>{2, 0, 1}));
  EXPECT_EQ(o.heavy_tiles, 3);
  EXPECT_EQ(o.light_phase_end, 3 + 6 * 129);  // rounds: (16 + 2) / (1 + 2)
}

// Stream-K: every (tile, k-block) comes out exactly once over all CTAs' walks; whole tiles first, round-robin;
// a CTA's only unit that starts inside a tile is its share's first (its one partial); each split tile has one
// owner (the unit at its first k-block), and the owner's contributors are exactly the CTAs holding its other
// units; the CTAs' k-blocks differ by at most one beyond what whole rounds give.
TEST(TileScheduler, StreamKCoversEveryKBlockOnce) {
  std::mt19937 rng(41);
  int split_trials = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    const std::int64_t ctas = 1 + static_cast<std::int64_t>(rng() % 160);
    const std::int64_t total = static_cast<std::int64_t>(rng() % 700);
    const std::int32_t k_blocks = 1 + static_cast<std::int32_t>(rng() % 80);
    const StreamKSplit split = plan_stream_k(total, ctas, k_blocks);
    if (split.split_ctas > 0) ++split_trials;
    ASSERT_LE(split.whole_tiles, total);
    if (split.split_ctas > 0) {
      ASSERT_EQ(split.whole_tiles % ctas, 0);
    }
    std::vector<std::vector<int>> taken(static_cast<std::size_t>(total), std::vector<int>(static_cast<std::size_t>(k_blocks), 0));
    std::map<std::int64_t, std::int64_t> owner;                 // split tile -> owning CTA
    std::map<std::int64_t, std::vector<std::int64_t>> holders;  // split tile -> CTAs with a partial of it
    std::int64_t most = 0, least = -1;
    for (std::int64_t cta = 0; cta < ctas; ++cta) {
      WorkUnit u;
      std::int64_t blocks = 0, previous = -1;
      int units = 0;
      for (std::uint32_t step = 0; stream_k_unit(split, static_cast<std::uint32_t>(cta), static_cast<std::uint32_t>(ctas), step, &u);
           ++step) {
        ASSERT_GE(u.tile, previous) << "cta " << cta;
        ASSERT_LT(u.tile, total);
        ASSERT_LT(u.kb_begin, u.kb_end);
        ASSERT_LE(u.kb_end, k_blocks);
        if (u.tile < split.whole_tiles) {
          ASSERT_EQ(u.tile % ctas, cta);
          ASSERT_EQ(u.kb_begin, 0);
          ASSERT_EQ(u.kb_end, k_blocks);
        } else {
          if (u.kb_begin > 0) {
            ASSERT_EQ(units, static_cast<int>(split.whole_tiles / ctas) + (cta < split.whole_tiles % ctas ? 1 : 0))
                << "a partial that is not the share's first unit, cta " << cta;
            holders[u.tile].push_back(cta);
          } else if (u.kb_end < k_blocks) {
            ASSERT_EQ(owner.count(u.tile), 0u);
            owner[u.tile] = cta;
          }
        }
        for (int kb = u.kb_begin; kb < u.kb_end; ++kb) ++taken[static_cast<std::size_t>(u.tile)][static_cast<std::size_t>(kb)];
        blocks += u.kb_end - u.kb_begin;
        previous = u.tile;
        ++units;
      }
      most = std::max(most, blocks);
      least = least < 0 ? blocks : std::min(least, blocks);
    }
    for (std::int64_t t = 0; t < total; ++t)
      for (int kb = 0; kb < k_blocks; ++kb)
        ASSERT_EQ(taken[static_cast<std::size_t>(t)][static_cast<std::size_t>(kb)], 1)
            << "tile " << t << " k-block " << kb << " of " << total << " x " << k_blocks << ", ctas " << ctas;
    for (const auto& [tile, ctas_with_partials] : holders) {
      ASSERT_EQ(owner.count(tile), 1u) << "tile " << tile;
      const std::int64_t o = owner[tile];
      std::vector<std::int64_t> expected;
      const std::int64_t end = stream_k_contributors_end(split, static_cast<std::uint32_t>(o), tile);
      for (std::int64_t c = o + 1; c < end; ++c) expected.push_back(c);
      ASSERT_EQ(ctas_with_partials, expected) << "tile " << tile;
    }
    for (const auto& [tile, o] : owner) ASSERT_EQ(holders.count(tile), 1u) << "an owner without partials, tile " << tile;
    if (split.split_ctas > 0) {
      const std::int64_t share = ceil_div(split.split_blocks, split.split_ctas);
      ASSERT_LE(most, split.whole_tiles / ctas * k_blocks + share);
      ASSERT_GE(share, std::min<std::int64_t>(bsgemm::core::kStreamKMinBlocks, split.split_blocks));
    } else {
      ASSERT_EQ(split.whole_tiles, total);
    }
  }
  EXPECT_GT(split_trials, 500);
}

// The register-operand kernel's decode shapes: groups of 16 tiles (64 x 256) on 132 SMs, 56 k-blocks each. 28 groups:
// three whole rounds, then 52 tiles' 2912 k-blocks in shares of 22 or 23; 32 groups leave 116 tiles to the last
// round, more than half of it, and walk whole tiles, as 33 groups (a full round) do; 34 split their last 16 tiles.
// The last round splits up to 66 tiles, half the grid.
TEST(TileScheduler, StreamKOnTheDecodeShapes) {
  const StreamKSplit s = plan_stream_k(448, 132, 56);
  EXPECT_EQ(s.whole_tiles, 396);
  EXPECT_EQ(s.split_blocks, 2912u);
  EXPECT_EQ(s.split_ctas, 132u);
  EXPECT_EQ(bsgemm::core::stream_k_share_begin(s, 1), 23u);
  EXPECT_EQ(bsgemm::core::stream_k_share_begin(s, 8), 8u * 23);
  EXPECT_EQ(bsgemm::core::stream_k_share_begin(s, 9), 8u * 23 + 22);
  EXPECT_EQ(bsgemm::core::stream_k_share_begin(s, 132), 2912u);
  EXPECT_EQ(plan_stream_k(512, 132, 56).split_ctas, 0u);
  EXPECT_EQ(plan_stream_k(512, 132, 56).whole_tiles, 512);
  EXPECT_EQ(plan_stream_k(528, 132, 56).split_ctas, 0u);
  EXPECT_EQ(plan_stream_k(544, 132, 56).whole_tiles, 528);
  EXPECT_EQ(plan_stream_k(544, 132, 56).split_ctas, 132u);
  EXPECT_EQ(plan_stream_k(396 + 66, 132, 56).split_ctas, 132u);
  EXPECT_EQ(plan_stream_k(396 + 67, 132, 56).split_ctas, 0u);
}

}  // namespace
