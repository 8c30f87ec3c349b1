// tests/common/equivalence_harness.h — "this parallel layout reproduces the single-rank run"
// (docs/model.md §3), shared by every equivalence test launched through mpirun.
//
// run_equivalence: world rank 0 trains the single-rank reference in-process (on LocalCommunicators,
// with the same global batch and the same micro-batches: micro_batch_num x data replicas of them, the
// replicas reading different sequences: dp x ep / context_parallel)
// while every rank trains the layout, in lock-step: after every step rank 0 records both runs' loss,
// aux loss, gradient norm and full parameters, then the layout takes the reference's state — its
// parameters, AdamW moments and router biases, broadcast from rank 0 and cut into each rank's shards
// (Trainer::load_state, the path a checkpoint load takes) — so that every step starts from the same
// weights. expect_equivalent compares every step: loss, aux loss and gradient norm (1e-5 relative)
// and the parameters (1e-4). run_equivalence_between does the same with another layout of the same
// world size as the reference (e.g. zero_stage 0 vs k). A test may pass wider tolerances where it
// says why (16-bit gradient compression).
//
// Why lock-step: two runs whose GEMMs round differently (another blocking of the same product, or
// another OpenBLAS kernel: it picks AVX2 or AVX-512 ones by CPU) differ by an ulp after one step,
// and over free-running steps that difference grows with the training dynamics, past the tolerances
// on some CPUs (an AVX-512 EPYC: loss 1.3e-5 apart at step 20 of an interleaved pipeline). From the
// same weights, a step's difference is rounding only, while a real error (a gradient counted twice,
// a missing reduction, a stale shard) shows in the loss, the gradient norm or the parameters of the
// first step it touches. The reference itself runs free and must learn.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "comm/mpi/mpi_communicator.h"
#include "core/error.h"
#include "train/trainer.h"

