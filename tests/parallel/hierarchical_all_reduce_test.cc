// tests/parallel/hierarchical_all_reduce_test.cc — the node-aware all-reduce equals the flat one, on
// simulated nodes of 2 ranks (4 ranks: two nodes; 3 ranks: uneven nodes, so it must fall back).
#include "parallel/hierarchical_all_reduce.h"

#include <gtest/gtest.h>

#include "comm/mpi/mpi_communicator.h"
#include "config/config.h"
#include "parallel/parallel_context.h"

namespace moe4d {
namespace {

// Small integers: exact in any summation order, so hierarchical and flat must agree bit for bit.
float value(int rank, size_t i) { return static_cast<float>(static_cast<int>((rank * 37 + i * 11) % 13) - 6); }

void expect_matches_flat(Communicator& group, HierarchicalAllReduce& hier, size_t count, ReduceOp op, bool async) {
  std::vector<float> flat(count), mine(count);
  for (size_t i = 0; i < count; ++i) flat[i] = mine[i] = value(group.world_ranks()[group.rank()], i);
  group.all_reduce(flat.data(), count, DType::kF32, op);
  if (async) {
    auto work = hier.all_reduce_async(mine.data(), count, DType::kF32, op);
    while (!work->test()) {
    }
    work->wait();
  } else {
    hier.all_reduce(mine.data(), count, DType::kF32, op);
  }
  ASSERT_EQ(mine, flat) << "count " << count << " op " << static_cast<int>(op) << " async " << async;
}

void run_all(Communicator& group, HierarchicalAllReduce& hier) {
  for (size_t count : {size_t{1}, size_t{2}, size_t{7}, size_t{1000}, size_t{300001}})
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMax, ReduceOp::kMin})
      for (bool async : {false, true}) expect_matches_flat(group, hier, count, op, async);
}

int world_size() {
  int n = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  return n;
}

TEST(HierarchicalAllReduce, WorldOnSimulatedNodes) {
  auto world = MpiCommunicator::world(CommOptions{60.0});
  HierarchicalAllReduce hier(*world, 2);
  // 4 ranks: nodes {0,1},{2,3} -> hierarchical. 3 ranks: nodes {0,1},{2} are uneven -> flat.
  EXPECT_EQ(hier.is_hierarchical(), world_size() == 4);
  if (hier.is_hierarchical()) {
    EXPECT_EQ(hier.intra_node()->size(), 2);
    EXPECT_EQ(hier.inter_node()->size(), 2);
    EXPECT_EQ(hier.intra_node()->world_ranks()[0], world->rank() / 2 * 2);
    EXPECT_EQ(hier.inter_node()->world_ranks(), (std::vector<int>{world->rank() % 2, world->rank() % 2 + 2}));
    EXPECT_EQ(hier.intra_node()->name(), "world.intra_node");
  }
  run_all(*world, hier);
}

// Gradient buckets: several reductions in flight, polled in a rank-dependent pattern and waited for
// newest first; each stage must still start in the same order on every rank, and every result match.
TEST(HierarchicalAllReduce, ManyInFlightPolledDifferentlyOnEachRank) {
  auto world = MpiCommunicator::world(CommOptions{60.0});
  HierarchicalAllReduce hier(*world, 2);
  const std::vector<size_t> counts = {5, 100000, 3, 4097, 250000, 1, 77777, 12};
  std::vector<std::vector<float>> flat(counts.size()), mine(counts.size());
  std::vector<std::unique_ptr<Work>> works;
  for (size_t k = 0; k < counts.size(); ++k) {
    for (size_t i = 0; i < counts[k]; ++i) flat[k].push_back(value(world->rank() + int(k), i));
    mine[k] = flat[k];
    world->all_reduce(flat[k].data(), counts[k], DType::kF32);
  }
  for (size_t k = 0; k < counts.size(); ++k) {
    works.push_back(hier.all_reduce_async(mine[k].data(), counts[k], DType::kF32));
    for (int poll = 0; poll < (world->rank() * 7 + int(k) * 3) % 5; ++poll) works[(k + world->rank()) % works.size()]->test();
  }
  for (size_t k = counts.size(); k-- > 0;) works[k]->wait();
  for (size_t k = 0; k < counts.size(); ++k) EXPECT_EQ(mine[k], flat[k]) << "reduction " << k;
}

TEST(HierarchicalAllReduce, GridGroupsFallBackWhenFlatIsAsGood) {
  if (world_size() != 4) GTEST_SKIP() << "needs 4 ranks";
  ParallelConfig config;
  config.data_parallel = 2;
  config.tensor_parallel = 2;
  auto ctx = make_parallel_context(MpiCommunicator::world(CommOptions{60.0}), config, 2);
  HierarchicalAllReduce tp(*ctx->tp, 2);  // {0,1} sits on one node
  HierarchicalAllReduce dp(*ctx->dp, 2);  // {0,2}: one member per node
  EXPECT_FALSE(tp.is_hierarchical());
  EXPECT_FALSE(dp.is_hierarchical());
  run_all(*ctx->dp, dp);
  // The whole DP x TP slice with 2 ranks per node is hierarchical again.
  HierarchicalAllReduce all(*ctx->world, 2);
  EXPECT_TRUE(all.is_hierarchical());
}

}  // namespace
}  // namespace moe4d
