// Every parallel layout reproduces the single-rank run (docs/model.md §3, the core test of moe4d).
//
// Launched through mpirun with N ranks; suite SizeN holds the layouts of N ranks. The comparison
// itself is tests/common/equivalence_harness.h.
#include <gtest/gtest.h>

#include <cmath>

#include "../common/equivalence_harness.h"
#include "../train/train_fixture.h"
#include "checkpoint/checkpoint.h"
#include "comm/mpi/mpi_communicator.h"
#include "data/megatron_indexed_dataset.h"
#include "train/trainer.h"

namespace moe4d {
namespace {

struct Layout {
  int dp = 1, ep = 1, tp = 1, pp = 1;
  RecomputeGranularity recompute = RecomputeGranularity::kNone;
  int ranks_per_node = 0;  // > 0: local_worker_num, simulated nodes of that many ranks
  std::string name() const {
    std::string n = "dp" + std::to_string(dp) + "_ep" + std::to_string(ep) + "_tp" + std::to_string(tp) + "_pp" +
                    std::to_string(pp);
    if (recompute == RecomputeGranularity::kFull) n += "_recompute_full";
    if (recompute == RecomputeGranularity::kSelective) n += "_recompute_selective";
    if (ranks_per_node > 0) n += "_nodes_of_" + std::to_string(ranks_per_node);
    return n;
  }
  int size() const { return dp * ep * tp * pp; }
};

class Equivalence : public ::testing::TestWithParam<Layout> {};

TEST_P(Equivalence, ReproducesSingleRankRun) {
  const Layout layout = GetParam();
  test::TempDir dir;
  Config config = test::tiny_training_config(test::write_synthetic_shard(dir.file("train.bin"), 64, 20000));
  config.parallel.data_parallel = layout.dp;
  config.parallel.expert_parallel = layout.ep;
  config.parallel.tensor_parallel = layout.tp;
  config.parallel.pipeline_parallel = layout.pp;
  config.parallel.recompute = layout.recompute;
  config.parallel.collective_timeout = 120;
  config.parallel.local_worker_num = layout.ranks_per_node;
  const test::EquivalenceRun run = test::run_equivalence(config, 20);
  test::expect_equivalent(run);
  // Nodes of 2 ranks: the dense gradients (DP x EP group of 4) take the hierarchical all-reduce.
  if (layout.ranks_per_node == 2) {
    EXPECT_GT(run.run.intra_node_reduce_scatters, 0);
  }
}

// A TP2 run's checkpoint (shards gathered into full tensors) equals the single-rank run's checkpoint.
TEST(CheckpointEquivalence, Size2Tp2CheckpointEqualsSingleRank) {
  auto world = MpiCommunicator::world(CommOptions{.timeout_seconds = 120});
  ASSERT_EQ(world->size(), 2);
  test::TempDir dir;
  Config config = test::tiny_training_config(test::write_synthetic_shard(dir.file("train.bin"), 64, 20000));
  config.train.steps = 6;
  config.checkpoint.dir = dir.file("single");
  if (world->rank() == 0) {
    auto local = make_single_rank_context();
    Trainer trainer(config, *local, {.quiet = true, .metrics_path = "/dev/null"});
    trainer.run();
  }
  config.parallel.tensor_parallel = 2;
  config.checkpoint.dir = dir.file("tp2");
  auto pc = make_parallel_context(std::move(world), config.parallel, 0);
  {
    Trainer trainer(config, *pc, {.quiet = true, .metrics_path = "/dev/null"});
    trainer.run();
  }
  if (pc->rank != 0) return;
  const Checkpoint single = Checkpoint::open(dir.file("single"));
  const Checkpoint tp2 = Checkpoint::open(dir.file("tp2"));
  EXPECT_EQ(single.step(), 6);
  EXPECT_EQ(tp2.step(), 6);
  for (const char* file : {"model.safetensors", "optimizer.safetensors"}) {
    const auto& a = single.tensors(file).tensors();
    const auto& b = tp2.tensors(file).tensors();
    ASSERT_EQ(a.size(), b.size()) << file;
    for (const auto& [name, ta] : a) {
      const Tensor& tb = b.at(name);
      ASSERT_EQ(ta.shape, tb.shape) << name;
      double worst = 0;
      for (int64_t i = 0; i < ta.numel(); ++i) worst = std::max(worst, double(std::abs(ta.f32()[i] - tb.f32()[i])));
      EXPECT_LE(worst, 1e-4) << file << ": " << name;
    }
  }
}

// Layouts for 2 ranks and for 4 ranks; CTest runs each list under its own mpirun.
const Layout kTwoRanks[] = {
    {.dp = 2},
    {.tp = 2},
    {.ep = 2},
    {.tp = 2, .recompute = RecomputeGranularity::kFull},
};
const Layout kFourRanks[] = {
    {.dp = 2, .tp = 2},
    {.tp = 4},
    {.ep = 4},
    {.dp = 2, .ep = 2},
    {.ep = 2, .tp = 2},
    {.ep = 2, .tp = 2, .recompute = RecomputeGranularity::kSelective},
    {.dp = 4, .ranks_per_node = 2},
    {.dp = 2, .ep = 2, .ranks_per_node = 2},
};

// A blend of a moe4d shard (0.7) and a Megatron indexed dataset (0.3) under data parallelism 2:
// each replica draws its own sequence range of the same global batch, so the run equals one rank's.
TEST(BlendEquivalence, Size2Dp2BlendOfMoe4dAndMegatronEqualsSingleRank) {
  test::TempDir dir;
  Config config = test::tiny_training_config(test::write_synthetic_shard(dir.file("a.bin"), 64, 20000));
  {
    MegatronIndexedDatasetWriter megatron(dir.file("b"), 64);
    std::vector<int> document(200);
    for (int d = 0; d < 60; ++d) {
      for (int i = 0; i < 200; ++i) document[size_t(i)] = (d * 13 + i * i) % 61;
      megatron.add_document(document);
    }
    megatron.finish();
  }
  config.data.train_sources = {{.path = dir.file("a.bin"), .weight = 0.7}, {.path = dir.file("b"), .weight = 0.3,
                                                                            .format = "megatron"}};
  config.parallel.data_parallel = 2;
  config.parallel.collective_timeout = 120;
  test::expect_equivalent(test::run_equivalence(config, 12));
}

auto layout_name = [](const ::testing::TestParamInfo<Layout>& info) { return info.param.name(); };
INSTANTIATE_TEST_SUITE_P(Size2, Equivalence, ::testing::ValuesIn(kTwoRanks), layout_name);
INSTANTIATE_TEST_SUITE_P(Size4, Equivalence, ::testing::ValuesIn(kFourRanks), layout_name);

}  // namespace
}  // namespace moe4d
