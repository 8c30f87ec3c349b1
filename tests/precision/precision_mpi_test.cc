// Overflow and non-finite handling across ranks (mpirun -np 2): an fp16 overflow on one data-parallel
// rank only is seen by both through the step's gradient-norm reduction, so both skip the step and
// halve the scale together; a NaN on the second pipeline stage is diagnosed there, by every rank.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

#include "../train/train_fixture.h"
#include "comm/mpi/mpi_communicator.h"
#include "core/error.h"
#include "precision_test_util.h"
#include "train/trainer.h"

namespace moe4d {
namespace {

using test::InjectValue;

// One shard for all ranks: rank 0 writes it into its temporary directory (removed at exit) and
// sends the path to the others.
std::string shared_shard(Communicator& world) {
  static test::TempDir dir("moe4d-precision-mpi");
  const std::string path = dir.file("train.bin");
  std::vector<char> name(512, '\0');
  if (world.rank() == 0) {
    test::write_synthetic_shard(path, 64, 20000);
    std::copy(path.begin(), path.end(), name.begin());
  }
  world.broadcast(name.data(), name.size(), DType::kU8, 0);
  return name.data();
}

std::unique_ptr<ParallelContext> context(const Config& config) {
  auto world = MpiCommunicator::world(CommOptions{.timeout_seconds = 120});
  return make_parallel_context(std::move(world), config.parallel, 0);
}

TEST(PrecisionMpi, OverflowOnOneDataParallelRankSkipsTheStepEverywhere) {
  auto world = MpiCommunicator::world(CommOptions{.timeout_seconds = 120});
  ASSERT_EQ(world->size(), 2);
  const int rank = world->rank();
  Config config = test::tiny_training_config(shared_shard(*world));
  config.parallel.data_parallel = 2;
  config.parallel.micro_batch_num = 1;
  config.train.precision = Precision::kFP16;
  config.train.loss_scale.initial = 1024;
  auto pc = make_parallel_context(std::move(world), config.parallel, 0);
  InjectValue overflow({3}, "layers.0.ffn.w2.weight", TensorRole::kInputGradient,
                       std::numeric_limits<float>::infinity());
  // Only rank 1 gets the fault.
  Trainer trainer(config, *pc, {.quiet = true, .metrics_path = "/dev/null",
                                .fault_injector = rank == 1 ? &overflow : nullptr});
  std::vector<StepResult> r;
  for (int s = 1; s <= 5; ++s) r.push_back(trainer.train_step());
  if (rank == 1) {
    EXPECT_GT(overflow.hits(3), 0);
  }
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(r[i].skipped, i == 2) << "step " << i + 1 << " on rank " << rank;
    EXPECT_EQ(r[i].overflow, i == 2) << "step " << i + 1 << " on rank " << rank;
  }
  EXPECT_EQ(r[2].loss_scale, 1024);
  EXPECT_EQ(r[3].loss_scale, 512);
  EXPECT_EQ(trainer.skipped_steps(), 1);
  // Both ranks saw the same losses (one world reduction carries them).
  double high = r.back().loss, low = r.back().loss;
  pc->world->all_reduce(&high, 1, DType::kF64, ReduceOp::kMax);
  pc->world->all_reduce(&low, 1, DType::kF64, ReduceOp::kMin);
  EXPECT_EQ(high, low);
}

TEST(PrecisionMpi, NanOnTheSecondPipelineStageIsDiagnosedThere) {
  auto probe = MpiCommunicator::world(CommOptions{.timeout_seconds = 120});
  const std::string shard = shared_shard(*probe);
  probe.reset();
  Config config = test::tiny_training_config(shard);
  config.parallel.pipeline_parallel = 2;  // layer 0 on stage 0, layer 1 (MoE) and the head on stage 1
  config.parallel.micro_batch_num = 2;
  config.train.precision = Precision::kBF16;
  config.train.max_nonfinite_steps = 2;
  auto pc = context(config);
  InjectValue nan = InjectValue::from_step(2, "layers.1.moe.experts.w1", TensorRole::kForwardOutput,
                                           std::numeric_limits<float>::quiet_NaN());
  Trainer trainer(config, *pc, {.quiet = true, .metrics_path = "/dev/null", .fault_injector = &nan});
  EXPECT_FALSE(trainer.train_step().skipped);
  EXPECT_TRUE(trainer.train_step().skipped);
  try {
    trainer.train_step();
    FAIL() << "step 3 should stop the run on rank " << pc->rank;
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("first non-finite tensor: layers.1 expert"), std::string::npos) << m;
    EXPECT_NE(m.find("w1 projection (forward output of layers.1.moe.experts.w1["), std::string::npos) << m;
    EXPECT_NE(m.find("on rank 1"), std::string::npos) << m;
  }
}

}  // namespace
}  // namespace moe4d
