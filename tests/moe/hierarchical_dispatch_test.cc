// Training with the node-aware expert dispatch (moe.dispatcher: hierarchical) reproduces the
// single-rank run (the pattern of tests/parallel_train/equivalence_test.cc): each of 20 steps from the
// same weights, loss, aux loss and gradient norm within 1e-5 relative, parameters within 1e-4.
// Launched on fake nodes (moe4d_fake_nodes_test: 2 nodes x 2 ranks, 4 nodes x 2 ranks), so the EP
// group really spans nodes and stage 1 really crosses them; the test checks the job sees the nodes.
// Also run on one node (plain mpirun), where every relay is the source itself.
#include <gtest/gtest.h>

#include <cstdlib>

#include "../common/equivalence_harness.h"
#include "../train/train_fixture.h"
#include "comm/mpi/mpi_communicator.h"
#include "train/trainer.h"

namespace moe4d {
namespace {

struct HierLayout {
  int ep = 1, tp = 1, pp = 1, chunks = 1, replicas = 0;
  bool capacity = false;
  std::string name() const {
    return "ep" + std::to_string(ep) + "_tp" + std::to_string(tp) + "_pp" + std::to_string(pp) + "_chunks" +
           std::to_string(chunks) + "_r" + std::to_string(replicas) + (capacity ? "_capacity" : "_dropless");
  }
};

class HierarchicalEquivalence : public ::testing::TestWithParam<HierLayout> {};

TEST_P(HierarchicalEquivalence, ReproducesSingleRankRun) {
  const HierLayout layout = GetParam();
  {
    auto world = MpiCommunicator::world();
    if (const char* hosts = std::getenv("MOE4D_TEST_HOSTS")) {  // the fake nodes are really distinct hosts
      ASSERT_EQ(world->detect_ranks_per_node(), world->size() / std::atoi(hosts));
    }
  }
  test::TempDir dir;
  Config config = test::tiny_training_config(test::write_synthetic_shard(dir.file("train.bin"), 64, 20000));
  config.model.moe.dispatcher = MoeDispatcher::kHierarchical;
  config.model.moe.num_experts = 8;
  config.model.moe.top_k = 3;
  config.model.moe.a2a_chunks = layout.chunks;
  if (layout.capacity) config.model.moe.capacity_factor = 1.0;
  config.model.moe.redundant_experts = layout.replicas;
  config.model.moe.rebalance_interval = layout.replicas > 0 ? 4 : 0;
  config.parallel.expert_parallel = layout.ep;
  config.parallel.tensor_parallel = layout.tp;
  config.parallel.pipeline_parallel = layout.pp;
  config.train.global_batch_size = 2 * layout.ep;
  config.parallel.collective_timeout = 300;
  const int steps = 20;
  const test::EquivalenceRun r = test::run_equivalence(config, steps);
  // Per MoE layer and micro-batch: forward — the plan's 2 (pick slots, weights), the tokens out and
  // the partial sums back, and the intra-node dispatch and combine in `chunks` slices each;
  // backward — the output gradient out, the weight and input gradients back, and the slices again.
  if (layout.pp == 1 && layout.replicas == 0) {
    const int moe_layers = 1;
    EXPECT_EQ(r.run.all_to_all_calls,
              int64_t(steps) * config.parallel.micro_batch_num * moe_layers * (7 + 4 * layout.chunks));
  }
  test::expect_equivalent(r);
}

// bf16 GEMMs: the node-aware run against the flat one, both EP4 on the same ranks, in lock-step.
// Only the order of float additions differs (a token's picks summed per node first).
TEST(Size4Bf16, HierarchicalMatchesTheFlatDispatch) {
  test::TempDir dir;
  Config flat = test::tiny_training_config(test::write_synthetic_shard(dir.file("train.bin"), 64, 20000));
  flat.model.moe.num_experts = 8;
  flat.model.moe.top_k = 3;
  flat.parallel.expert_parallel = 4;
  flat.train.global_batch_size = 8;
  flat.train.precision = Precision::kBF16;
  flat.parallel.collective_timeout = 300;
  Config hierarchical = flat;
  hierarchical.model.moe.dispatcher = MoeDispatcher::kHierarchical;
  const test::EquivalenceRun r = test::run_equivalence_between(flat, hierarchical, 20);
  test::expect_equivalent(r);
}

const HierLayout kFourRanks[] = {{.ep = 4},
                                 {.ep = 4, .capacity = true},
                                 {.ep = 4, .chunks = 2, .replicas = 4},
                                 {.ep = 2, .tp = 2},
                                 {.ep = 2, .pp = 2, .capacity = true}};
const HierLayout kEightRanks[] = {{.ep = 8}, {.ep = 8, .capacity = true}};

auto layout_name = [](const ::testing::TestParamInfo<HierLayout>& info) { return info.param.name(); };
INSTANTIATE_TEST_SUITE_P(Size4, HierarchicalEquivalence, ::testing::ValuesIn(kFourRanks), layout_name);
INSTANTIATE_TEST_SUITE_P(Size8, HierarchicalEquivalence, ::testing::ValuesIn(kEightRanks), layout_name);

}  // namespace
}  // namespace moe4d
