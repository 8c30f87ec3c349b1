// Whole training runs on the reference backend (train.backend: reference; backend/reference_backend.h),
// the independent plain-loop implementation of every kernel, through the lock-step equivalence
// harness (tests/common/equivalence_harness.h: each step from the same weights):
//   SingleRank: the reference backend against the cpu backend (OpenBLAS / oneDNN kernels), one rank;
//   Size8:      8-rank layouts on the reference backend against the single-rank run on the reference
//               backend: EP 2 x TP 2 x PP 2 (the dense gradients data-parallel over the EP ranks), and
//               DP 2 x EP 2 x TP 2 with ZeRO-3.
// The reference backend is slow: the tiny fixture model, a few steps.
#include <gtest/gtest.h>

#include "../common/equivalence_harness.h"
#include "../train/train_fixture.h"
#include "parallel/parallel_context.h"
#include "train/trainer.h"

namespace moe4d {
namespace {

constexpr int kSteps = 6;

Config reference_config(const test::TempDir& dir) {
  Config c = test::tiny_training_config(test::write_synthetic_shard(dir.file("train.bin"), 64, 20000));
  c.train.steps = kSteps;
  c.train.warmup_steps = 1;
  c.train.backend = ComputeBackend::kReference;
  c.parallel.collective_timeout = 300;
  return c;
}

// Tolerance of the cpu backend against the reference backend, one step from the same weights.
// Both keep fp32 tensors; they differ in how they sum: the cpu kernels accumulate in fp32 (blocked
// sgemm, vectorised reductions), the reference in fp64 rounded once. An fp32 sum of K terms is off by
// at most K * u relative (u = 2^-24 = 6e-8) of the sum of the terms' magnitudes (Higham, §3.1). The
// longest reductions of the tiny model are K = 64 (the vocabulary of the softmax, the 4 x 16 tokens
// of a micro-batch in the weight gradients; the hidden and FFN widths are 32 and 48), so one op is off by <= 64 u = 3.8e-6 relative,
// and errors of a few ops in sequence add to a few 1e-6 (observed on this fixture: 1e-8).
// Loss, aux loss and gradient norm: 2e-5 relative (5x the one-op bound). Parameters: one AdamW step
// moves a weight by lr x m / (sqrt(v) + eps) <= lr = 3e-3, and a relative error e of the gradient
// moves m / sqrt(v) by ~e, so the parameters differ by ~lr x 1e-5: the harness's 1e-4 holds with
// room.
constexpr test::Tolerance kCpuVsReference{.loss = 2e-5, .params = 1e-4};

TEST(SingleRank, ReferenceBackendMatchesCpuBackend) {
  test::TempDir dir;
  const Config reference = reference_config(dir);
  Config cpu = reference;
  cpu.train.backend = ComputeBackend::kCpu;
  auto pc = make_single_rank_context();
  Trainer first(cpu, *pc, {.quiet = true, .metrics_path = "/dev/null"});
  Trainer run(reference, *pc, {.quiet = true, .metrics_path = "/dev/null"});
  ASSERT_STREQ(first.backend().name(), "cpu");
  ASSERT_STREQ(run.backend().name(), "reference");
  test::EquivalenceRun out;
  test::train_lock_step(reference, &first, true, run, *pc, kSteps, out);
  test::expect_equivalent(out, kCpuVsReference);
}

// Both runs on the reference backend: they differ only in the order of the fp32 sums across ranks
// (the gradient and TP reductions), the harness's default tolerances.
TEST(Size8, ReferenceBackendLayoutMatchesSingleRank) {
  test::TempDir dir;
  Config config = reference_config(dir);
  config.parallel.expert_parallel = 2;
  config.parallel.tensor_parallel = 2;
  config.parallel.pipeline_parallel = 2;
  test::expect_equivalent(test::run_equivalence(config, kSteps));
}

// DP 2 x EP 2 x TP 2 with ZeRO-3: the parameter shards gathered, cut and reduced on the reference backend.
TEST(Size8, ReferenceBackendZero3LayoutMatchesSingleRank) {
  test::TempDir dir;
  Config config = reference_config(dir);
  config.parallel.data_parallel = 2;
  config.parallel.expert_parallel = 2;
  config.parallel.tensor_parallel = 2;
  config.parallel.zero_stage = 3;
  test::expect_equivalent(test::run_equivalence(config, kSteps));
}

}  // namespace
}  // namespace moe4d
