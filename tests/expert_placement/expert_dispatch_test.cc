// The split of a source's rows over an expert's copies (expert_placement/expert_dispatch.h): on one
// node exactly the even rotated split; across nodes the source's own node first while every copy
// still expects 1/m of the rows (the placement's assumption); never more cross-node rows than the
// even split; ranges disjoint and covering.
#include "expert_placement/expert_dispatch.h"

#include <gtest/gtest.h>

#include <random>

namespace moe4d {
namespace {

// E = 4 experts on ep = 4 ranks, one replica slot each: expert 0 gets copies on ranks 1 and 2
// (three copies: home rank 0, ranks 1, 2), expert 1 one on rank 3, expert 3 one on rank 0.
ExpertPlacement three_copies_of_expert0() {
  ExpertPlacement p{.experts = 4, .ep = 4, .redundant = 4};
  p.slot_expert = {0, 3, 1, 0, 2, 0, 3, 1};  // rank r: slots 2r (home), 2r + 1 (replica)
  p.replicas = {3, 2, 1, 2};
  return p;
}

// Rows of `expert` each copy gets from every source with n rows each.
std::vector<int> rows_per_copy(const ExpertDispatch& d, const ExpertPlacement& p, int expert, int n) {
  std::vector<int> out(p.replicas[expert], 0), range;
  for (int src = 0; src < p.ep; ++src) {
    d.split(expert, src, n, range);
    for (int i = 0; i < p.replicas[expert]; ++i) out[i] += range[2 * i + 1] - range[2 * i];
  }
  return out;
}

TEST(ExpertDispatch, OneNodeIsTheEvenRotatedSplit) {
  const ExpertPlacement p = three_copies_of_expert0();
  const ExpertDispatch d(p, {});
  std::vector<int> range;
  for (int src = 0; src < 4; ++src)
    for (int n : {0, 1, 2, 7, 300}) {
      d.split(0, src, n, range);
      for (int i = 0; i < 3; ++i) {
        const int chunk = ((i - src) % 3 + 3) % 3;
        EXPECT_EQ(range[2 * i], n * chunk / 3) << "src " << src << " n " << n << " copy " << i;
        EXPECT_EQ(range[2 * i + 1], n * (chunk + 1) / 3);
      }
      EXPECT_EQ(d.remote_fraction(0, src), 0.0);
    }
}

TEST(ExpertDispatch, PrefersTheSourcesNodeAndKeepsEveryCopysShare) {
  const ExpertPlacement p = three_copies_of_expert0();
  // Nodes {0, 1} and {2, 3}: expert 0 has two copies on node 0 (ranks 0, 1), one on node 1 (rank 2).
  const ExpertDispatch d(p, {0, 0, 1, 1});
  // Node 0's sources keep everything on node 0; node 1's keep 2/3 (its copy's share) and send 1/3.
  EXPECT_EQ(d.remote_fraction(0, 0), 0.0);
  EXPECT_EQ(d.remote_fraction(0, 1), 0.0);
  EXPECT_NEAR(d.remote_fraction(0, 2), 1.0 / 3, 1e-12);
  EXPECT_NEAR(d.remote_fraction(0, 3), 1.0 / 3, 1e-12);
  // Every copy gets 1/3 of the 4 x 600 rows, as the placement assumed ("only local copies" would
  // give rank 2's copy 1200 and the others 600 each).
  EXPECT_EQ(rows_per_copy(d, p, 0, 600), (std::vector<int>{800, 800, 800}));
  // Expert 1: home on rank 1 (node 0), copy on rank 3 (node 1): each node's sources stay at home.
  EXPECT_EQ(d.remote_fraction(1, 0), 0.0);
  EXPECT_EQ(d.remote_fraction(1, 3), 0.0);
  EXPECT_EQ(rows_per_copy(d, p, 1, 600), (std::vector<int>{1200, 1200}));
  // An unreplicated expert on another node: everything goes there.
  EXPECT_EQ(d.remote_fraction(2, 0), 1.0);
  // Each EP rank its own node: a source holding a copy sends all its rows to it.
  const ExpertDispatch own(p, {5, 6, 7, 8});
  std::vector<int> range;
  own.split(0, 1, 10, range);
  EXPECT_EQ(range[2 * 1 + 1] - range[2 * 1], 10);
  EXPECT_EQ(own.remote_fraction(0, 3), 1.0);
}

TEST(ExpertDispatch, RandomPlacementsCoverBalanceAndNeverCrossMoreThanTheEvenSplit) {
  std::mt19937 rng(15);
  for (int trial = 0; trial < 200; ++trial) {
    const int ep = 2 + int(rng() % 7), home = 1 + int(rng() % 3), E = ep * home;
    const int R = ep * int(rng() % std::min(4, ep));  // at most ep - 1 replicas per rank
    std::vector<int64_t> load(E);
    for (auto& l : load) l = 1 + int64_t(rng() % 1000);
    const ExpertPlacement p = expert_placement_plan(load, E, ep, R);
    std::vector<int> nodes(ep);
    const int per_node = 1 + int(rng() % ep);
    for (int r = 0; r < ep; ++r) nodes[r] = r / per_node;
    const ExpertDispatch d(p, nodes);
    std::vector<int> range;
    for (int e = 0; e < E; ++e) {
      const std::vector<int> slots = p.slots_of(e);
      const int m = int(slots.size());
      const int n = int(rng() % 500);
      for (int src = 0; src < ep; ++src) {
        d.split(e, src, n, range);
        std::vector<int> covered(n, 0);
        for (int i = 0; i < m; ++i)
          for (int row = range[2 * i]; row < range[2 * i + 1]; ++row) ++covered[row];
        for (int row = 0; row < n; ++row) ASSERT_EQ(covered[row], 1) << "trial " << trial << " expert " << e;
        int local = 0;
        for (int slot : slots) local += nodes[p.rank_of_slot(slot)] == nodes[src];
        EXPECT_LE(d.remote_fraction(e, src), 1.0 - double(local) / m + 1e-12);
      }
      // Every copy's rows over all sources: 1/m of the total up to rounding (one row per source and node).
      const std::vector<int> got = rows_per_copy(d, p, e, 6000);
      for (int i = 0; i < m; ++i) EXPECT_NEAR(got[i], 6000.0 * ep / m, 2.0 * ep) << "trial " << trial;
    }
  }
}

}  // namespace
}  // namespace moe4d
