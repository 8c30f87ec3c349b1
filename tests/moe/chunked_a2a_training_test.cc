// Training with the expert all-to-all cut into slices (moe.a2a_chunks 2 and 4) reproduces the
// single-rank run, like every other layout (design.md §6; the pattern of
// tests/parallel_train/equivalence_test.cc): per-step loss within 1e-5 relative for 20 steps, the
// aux loss too, final parameters within 1e-4. EP2 runs under 2 ranks, EP2 x TP2 under 4.
#include <gtest/gtest.h>

#include <cmath>

#include "../train/train_fixture.h"
#include "comm/mpi_communicator.h"
#include "train/trainer.h"

namespace moe4d {
namespace {

struct ChunkedLayout {
  int ep = 1, tp = 1, chunks = 1;
  std::string name() const {
    return "ep" + std::to_string(ep) + "_tp" + std::to_string(tp) + "_chunks" + std::to_string(chunks);
  }
};

struct RunResult {
  std::vector<double> losses, aux;
  int64_t all_to_all_calls = 0;  // on this rank's EP group
  std::map<std::string, FullTensor> params;
};

RunResult train(const Config& config, ParallelContext& pc, int steps) {
  Trainer trainer(config, pc, {.quiet = true, .metrics_path = "/dev/null"});
  RunResult r;
  const int64_t calls_before = pc.ep->stats()[CommOp::kAllToAllV].calls;
  for (int i = 0; i < steps; ++i) {
    StepResult s = trainer.train_step();
    r.losses.push_back(s.loss);
    r.aux.push_back(s.aux_loss);
  }
  r.all_to_all_calls = pc.ep->stats()[CommOp::kAllToAllV].calls - calls_before;
  r.params = trainer.gather_parameters();
  return r;
}

class ChunkedEquivalence : public ::testing::TestWithParam<ChunkedLayout> {};

TEST_P(ChunkedEquivalence, ReproducesSingleRankRun) {
  const ChunkedLayout layout = GetParam();
  auto world = MpiCommunicator::world(CommOptions{.timeout_seconds = 120});
  ASSERT_EQ(world->size(), layout.ep * layout.tp);
  test::TempDir dir;
  Config config = test::tiny_training_config(test::write_synthetic_shard(dir.file("train.bin"), 64, 20000));
  config.model.moe.a2a_chunks = layout.chunks;
  const int steps = 20;

  RunResult reference;
  if (world->rank() == 0) {
    Config single = config;
    single.parallel.micro_batch_num = config.parallel.micro_batch_num * layout.ep;
    auto local = make_single_rank_context();
    reference = train(single, *local, steps);
  }
  Config parallel = config;
  parallel.parallel.expert_parallel = layout.ep;
  parallel.parallel.tensor_parallel = layout.tp;
  auto pc = make_parallel_context(std::move(world), parallel.parallel, 0);
  RunResult run = train(parallel, *pc, steps);

  // The slices really were sent: per MoE layer and micro-batch, `chunks` all-to-alls for each of the
  // four moves (dispatch and combine, forward and backward).
  const int moe_layers = 1;
  EXPECT_EQ(run.all_to_all_calls, int64_t(steps) * config.parallel.micro_batch_num * moe_layers * 4 * layout.chunks);
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

const ChunkedLayout kTwoRanks[] = {{.ep = 2, .chunks = 2}, {.ep = 2, .chunks = 4}};
const ChunkedLayout kFourRanks[] = {{.ep = 2, .tp = 2, .chunks = 2}, {.ep = 2, .tp = 2, .chunks = 4}};

auto layout_name = [](const ::testing::TestParamInfo<ChunkedLayout>& info) { return info.param.name(); };
INSTANTIATE_TEST_SUITE_P(Size2, ChunkedEquivalence, ::testing::ValuesIn(kTwoRanks), layout_name);
INSTANTIATE_TEST_SUITE_P(Size4, ChunkedEquivalence, ::testing::ValuesIn(kFourRanks), layout_name);

}  // namespace
}  // namespace moe4d
