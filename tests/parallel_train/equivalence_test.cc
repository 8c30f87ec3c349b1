// Every parallel layout reproduces the single-rank run (design.md §6, the core test of moe4d).
//
// Launched through mpirun with N ranks. For each layout whose size is N, world rank 0 first runs the
// single-rank reference in-process (on LocalCommunicators, same global batch and the same
// micro-batches: micro_batch_num x data replicas of them), then all ranks run the layout. Per-step
// losses must agree within 1e-5 relative for 20 steps and the final parameters within 1e-4.
#include <gtest/gtest.h>

#include <cmath>

#include "../train/train_fixture.h"
#include "checkpoint/checkpoint.h"
#include "comm/mpi_communicator.h"
#include "train/trainer.h"

namespace moe4d {
namespace {

struct Layout {
  int dp = 1, ep = 1, tp = 1, pp = 1;
  RecomputeGranularity recompute = RecomputeGranularity::kNone;
  std::string name() const {
    std::string n = "dp" + std::to_string(dp) + "_ep" + std::to_string(ep) + "_tp" + std::to_string(tp) + "_pp" +
                    std::to_string(pp);
    if (recompute == RecomputeGranularity::kFull) n += "_recompute_full";
    if (recompute == RecomputeGranularity::kSelective) n += "_recompute_selective";
    return n;
  }
  int size() const { return dp * ep * tp * pp; }
};

struct RunResult {
  std::vector<double> losses, aux;
  std::map<std::string, FullTensor> params;  // on world rank 0
};

RunResult train(const Config& config, ParallelContext& pc, int steps) {
  Trainer trainer(config, pc, {.quiet = true, .metrics_path = "/dev/null"});
  RunResult r;
  for (int i = 0; i < steps; ++i) {
    StepResult s = trainer.train_step();
    r.losses.push_back(s.loss);
    r.aux.push_back(s.aux_loss);
  }
  r.params = trainer.gather_parameters();
  return r;
}

class Equivalence : public ::testing::TestWithParam<Layout> {};

TEST_P(Equivalence, ReproducesSingleRankRun) {
  const Layout layout = GetParam();
  auto world = MpiCommunicator::world(CommOptions{.timeout_seconds = 120});
  ASSERT_EQ(world->size(), layout.size()) << "run this suite with --gtest_filter=Size" << layout.size() << "/*";
  test::TempDir dir;
  Config config = test::tiny_training_config(test::write_synthetic_shard(dir.file("train.bin"), 64, 20000));
  const int steps = 20;

  RunResult reference;
  if (world->rank() == 0) {
    Config single = config;
    single.parallel.micro_batch_num = config.parallel.micro_batch_num * layout.dp * layout.ep;
    auto local = make_single_rank_context();
    reference = train(single, *local, steps);
  }
  Config parallel = config;
  parallel.parallel.data_parallel = layout.dp;
  parallel.parallel.expert_parallel = layout.ep;
  parallel.parallel.tensor_parallel = layout.tp;
  parallel.parallel.pipeline_parallel = layout.pp;
  parallel.parallel.recompute = layout.recompute;
  auto pc = make_parallel_context(std::move(world), parallel.parallel, 0);
  RunResult run = train(parallel, *pc, steps);
  if (pc->rank != 0) return;

  for (int i = 0; i < steps; ++i) {
    EXPECT_NEAR(run.losses[i], reference.losses[i], 1e-5 * std::abs(reference.losses[i])) << "step " << i + 1;
    EXPECT_NEAR(run.aux[i], reference.aux[i], 1e-5 * std::abs(reference.aux[i])) << "aux loss, step " << i + 1;
  }
  EXPECT_LT(reference.losses.back(), reference.losses.front() - 0.1) << "the reference run should learn";
  ASSERT_EQ(run.params.size(), reference.params.size());
  for (const auto& [name, ref] : reference.params) {
    ASSERT_TRUE(run.params.count(name)) << name;
    const FullTensor& got = run.params.at(name);
    ASSERT_EQ(got.shape, ref.shape) << name;
    double worst = 0;
    for (int64_t i = 0; i < ref.shape.numel(); ++i)
      worst = std::max(worst, double(std::abs(got.data.f32()[i] - ref.data.f32()[i])));
    EXPECT_LE(worst, 1e-4) << name;
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
};

auto layout_name = [](const ::testing::TestParamInfo<Layout>& info) { return info.param.name(); };
INSTANTIATE_TEST_SUITE_P(Size2, Equivalence, ::testing::ValuesIn(kTwoRanks), layout_name);
INSTANTIATE_TEST_SUITE_P(Size4, Equivalence, ::testing::ValuesIn(kFourRanks), layout_name);

}  // namespace
}  // namespace moe4d
