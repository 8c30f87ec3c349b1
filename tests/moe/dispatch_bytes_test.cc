// Inter-node bytes of the node-aware expert exchange (moe.dispatcher: hierarchical) against the flat
// all-to-all and against the planner's formula, on 2 fake nodes x 4 ranks (EP 8), top-2 and top-8 of
// 16 and 64 uniformly routed experts (bench/moe/dispatch_bytes.h runs the moves):
//   - flat: exactly 4 rows of d floats per routed copy to another node;
//   - node-aware: exactly hierarchical_pair_bytes per (token, other node) pair of the routing, and
//     within 5% of tokens x expected_remote_nodes (the planner's uniform-routing expectation);
//   - node-aware <= flat, and the forward outputs of both agree.
// On one node (plain mpirun) nothing crosses nodes with either exchange.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <cstdlib>

#include "../../bench/moe/dispatch_bytes.h"
#include "comm/mpi/mpi_communicator.h"
#include "model/expert_replicas.h"
#include "parallel/parallel_context.h"
#include "plan/comm_model.h"

namespace moe4d {
namespace {

struct Routing {
  int experts, top_k;
};

class DispatchBytesTest : public ::testing::TestWithParam<Routing> {};

TEST_P(DispatchBytesTest, HierarchicalCrossesOncePerNode) {
  const Routing routing = GetParam();
  ParallelConfig par;
  auto world = MpiCommunicator::world();
  par.expert_parallel = world->size();
  auto pc = make_parallel_context(std::move(world), par, 0);
  const std::vector<int> rank_node = ep_rank_nodes(*pc);
  const int nodes = *std::max_element(rank_node.begin(), rank_node.end()) + 1;
  if (const char* hosts = std::getenv("MOE4D_TEST_HOSTS")) {
    ASSERT_EQ(nodes, std::atoi(hosts));
  }
  const int tokens = 512, d = 64;
  const bench::DispatchBytes b =
      bench::measure_dispatch_bytes(*pc->ep, rank_node, routing.experts, routing.top_k, tokens, d, 2028);
  EXPECT_LT(b.max_diff, 1e-6);  // float rounding of the sums' order
  double sums[4] = {double(b.flat_inter), double(b.hier_inter), double(b.remote_pairs), double(b.remote_copies)};
  pc->ep->all_reduce(sums, 4, DType::kF64);
  const auto [flat, hier, pairs, copies] = sums;
  EXPECT_EQ(flat, copies * 4 * d * sizeof(float));
  const double from_routing = pairs * hierarchical_pair_bytes(d, routing.top_k, sizeof(float));
  const double planned = double(tokens) * pc->ep_size() * expected_remote_nodes(routing.experts, routing.top_k, nodes) *
                         hierarchical_pair_bytes(d, routing.top_k, sizeof(float));
  EXPECT_LE(hier, flat);
  if (nodes == 1) {
    EXPECT_EQ(flat, 0);
    EXPECT_EQ(hier, 0);
    return;
  }
  EXPECT_NEAR(hier, from_routing, 0.05 * from_routing);
  EXPECT_NEAR(hier, planned, 0.05 * planned);
  if (pc->rank == 0)
    std::printf("E=%d k=%d nodes=%d: inter-node bytes flat %.0f, hierarchical %.0f (%.3f of flat), planner %.0f\n",
                routing.experts, routing.top_k, nodes, flat, hier, hier / flat, planned);
}

INSTANTIATE_TEST_SUITE_P(Uniform, DispatchBytesTest,
                         ::testing::Values(Routing{16, 2}, Routing{16, 8}, Routing{64, 2}, Routing{64, 8}),
                         [](const ::testing::TestParamInfo<Routing>& info) {
                           return fmt::format("e{}_k{}", info.param.experts, info.param.top_k);
                         });

}  // namespace
}  // namespace moe4d
