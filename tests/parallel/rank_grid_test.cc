// tests/parallel/rank_grid_test.cc — RankGrid arithmetic: coordinates, groups, orders, device lists,
// node spanning and the placement map. No MPI.
#include "parallel/rank_grid.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <set>

#include "core/error.h"

namespace moe4d {
namespace {

using D = ParallelDim;
using Group = std::vector<int>;

Group range(int first, int count, int stride = 1) {
  Group g;
  for (int i = 0; i < count; ++i) g.push_back(first + i * stride);
  return g;
}

// Invariants every grid must satisfy, whatever its layout.
void expect_consistent(const RankGrid& grid) {
  for (int r = 0; r < grid.world_size(); ++r) EXPECT_EQ(grid.rank(grid.coord(r)), r);
  const std::initializer_list<D> dim_sets[] = {{D::kTP}, {D::kEP}, {D::kDP}, {D::kPP}};
  for (auto dims : dim_sets) {
    auto all = grid.groups(dims);
    std::set<int> seen;
    int smallest = -1;
    for (const Group& g : all) {
      EXPECT_GT(*std::min_element(g.begin(), g.end()), smallest) << "groups must be ordered by smallest member";
      smallest = *std::min_element(g.begin(), g.end());
      for (int r : g) {
        EXPECT_TRUE(seen.insert(r).second) << "rank " << r << " in two groups";
        EXPECT_EQ(grid.group(r, dims), g);
        EXPECT_EQ(g[grid.group_rank(r, dims)], r);
      }
    }
    EXPECT_EQ(static_cast<int>(seen.size()), grid.world_size());
  }
}

TEST(RankGrid, ArticlesExample64Ranks) {
  // DP2 x EP8 x TP4 x PP1 on 8 nodes of 8 ranks, Megatron order tp-ep-dp-pp.
  RankGrid grid(2, 8, 4, 1);
  ASSERT_EQ(grid.world_size(), 64);
  expect_consistent(grid);

  auto tp = grid.groups({D::kTP});
  ASSERT_EQ(tp.size(), 16u);
  for (int i = 0; i < 16; ++i) EXPECT_EQ(tp[i], range(4 * i, 4));
  for (const Group& g : tp) EXPECT_FALSE(RankGrid::spans_nodes(g, 8));

  auto ep = grid.groups({D::kEP});
  ASSERT_EQ(ep.size(), 8u);
  EXPECT_EQ(ep[0], range(0, 8, 4));  // {0,4,...,28}
  EXPECT_EQ(ep[1], range(1, 8, 4));
  EXPECT_EQ(ep[4], range(32, 8, 4));  // dp = 1: {32,36,...,60}

  auto dp = grid.groups({D::kDP});
  ASSERT_EQ(dp.size(), 32u);
  EXPECT_EQ(dp[0], (Group{0, 32}));
  EXPECT_EQ(dp[31], (Group{31, 63}));

  // Dense gradients: all 16 replicas of a TP slice, EP fastest (group rank = data replica).
  Group dp_ep = grid.group(5, {D::kEP, D::kDP});
  ASSERT_EQ(dp_ep.size(), 16u);
  EXPECT_EQ(dp_ep[0], 1);
  EXPECT_EQ(dp_ep[1], 5);
  EXPECT_EQ(dp_ep[8], 33);
  EXPECT_EQ(grid.group_rank(37, {D::kEP, D::kDP}), 1 * 8 + 1);

  EXPECT_EQ(grid.groups({D::kPP}).size(), 64u);
  EXPECT_EQ(grid.coord(37), (GridCoord{.dp = 1, .ep = 1, .tp = 1, .pp = 0}));
  EXPECT_EQ(grid.rank(GridCoord{.dp = 1, .ep = 7, .tp = 3, .pp = 0}), 63);
}

TEST(RankGrid, OtherOrdersMoveTpAcrossNodes) {
  // dp fastest: TP stride 2, so TP4 groups cover 8 consecutive ranks.
  RankGrid dp_first(2, 8, 4, 1, "dp-tp-ep-pp");
  expect_consistent(dp_first);
  EXPECT_EQ(dp_first.group(0, {D::kTP}), (Group{0, 2, 4, 6}));
  EXPECT_EQ(dp_first.group(0, {D::kDP}), (Group{0, 1}));
  EXPECT_EQ(dp_first.group(0, {D::kEP}), range(0, 8, 8));
  EXPECT_FALSE(RankGrid::spans_nodes(dp_first.group(0, {D::kTP}), 8));
  EXPECT_TRUE(RankGrid::spans_nodes(dp_first.group(0, {D::kTP}), 4));  // 4 ranks per node: it does

  // TP slowest but PP: TP4 groups have stride 16 and always cross 8-rank nodes.
  RankGrid tp_late(2, 8, 4, 1, "ep-dp-tp-pp");
  expect_consistent(tp_late);
  EXPECT_EQ(tp_late.group(0, {D::kTP}), (Group{0, 16, 32, 48}));
  for (const Group& g : tp_late.groups({D::kTP})) EXPECT_TRUE(RankGrid::spans_nodes(g, 8));
  EXPECT_EQ(tp_late.order(), "ep-dp-tp-pp");
}

TEST(RankGrid, PipelineLayout) {
  // DP2 x TP2 x PP2: stages are the slowest dimension.
  RankGrid grid(2, 1, 2, 2);
  expect_consistent(grid);
  EXPECT_EQ(grid.group(0, {D::kTP}), (Group{0, 1}));
  EXPECT_EQ(grid.group(0, {D::kDP}), (Group{0, 2}));
  EXPECT_EQ(grid.group(1, {D::kPP}), (Group{1, 5}));
  EXPECT_EQ(grid.coord(6), (GridCoord{.dp = 1, .ep = 0, .tp = 0, .pp = 1}));
  EXPECT_EQ(grid.groups({D::kTP, D::kDP}), (std::vector<Group>{{0, 1, 2, 3}, {4, 5, 6, 7}}));

  RankGrid full(1, 2, 2, 2);  // DP1 x EP2 x TP2 x PP2
  expect_consistent(full);
  EXPECT_EQ(full.group(0, {D::kEP}), (Group{0, 2}));
  EXPECT_EQ(full.group(3, {D::kPP}), (Group{3, 7}));
  EXPECT_EQ(full.group(0, {D::kDP}), (Group{0}));
}

TEST(RankGrid, DeviceListPermutesPositions) {
  // Position i runs on world rank 7 - i.
  RankGrid grid(2, 1, 2, 2, "tp-ep-dp-pp", {7, 6, 5, 4, 3, 2, 1, 0});
  expect_consistent(grid);
  EXPECT_EQ(grid.coord(7), (GridCoord{}));
  EXPECT_EQ(grid.coord(0), (GridCoord{.dp = 1, .ep = 0, .tp = 1, .pp = 1}));
  EXPECT_EQ(grid.group(7, {D::kTP}), (Group{7, 6}));
  EXPECT_EQ(grid.groups({D::kTP}), (std::vector<Group>{{1, 0}, {3, 2}, {5, 4}, {7, 6}}));
  EXPECT_EQ(grid.group_rank(6, {D::kTP}), 1);

  // An interleaving list that keeps TP pairs on 2-rank nodes apart.
  RankGrid spread(1, 1, 2, 2, "tp-ep-dp-pp", {0, 2, 1, 3});
  EXPECT_EQ(spread.group(0, {D::kTP}), (Group{0, 2}));
  EXPECT_TRUE(RankGrid::spans_nodes(spread.group(0, {D::kTP}), 2));
}

TEST(RankGrid, SpansNodes) {
  EXPECT_FALSE(RankGrid::spans_nodes({0, 1, 2, 3}, 4));
  EXPECT_TRUE(RankGrid::spans_nodes({2, 3, 4, 5}, 4));
  EXPECT_TRUE(RankGrid::spans_nodes({0, 8}, 8));
  EXPECT_EQ(RankGrid::node_of(15, 8), 1);
}

TEST(RankGrid, DescribeListsNodesAndGroups) {
  RankGrid grid(2, 1, 2, 1, "dp-tp-ep-pp");
  std::string text = grid.describe(2);
  EXPECT_NE(text.find("dp 2 x ep 1 x tp 2 x pp 1 = 4 ranks, order dp-tp-ep-pp, 2 ranks per node"), std::string::npos)
      << text;
  EXPECT_NE(text.find("node 1: 2(dp=0,ep=0,tp=1,pp=0) 3(dp=1,ep=0,tp=1,pp=0)"), std::string::npos) << text;
  EXPECT_NE(text.find("tp groups (2 of size 2): {0,2}* {1,3}*  (* spans nodes)"), std::string::npos) << text;
  EXPECT_NE(text.find("dp groups (2 of size 2): {0,1} {2,3}\n"), std::string::npos) << text;
}

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(RankGrid, RejectsBadOrdersSizesAndDeviceLists) {
  EXPECT_NE(error_of([] { RankGrid(2, 1, 2, 1, "tp-ep-dp"); }).find("rank_order 'tp-ep-dp' is not a permutation"),
            std::string::npos);
  EXPECT_NE(error_of([] { RankGrid(2, 1, 2, 1, "tp-tp-dp-pp"); }).find("not a permutation"), std::string::npos);
  EXPECT_NE(error_of([] { RankGrid(2, 1, 2, 1, "tp,ep,dp,pp"); }).find("not a permutation"), std::string::npos);
  EXPECT_NE(error_of([] { RankGrid(0, 1, 2, 1); }).find("dp size is 0"), std::string::npos);
  EXPECT_NE(error_of([] { RankGrid(2, 1, 2, 1, "tp-ep-dp-pp", {0, 1, 2}); })
                .find("device_list has 3 entries, but dp 2 x ep 1 x tp 2 x pp 1 = 4 positions"),
            std::string::npos);
  EXPECT_NE(error_of([] { RankGrid(2, 1, 2, 1, "tp-ep-dp-pp", {0, 1, 1, 3}); }).find("names world rank 1 twice"),
            std::string::npos);
  EXPECT_NE(error_of([] { RankGrid(2, 1, 2, 1, "tp-ep-dp-pp", {0, 1, 2, 4}); }).find("device_list[3] = 4"),
            std::string::npos);
}

}  // namespace
}  // namespace moe4d

