// tests/common/equivalence_harness.h — "this parallel layout reproduces the single-rank run"
// (docs/model.md §3), shared by every equivalence test launched through mpirun.
//
// run_equivalence: world rank 0 first trains the single-rank reference in-process (on
// LocalCommunicators, with the same global batch and the same micro-batches: micro_batch_num x data
// replicas of them), then every rank trains the layout; expect_equivalent compares per-step loss and
// aux loss (1e-5 relative) and the final parameters (1e-4) on rank 0. run_equivalence_between does
// the same with another layout of the same world size as the reference (e.g. zero_stage 0 vs k).
// A test may pass wider tolerances where it says why (16-bit gradient compression).
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "comm/mpi_communicator.h"
#include "train/trainer.h"

namespace moe4d::test {

struct RunResult {
  std::vector<double> losses, aux, grad_norms;
  std::map<std::string, FullTensor> params;  // full tensors, on world rank 0
  int64_t all_to_all_calls = 0;              // on this rank's EP group during the run
  int64_t intra_node_reduce_scatters = 0;    // of the hierarchical dense gradient all-reduce (0: flat)
};

inline RunResult train_steps(const Config& config, ParallelContext& pc, int steps) {
  Trainer trainer(config, pc, {.quiet = true, .metrics_path = "/dev/null"});
  RunResult r;
  const int64_t calls_before = pc.ep->stats()[CommOp::kAllToAllV].calls;
  for (int i = 0; i < steps; ++i) {
    StepResult s = trainer.train_step();
    r.losses.push_back(s.loss);
    r.aux.push_back(s.aux_loss);
    r.grad_norms.push_back(s.grad_norm);
  }
  r.all_to_all_calls = pc.ep->stats()[CommOp::kAllToAllV].calls - calls_before;
  if (pc.dp_ep_sync->is_hierarchical())
    r.intra_node_reduce_scatters = pc.dp_ep_sync->intra_node()->stats()[CommOp::kReduceScatter].calls;
  r.params = trainer.gather_parameters();
  return r;
}

struct EquivalenceRun {
  RunResult reference;  // only on world rank 0
  RunResult run;
  int rank = 0;
};

// `config` carries the layout in config.parallel (micro_batch_num per replica). Collective over
// MPI_COMM_WORLD, whose size must be the layout's world size.
inline EquivalenceRun run_equivalence(const Config& config, int steps) {
  auto world = MpiCommunicator::world(CommOptions{.timeout_seconds = config.parallel.collective_timeout});
  EXPECT_EQ(world->size(), config.parallel.world_size()) << "run this suite under mpirun -np "
                                                         << config.parallel.world_size();
  EquivalenceRun out;
  out.rank = world->rank();
  if (world->rank() == 0) {
    Config single = config;
    single.parallel = ParallelConfig{};
    single.parallel.micro_batch_num = config.parallel.micro_batch_num * config.parallel.data_replicas();
    single.parallel.recompute = config.parallel.recompute;
    auto local = make_single_rank_context();
    out.reference = train_steps(single, *local, steps);
  }
  auto pc = make_parallel_context(std::move(world), config.parallel, 0);
  out.run = train_steps(config, *pc, steps);
  return out;
}

// `reference` and `config` are layouts of the same world size (they may differ in everything the rank
// grid does not: zero_stage, compression, schedule): every rank trains the reference, then `config`,
// on the same communicators. Collective over MPI_COMM_WORLD.
inline EquivalenceRun run_equivalence_between(const Config& reference, const Config& config, int steps) {
  auto world = MpiCommunicator::world(CommOptions{.timeout_seconds = config.parallel.collective_timeout});
  EXPECT_EQ(world->size(), config.parallel.world_size()) << "run this suite under mpirun -np "
                                                         << config.parallel.world_size();
  EquivalenceRun out;
  out.rank = world->rank();
  auto pc = make_parallel_context(std::move(world), config.parallel, 0);
  out.reference = train_steps(reference, *pc, steps);
  out.run = train_steps(config, *pc, steps);
  return out;
}

// Loss and aux loss per step (relative), final parameters (absolute).
struct Tolerance {
  double loss = 1e-5;
  double params = 1e-4;
};

inline void expect_equivalent(const EquivalenceRun& r, Tolerance tol = {}) {
  if (r.rank != 0) return;
  const RunResult& ref = r.reference;
  ASSERT_EQ(r.run.losses.size(), ref.losses.size());
  for (size_t i = 0; i < ref.losses.size(); ++i) {
    EXPECT_NEAR(r.run.losses[i], ref.losses[i], tol.loss * std::abs(ref.losses[i])) << "step " << i + 1;
    EXPECT_NEAR(r.run.aux[i], ref.aux[i], tol.loss * std::abs(ref.aux[i])) << "aux loss, step " << i + 1;
  }
  EXPECT_LT(ref.losses.back(), ref.losses.front() - 0.1) << "the reference run should learn";
  ASSERT_EQ(r.run.params.size(), ref.params.size());
  for (const auto& [name, expected] : ref.params) {
    ASSERT_TRUE(r.run.params.count(name)) << name;
    const FullTensor& got = r.run.params.at(name);
    ASSERT_EQ(got.shape, expected.shape) << name;
    double worst = 0;
    for (int64_t i = 0; i < expected.shape.numel(); ++i)
      worst = std::max(worst, double(std::abs(got.data.f32()[i] - expected.data.f32()[i])));
    EXPECT_LE(worst, tol.params) << name;
  }
}

}  // namespace moe4d::test
