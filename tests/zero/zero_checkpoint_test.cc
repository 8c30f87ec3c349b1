// Checkpoints stay layout-independent under ZeRO (docs/zero.md): they hold full tensors (values,
// exp_avg, exp_avg_sq) whatever the zero_stage, so
//   - a ZeRO-2 DP2 checkpoint resumes bit-exactly in the same layout and continues like the run
//     that wrote it in a zero_stage 0 single-rank run;
//   - a zero_stage 0 single-rank checkpoint continues in a ZeRO-3 DP2 run like the run that wrote it;
//   - a ZeRO-3 DP2 checkpoint continues in a ZeRO-1 EP2 run (dense state sharded over DP x EP).
// "Continues like" = the next 7 losses within 1e-5 relative (the layouts are equivalent, docs/model.md §3).
#include <gtest/gtest.h>
#include <mpi.h>

#include <cmath>

#include "../train/train_fixture.h"
#include "comm/mpi/mpi_communicator.h"
#include "train/trainer.h"

namespace moe4d {
namespace {

constexpr int kSteps = 14, kSaveAt = 7;

// A directory every rank can use: made by rank 0, its path broadcast.
class SharedDir {
 public:
  SharedDir() {
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (rank == 0) dir_ = std::make_unique<test::TempDir>("moe4d-zero-ckpt");
    std::string path = rank == 0 ? dir_->path() : std::string();
    int size = static_cast<int>(path.size());
    MPI_Bcast(&size, 1, MPI_INT, 0, MPI_COMM_WORLD);
    path.resize(size);
    MPI_Bcast(path.data(), size, MPI_CHAR, 0, MPI_COMM_WORLD);
    path_ = path;
  }
  ~SharedDir() { MPI_Barrier(MPI_COMM_WORLD); }  // nobody reads once rank 0 removes it
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::unique_ptr<test::TempDir> dir_;
  std::string path_;
};

std::vector<double> losses(Trainer& trainer, int steps) {
  std::vector<double> out;
  for (int i = 0; i < steps; ++i) out.push_back(trainer.train_step().loss);
  return out;
}

void expect_close(const std::vector<double>& got, const std::vector<double>& expected, const char* what) {
  ASSERT_EQ(got.size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i)
    EXPECT_NEAR(got[i], expected[i], 1e-5 * std::abs(expected[i])) << what << ", step " << kSaveAt + 1 + i;
}

class ZeroCheckpoint : public ::testing::Test {
 protected:
  ZeroCheckpoint() {
    base_ = test::tiny_training_config(test::write_synthetic_shard(dir_.file("train.bin"), 64, 20000));
    base_.model.num_layers = 4;
    base_.train.steps = kSteps;
    base_.parallel.collective_timeout = 120;
  }
  // DP2 (or EP2) with micro_batch_num 2, or the single rank with the same 4 micro-batches.
  Config layout(int dp, int ep, int zero, const std::string& ckpt) const {
    Config c = base_;
    c.parallel.data_parallel = dp;
    c.parallel.expert_parallel = ep;
    c.parallel.micro_batch_num = 4 / (dp * ep);
    c.parallel.zero_stage = zero;
    c.checkpoint.dir = ckpt;
    return c;
  }
  std::unique_ptr<ParallelContext> context(const Config& c) const {
    return make_parallel_context(MpiCommunicator::world(CommOptions{.timeout_seconds = 300}), c.parallel, 0);
  }

  test::TempDir dir_;  // this rank's token shard
  SharedDir shared_;
  Config base_;
};

TrainerOptions quiet(const std::string& resume = {}) {
  return {.resume_from = resume, .quiet = true, .metrics_path = "/dev/null"};
}

TEST_F(ZeroCheckpoint, ZeroTwoOnTwoRanksResumesExactlyAndLoadsIntoASingleRankRun) {
  const Config zero2 = layout(2, 1, 2, shared_.file("zero2"));
  auto pc = context(zero2);
  std::vector<double> continued;
  {
    Trainer trainer(zero2, *pc, quiet());
    losses(trainer, kSaveAt);
    trainer.save_checkpoint();
    continued = losses(trainer, kSteps - kSaveAt);
  }
  {
    Trainer resumed(zero2, *pc, quiet(zero2.checkpoint.dir));
    ASSERT_EQ(resumed.step(), kSaveAt);
    EXPECT_EQ(losses(resumed, kSteps - kSaveAt), continued) << "same layout: bit-exact";
  }
  if (pc->rank == 0) {
    Config single = layout(1, 1, 0, "");
    auto local = make_single_rank_context();
    Trainer resumed(single, *local, quiet(zero2.checkpoint.dir));
    ASSERT_EQ(resumed.step(), kSaveAt);
    expect_close(losses(resumed, kSteps - kSaveAt), continued, "single rank from ZeRO-2 DP2");
  }
}

TEST_F(ZeroCheckpoint, SingleRankCheckpointContinuesUnderZeroThree) {
  const std::string ckpt = shared_.file("single");
  std::vector<double> continued;
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank == 0) {
    Config single = layout(1, 1, 0, ckpt);
    auto local = make_single_rank_context();
    Trainer trainer(single, *local, quiet());
    losses(trainer, kSaveAt);
    trainer.save_checkpoint();
    continued = losses(trainer, kSteps - kSaveAt);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  const Config zero3 = layout(2, 1, 3, "");
  auto pc = context(zero3);
  Trainer resumed(zero3, *pc, quiet(ckpt));
  ASSERT_EQ(resumed.step(), kSaveAt);
  const std::vector<double> got = losses(resumed, kSteps - kSaveAt);
  if (rank == 0) expect_close(got, continued, "ZeRO-3 DP2 from the single rank");
}

TEST_F(ZeroCheckpoint, ZeroThreeCheckpointContinuesUnderZeroOneWithExpertParallelism) {
  const Config zero3 = layout(2, 1, 3, shared_.file("zero3"));
  std::vector<double> continued;
  {
    auto pc = context(zero3);
    Trainer trainer(zero3, *pc, quiet());
    losses(trainer, kSaveAt);
    trainer.save_checkpoint();
    continued = losses(trainer, kSteps - kSaveAt);
  }
  const Config zero1_ep2 = layout(1, 2, 1, "");
  auto pc = context(zero1_ep2);
  Trainer resumed(zero1_ep2, *pc, quiet(zero3.checkpoint.dir));
  ASSERT_EQ(resumed.step(), kSaveAt);
  const std::vector<double> got = losses(resumed, kSteps - kSaveAt);
  if (pc->rank == 0) expect_close(got, continued, "ZeRO-1 EP2 from ZeRO-3 DP2");
}

}  // namespace
}  // namespace moe4d