namespace moe4d::test {

struct RunResult {
  std::vector<double> losses, aux, grad_norms;
  // Full tensors on world rank 0. Lock-step runs: the parameters after every step (`params` empty).
  // Free-running runs (a test's own loop): `params` after the last step.
  std::vector<std::map<std::string, FullTensor>> step_params;
  std::map<std::string, FullTensor> params;
  int64_t all_to_all_calls = 0;              // on this rank's EP group during the run's steps
  int64_t intra_node_reduce_scatters = 0;    // of the hierarchical dense gradient all-reduce (0: flat)
};

struct EquivalenceRun {
  RunResult reference;  // only on world rank 0
  RunResult run;
  int rank = 0;
};

namespace detail {

inline void record(RunResult& r, const StepResult& s) {
  r.losses.push_back(s.loss);
  r.aux.push_back(s.aux_loss);
  r.grad_norms.push_back(s.grad_norm);
}

// World rank 0's tensors on every rank of `world` (names and shapes first, then the data in one piece).
inline std::map<std::string, FullTensor> broadcast_tensors(Communicator& world,
                                                           const std::map<std::string, FullTensor>& tensors) {
  std::string header;
  if (world.rank() == 0) {
    nlohmann::json names = nlohmann::json::array();
    for (const auto& [name, t] : tensors) names.push_back({name, t.shape.dims()});
    header = names.dump();
  }
  int64_t length = int64_t(header.size());
  world.broadcast(&length, 1, DType::kI64, 0);
  header.resize(size_t(length));
  world.broadcast(header.data(), header.size(), DType::kU8, 0);
  std::map<std::string, FullTensor> out;
  size_t total = 0;
  for (const auto& entry : nlohmann::json::parse(header)) {
    const Shape shape = Shape::of(entry[1].get<std::vector<int64_t>>());
    total += size_t(shape.numel());
    out.emplace(entry[0].get<std::string>(), FullTensor{shape, Buffer(size_t(shape.numel()) * sizeof(float))});
  }
  std::vector<float> packed(total);
  size_t at = 0;
  if (world.rank() == 0)
    for (const auto& [name, t] : tensors) {
      std::memcpy(packed.data() + at, t.data.f32(), size_t(t.shape.numel()) * sizeof(float));
      at += size_t(t.shape.numel());
    }
  world.broadcast(packed.data(), packed.size(), DType::kF32, 0);
  at = 0;
  for (auto& [name, t] : out) {
    std::memcpy(t.data.f32(), packed.data() + at, size_t(t.shape.numel()) * sizeof(float));
    at += size_t(t.shape.numel());
  }
  return out;
}

// `run` (every rank of `world`) takes the state of `reference` (gathered on world rank 0 into
// `state`; `reference` may be null on other ranks): parameters, AdamW moments, router biases (summed
// over the ranks where `reference_biases`: one holder of each of the reference's MoE layers).
inline void resynchronise(const Config& config, const Trainer::FullState& state, Trainer* reference,
                          bool reference_biases, Trainer& run, Communicator& world) {
  auto values = broadcast_tensors(world, state.values);
  auto optimizer = broadcast_tensors(world, state.optimizer);
  auto lookup = [](std::map<std::string, FullTensor>& tensors) {
    auto views = std::make_shared<std::map<std::string, Tensor>>();
    for (auto& [name, t] : tensors) views->emplace(name, Tensor::f32(t.data.f32(), t.shape));
    return [views](const std::string& name) -> const Tensor& {
      auto it = views->find(name);
      if (it == views->end()) fail("the reference run has no tensor '{}'", name);
      return it->second;
    };
  };
  run.load_state(lookup(values), lookup(optimizer), "the reference run");
  // Router biases by global layer (aux-loss-free balancing): the reference holds every layer.
  const size_t E = size_t(config.model.moe.num_experts);
  std::vector<float> bias(size_t(config.model.num_layers) * E, 0.0f);
  if (reference_biases)
    for (MoeBlock* block : reference->model().moe_blocks())
      std::copy(block->router_bias().begin(), block->router_bias().end(), bias.begin() + size_t(block->layer()) * E);
  world.all_reduce(bias.data(), bias.size(), ReduceOp::kSum);
  for (MoeBlock* block : run.model().moe_blocks())
    std::copy_n(bias.begin() + size_t(block->layer()) * E, E, block->router_bias().begin());
}

}  // namespace detail

// `steps` steps of `run` (`config`, on `pc`, every rank) and `reference` (every rank on the same `pc`,
// or only world rank 0 on its own single-rank context: null on the others) in lock-step, `run` taking
// the reference's state after each; `reference_biases` on one holder of each of the reference's MoE
// layers. Records both into `out` (the reference's on world rank 0); `observe` sees each of the run's
// step results. Collective over pc.world.
inline void train_lock_step(const Config& config, Trainer* reference, bool reference_biases, Trainer& run,
                            ParallelContext& pc, int steps, EquivalenceRun& out,
                            const std::function<void(const StepResult&)>& observe = {}) {
  using detail::record;
  Communicator& world = *pc.world;
  for (int i = 0; i < steps; ++i) {
    if (reference) record(out.reference, reference->train_step());
    const int64_t calls_before = pc.ep->stats()[CommOp::kAllToAllV].calls;
    const int64_t scatters_before =
        pc.dp_ep_sync->is_hierarchical() ? pc.dp_ep_sync->intra_node()->stats()[CommOp::kReduceScatter].calls : 0;
    const StepResult s = run.train_step();
    record(out.run, s);
    if (observe) observe(s);
    out.run.all_to_all_calls += pc.ep->stats()[CommOp::kAllToAllV].calls - calls_before;
    if (pc.dp_ep_sync->is_hierarchical())
      out.run.intra_node_reduce_scatters +=
          pc.dp_ep_sync->intra_node()->stats()[CommOp::kReduceScatter].calls - scatters_before;
    Trainer::FullState state = reference ? reference->gather_state() : Trainer::FullState{};
    out.run.step_params.push_back(run.gather_parameters());
    detail::resynchronise(config, state, reference, reference_biases, run, world);
    if (world.rank() == 0) out.reference.step_params.push_back(std::move(state.values));
  }
}

// `config` carries the layout in config.parallel (micro_batch_num per replica). Collective over
// MPI_COMM_WORLD, whose size must be the layout's world size. reference_micro_batches > 0: the
// reference splits the same global batch into that many micro-batches instead (e.g. 1 with one
// micro-batch per replica: the reference's micro-batch is the union of the replicas' — what
// statistics reduced over the replicas, like the global-batch balance loss, must reproduce).
inline EquivalenceRun run_equivalence(const Config& config, int steps, int reference_micro_batches = 0) {
  auto world = MpiCommunicator::world(CommOptions{.timeout_seconds = config.parallel.collective_timeout});
  EXPECT_EQ(world->size(), config.parallel.world_size()) << "run this suite under mpirun -np "
                                                         << config.parallel.world_size();
  EquivalenceRun out;
  out.rank = world->rank();
  Config single = config;
  single.parallel = ParallelConfig{};
  single.parallel.micro_batch_num = reference_micro_batches > 0
                                        ? reference_micro_batches
                                        : config.parallel.micro_batch_num * config.parallel.dense_replicas();
  single.parallel.recompute = config.parallel.recompute;
  std::unique_ptr<ParallelContext> local;
  std::unique_ptr<Trainer> reference;
  if (out.rank == 0) {
    local = make_single_rank_context();
    reference = std::make_unique<Trainer>(single, *local, TrainerOptions{.quiet = true, .metrics_path = "/dev/null"});
  }
  auto pc = make_parallel_context(std::move(world), config.parallel, 0);
  Trainer run(config, *pc, {.quiet = true, .metrics_path = "/dev/null"});
  train_lock_step(config, reference.get(), out.rank == 0, run, *pc, steps, out);
  return out;
}

// `reference` and `config` are layouts of the same world size (they may differ in everything the rank
// grid does not: zero_stage, compression, schedule): every rank trains both, in lock-step, on the same
// communicators. Collective over MPI_COMM_WORLD.
inline EquivalenceRun run_equivalence_between(const Config& reference, const Config& config, int steps) {
  auto world = MpiCommunicator::world(CommOptions{.timeout_seconds = config.parallel.collective_timeout});
  EXPECT_EQ(world->size(), config.parallel.world_size()) << "run this suite under mpirun -np "
                                                         << config.parallel.world_size();
  EquivalenceRun out;
  out.rank = world->rank();
  auto pc = make_parallel_context(std::move(world), config.parallel, 0);
  Trainer first(reference, *pc, {.quiet = true, .metrics_path = "/dev/null"});
  Trainer run(config, *pc, {.quiet = true, .metrics_path = "/dev/null"});
  const bool holds_biases = pc->coord.tp == 0 && pc->coord.dp == 0 && pc->coord.ep == 0;  // one per stage
  train_lock_step(config, &first, holds_biases, run, *pc, steps, out);
  return out;
}

// Loss, aux loss and gradient norm per step (relative); parameters (absolute).
struct Tolerance {
  double loss = 1e-5;
  double params = 1e-4;
};

namespace detail {
inline void expect_parameters_near(const std::map<std::string, FullTensor>& got_params,
                                   const std::map<std::string, FullTensor>& ref_params, double tol,
                                   const std::string& when) {
  ASSERT_EQ(got_params.size(), ref_params.size()) << when;
  for (const auto& [name, expected] : ref_params) {
    ASSERT_TRUE(got_params.count(name)) << name << ", " << when;
    const FullTensor& got = got_params.at(name);
    ASSERT_EQ(got.shape, expected.shape) << name;
    double worst = 0;
    for (int64_t i = 0; i < expected.shape.numel(); ++i)
      worst = std::max(worst, double(std::abs(got.data.f32()[i] - expected.data.f32()[i])));
    EXPECT_LE(worst, tol) << name << ", " << when;
  }
}
}  // namespace detail

// Lock-step runs (step_params recorded): every step's loss, aux loss, gradient norm and parameters.
// Free-running runs (a test's own loop): every step's loss and aux loss, the final parameters.
inline void expect_equivalent(const EquivalenceRun& r, Tolerance tol = {}) {
  if (r.rank != 0) return;
  const RunResult& ref = r.reference;
  ASSERT_EQ(r.run.losses.size(), ref.losses.size());
  ASSERT_FALSE(ref.losses.empty());
  const bool lock_step = !ref.step_params.empty() || !r.run.step_params.empty();
  for (size_t i = 0; i < ref.losses.size(); ++i) {
    EXPECT_NEAR(r.run.losses[i], ref.losses[i], tol.loss * std::abs(ref.losses[i])) << "step " << i + 1;
    EXPECT_NEAR(r.run.aux[i], ref.aux[i], tol.loss * std::abs(ref.aux[i])) << "aux loss, step " << i + 1;
  }
  EXPECT_LT(ref.losses.back(), ref.losses.front() - 0.1) << "the reference run should learn";
  if (!lock_step) {
    detail::expect_parameters_near(r.run.params, ref.params, tol.params, "after the last step");
    return;
  }
  ASSERT_EQ(r.run.grad_norms.size(), ref.losses.size());
  ASSERT_EQ(ref.grad_norms.size(), ref.losses.size());
  ASSERT_EQ(r.run.step_params.size(), ref.losses.size());
  ASSERT_EQ(ref.step_params.size(), ref.losses.size());
  for (size_t i = 0; i < ref.losses.size(); ++i) {
    EXPECT_NEAR(r.run.grad_norms[i], ref.grad_norms[i], tol.loss * std::abs(ref.grad_norms[i]))
        << "gradient norm, step " << i + 1;
    detail::expect_parameters_near(r.run.step_params[i], ref.step_params[i], tol.params,
                                   "after step " + std::to_string(i + 1));
  }
}

}  // namespace moe4d::test
