// Compressed data-parallel communication (docs/zero.md), on DP2:
//   - grad_compression bf16 / fp16 (zero_stage 0 all-reduce and zero_stage 2 reduce-scatter) hands
//     exactly half the gradient bytes to the reductions and converges like the fp32 run (final loss
//     within 3%);
//   - 1-bit Adam: the warm-up equals AdamW step for step; after it the gradients stay local, the
//     momentum travels as sign bits, at least 16x fewer bytes than the warm-up's fp32 all-reduce, and
//     the loss still falls like AdamW's (within 5% after 40 steps); also with expert parallelism
//     (dense momentum over DP x EP) and with a pipeline and tied embeddings;
//   - the 1-bit all-reduce itself: every rank ends with the same values, and with error feedback
//     on both sides the mean over repeated calls converges to the true average.
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <random>

#include "../train/train_fixture.h"
#include "comm/mpi/mpi_communicator.h"
#include "train/onebit_adam.h"
#include "train/trainer.h"

namespace moe4d {
namespace {

struct TrainRun {
  std::vector<double> losses;
  std::vector<nlohmann::json> zero;  // the metrics record's "zero" of every step
};

TrainRun train(const Config& config, ParallelContext& pc, int steps) {
  Trainer trainer(config, pc, {.quiet = true, .metrics_path = "/dev/null"});
  TrainRun r;
  for (int i = 0; i < steps; ++i) {
    StepResult s = trainer.train_step();
    r.losses.push_back(s.loss);
    r.zero.push_back(s.record["zero"]);
  }
  return r;
}

double tail_mean(const std::vector<double>& v, int n) {
  return std::accumulate(v.end() - n, v.end(), 0.0) / n;
}

class Compression : public ::testing::Test {
 protected:
  Compression() {
    config_ = test::tiny_training_config(test::write_synthetic_shard(dir_.file("train.bin"), 64, 40000));
    config_.model.num_layers = 4;
    config_.train.steps = 40;
    config_.parallel.data_parallel = 2;
    config_.parallel.collective_timeout = 120;
    pc_ = make_parallel_context(MpiCommunicator::world(CommOptions{.timeout_seconds = 120}), config_.parallel, 0);
  }
  test::TempDir dir_;
  Config config_;
  std::unique_ptr<ParallelContext> pc_;
};

TEST_F(Compression, SixteenBitReductionsHalveTheBytesAndConverge) {
  for (int stage : {0, 2}) {
    Config fp32 = config_;
    fp32.parallel.zero_stage = stage;
    const TrainRun reference = train(fp32, *pc_, 40);
    for (GradCompression c : {GradCompression::kBF16, GradCompression::kFP16}) {
      SCOPED_TRACE(fmt::format("zero_stage {}, {}", stage, c == GradCompression::kBF16 ? "bf16" : "fp16"));
      Config compressed = fp32;
      compressed.train.grad_compression = c;
      const TrainRun run = train(compressed, *pc_, 40);
      for (size_t i = 0; i < run.zero.size(); ++i) {
        const int64_t full = reference.zero[i]["grad_payload_bytes"], half = run.zero[i]["grad_payload_bytes"];
        ASSERT_GT(full, 0);
        EXPECT_EQ(2 * half, full) << "step " << i + 1;
      }
      EXPECT_LT(tail_mean(reference.losses, 5), reference.losses.front() - 0.5) << "the fp32 run learns";
      const double expected = tail_mean(reference.losses, 5), got = tail_mean(run.losses, 5);
      EXPECT_NEAR(got, expected, 0.03 * expected);
      EXPECT_NE(run.losses.back(), reference.losses.back()) << "16-bit reduction should not be bit-identical";
    }
  }
}

// 1-bit Adam against AdamW in the same layout: identical through the warm-up, then compressed.
void expect_onebit_like_adamw(const Config& adamw_config, ParallelContext& pc, int freeze, int steps) {
  Config onebit = adamw_config;
  onebit.train.optimizer = OptimizerKind::kOneBitAdam;
  onebit.train.freeze_steps = freeze;
  const TrainRun reference = train(adamw_config, pc, steps);
  const TrainRun run = train(onebit, pc, steps);
  for (int i = 0; i < freeze; ++i) {
    EXPECT_EQ(run.losses[i], reference.losses[i]) << "warm-up is AdamW, step " << i + 1;
    EXPECT_FALSE(run.zero[i]["gradients_local"].get<bool>());
    EXPECT_EQ(run.zero[i]["optimizer_payload_bytes"].get<int64_t>(), 0);
  }
  const int64_t fp32_bytes = run.zero[1]["grad_payload_bytes"];
  ASSERT_GT(fp32_bytes, 0);
  for (int i = freeze; i < steps; ++i) {
    EXPECT_TRUE(run.zero[i]["gradients_local"].get<bool>()) << "step " << i + 1;
    EXPECT_EQ(run.zero[i]["grad_payload_bytes"].get<int64_t>(), 0) << "step " << i + 1;
    const int64_t compressed = run.zero[i]["optimizer_payload_bytes"];
    ASSERT_GT(compressed, 0);
    EXPECT_GE(double(fp32_bytes) / double(compressed), 16.0) << "step " << i + 1;
  }
  const double expected = tail_mean(reference.losses, 5), got = tail_mean(run.losses, 5);
  EXPECT_LT(got, run.losses.front() - 0.5) << "1-bit Adam learns";
  EXPECT_NEAR(got, expected, 0.05 * expected);
}

TEST_F(Compression, OneBitAdamSendsSixteenTimesFewerBytesAndConverges) {
  expect_onebit_like_adamw(config_, *pc_, 8, 40);
}

TEST_F(Compression, OneBitAdamWithExpertParallelism) {
  Config ep = config_;
  ep.parallel.data_parallel = 1;
  ep.parallel.expert_parallel = 2;
  auto pc = make_parallel_context(MpiCommunicator::world(CommOptions{.timeout_seconds = 120}), ep.parallel, 0);
  expect_onebit_like_adamw(ep, *pc, 8, 40);
}

TEST_F(Compression, OneBitAdamWithPipelineAndTiedEmbeddings) {
  // One data replica: the momentum "average" runs over one rank per stage (compression and error
  // feedback still apply); the tied table's two copies must stay equal.
  Config pp = config_;
  pp.parallel.data_parallel = 1;
  pp.parallel.pipeline_parallel = 2;
  pp.parallel.micro_batch_num = 4;
  pp.model.tie_embeddings = true;
  auto pc = make_parallel_context(MpiCommunicator::world(CommOptions{.timeout_seconds = 120}), pp.parallel, 0);
  Config onebit = pp;
  onebit.train.optimizer = OptimizerKind::kOneBitAdam;
  onebit.train.freeze_steps = 8;
  Trainer trainer(onebit, *pc, {.quiet = true, .metrics_path = "/dev/null"});
  std::vector<double> losses;
  for (int i = 0; i < 30; ++i) losses.push_back(trainer.train_step().loss);
  EXPECT_LT(tail_mean(losses, 5), losses.front() - 0.5);
  // Both stages hold embed.weight; after the compressed updates the copies are still identical.
  const int id = trainer.params().find("embed.weight");
  ASSERT_GE(id, 0);
  const int64_t n = trainer.params().info(id).numel();
  std::vector<float> largest(trainer.params().value(id), trainer.params().value(id) + n), smallest = largest;
  pc->pp->all_reduce(largest.data(), size_t(n), ReduceOp::kMax);
  pc->pp->all_reduce(smallest.data(), size_t(n), ReduceOp::kMin);
  EXPECT_EQ(largest, smallest);
}

TEST(OneBitAllReduceMpi, RanksAgreeAndErrorFeedbackConvergesToTheAverage) {
  auto world = MpiCommunicator::world(CommOptions{.timeout_seconds = 60});
  const int ranks = world->size(), me = world->rank();
  const size_t n = 999;  // not a multiple of 8 x ranks: padded chunks
  std::mt19937 gen(11 + me);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(n);
  for (float& v : x) v = normal(gen);
  std::vector<float> average = x;
  world->all_reduce(average.data(), n);
  for (float& v : average) v /= float(ranks);

  OneBitAllReduce reduce(*world, n);
  std::vector<double> mean(n, 0.0);
  const int calls = 400;
  for (int c = 0; c < calls; ++c) {
    std::vector<float> data = x;
    reduce.average(data.data());
    if (c == 0) {  // identical on every rank
      std::vector<float> first = data;
      world->broadcast(first.data(), n, DType::kF32, 0);
      EXPECT_EQ(first, data);
    }
    for (size_t i = 0; i < n; ++i) mean[i] += data[i] / calls;
  }
  double error = 0, spread = 0;
  for (size_t i = 0; i < n; ++i) {
    error += std::abs(mean[i] - average[i]) / n;
    spread += std::abs(average[i]) / n;
  }
  EXPECT_LT(error, 0.1 * spread);
  // Bytes: (ranks - 1) blocks to the all-to-all and one block to the all-gather per call.
  EXPECT_EQ(reduce.payload_bytes(), int64_t(calls) * ranks * int64_t(reduce.block_bytes()));
  EXPECT_GE(4.0 * n / double(ranks * reduce.block_bytes()), 16.0);
}

}  // namespace
}  // namespace moe4d