namespace moe4d {
namespace {

// Context parallelism is carved out of the data replicas (dp * EP + ep): a CP group is cp
// consecutive replicas of one (tp, pp), and the dense data-parallel group the same CP rank of every
// dense replica; together they partition the DP x EP group.
TEST(RankGridContextParallel, GroupsAreConsecutiveDataReplicas) {
  const RankGrid grid(2, 2, 2, 1, "tp-ep-dp-pp", {}, 2);  // ranks: tp fastest, then ep, then dp
  EXPECT_EQ(grid.context_parallel(), 2);
  // rank 5: tp 1, ep 0, dp 1 -> replica 2, CP rank 0, dense replica 1.
  EXPECT_EQ(grid.data_replica(5), 2);
  EXPECT_EQ(grid.cp_rank(5), 0);
  EXPECT_EQ(grid.dense_replica(5), 1);
  EXPECT_EQ(grid.cp_group(5), (Group{5, 7}));
  EXPECT_EQ(grid.dense_dp_group(5), (Group{1, 5}));
  EXPECT_EQ(grid.cp_groups(), (std::vector<Group>{{0, 2}, {1, 3}, {4, 6}, {5, 7}}));
  for (int r = 0; r < grid.world_size(); ++r) {
    Group both = grid.cp_group(r);
    const Group dense = grid.dense_dp_group(r);
    both.insert(both.end(), dense.begin(), dense.end());
    const std::set<int> members(both.begin(), both.end());
    const Group dp_ep = grid.group(r, {D::kEP, D::kDP});
    for (int m : members) EXPECT_NE(std::find(dp_ep.begin(), dp_ep.end(), m), dp_ep.end()) << "rank " << r;
  }
  // cp 4 over dp 2 x ep 2: the whole DP x EP group is one CP group, DP_dense 1.
  const RankGrid all(2, 2, 1, 2, "tp-ep-dp-pp", {}, 4);
  EXPECT_EQ(all.cp_group(0), (Group{0, 1, 2, 3}));
  EXPECT_EQ(all.cp_group(6), (Group{4, 5, 6, 7}));
  EXPECT_EQ(all.dense_dp_group(6), (Group{6}));
  EXPECT_NE(all.describe(8).find("dense grid: tp 1 x cp 4 x dp_dense 1; cp groups: {0,1,2,3} {4,5,6,7}"),
            std::string::npos)
      << all.describe(8);
}

TEST(RankGridContextParallel, RefusesSizesThatDoNotDivideTheReplicas) {
  try {
    RankGrid(3, 1, 2, 1, "tp-ep-dp-pp", {}, 2);
    FAIL() << "cp 2 over 3 replicas accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("context parallel size 2 must be >= 1 and divide dp 3 x ep 1 = 3"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace moe4d
