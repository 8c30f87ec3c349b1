// Expert replication (moe.redundant_experts, docs/expert_replication.md) is an execution detail:
// with replicas and a rebalance every 3 steps, EP2, EP4, EP2 x TP2, EP2 x DP2 (ZeRO-3), EP2 x PP2,
// and EP2 with capacity, sliced all-to-all and full recompute reproduce the single-rank run (each of
// 20 steps from the same weights, tests/common/equivalence_harness.h: loss, aux loss and gradient norm
// 1e-5 relative, parameters 1e-4), EP2 also its own R = 0 run, across rebalances that really move
// replicas (asserted). A checkpoint written with R = 2 resumes with R = 0 and the other way round,
// continuing like the single-rank run (free-running, 20 steps: loss and aux loss 1e-5 relative per
// step, final parameters 1e-4).
//
// The router's selection bias of expert 0 is pinned (router_bias_update_rate 0), so expert 0 gets
// 3.6-4x the mean load and rebalances have something to do; the busiest EP rank's routed rows must
// be lower with the replicas (printed; the clear-margin check on a fixed router is
// tests/moe/replication_skew_test.cc).
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <utility>

#include "../common/equivalence_harness.h"
#include "../train/train_fixture.h"
#include "comm/mpi/mpi_communicator.h"
#include "train/trainer.h"

namespace moe4d {
namespace {

constexpr int kSteps = 20;
constexpr float kHotBias = 0.08f;  // on expert 0 of 8: measured 3.6-4x the mean load

struct ReplicationLayout {
  int ep = 2, tp = 1, dp = 1, pp = 1, zero = 0, redundant = 2, chunks = 1;
  bool capacity = false, recompute = false, sequence_parallel = false;
  int nodes_of = 0;  // > 0: simulated nodes of that many ranks (parallel.local_worker_num)
  std::string name() const {
    std::string n = "ep" + std::to_string(ep) + "_tp" + std::to_string(tp) + "_dp" + std::to_string(dp) + "_pp" +
                    std::to_string(pp) + "_r" + std::to_string(redundant);
    if (zero) n += "_zero" + std::to_string(zero);
    if (capacity) n += "_capacity";
    if (chunks > 1) n += "_chunks" + std::to_string(chunks);
    if (recompute) n += "_recompute";
    if (sequence_parallel) n += "_sp";
    if (nodes_of > 0) n += "_nodes_of" + std::to_string(nodes_of);
    return n;
  }
};

struct Observed {
  test::RunResult result;
  int moved_slots = 0, rebalances_seen = 0;
  double busiest_with = 0, busiest_without = 0;  // summed over the steps after the first rebalance
  double expert_imbalance = 0;                   // max / mean expert load, summed over the steps
  double cross_node = 0, cross_node_without = 0;  // rows sent to another node, summed over steps and layers
  std::vector<double> replica_bytes;              // per step, summed over the layers
  double peak_replica_bytes = 0;                  // the memory record's replica buffers (largest rank)
  bool rebalanced = false;                        // a rebalance has happened
};

Config base_config(const std::string& shard) {
  Config c = test::tiny_training_config(shard);
  c.model.moe.num_experts = 8;
  c.train.steps = kSteps;
  c.parallel.collective_timeout = 300;
  return c;
}

void pin_hot_expert(Trainer& trainer) {
  for (MoeBlock* block : trainer.model().moe_blocks()) block->router_bias()[0] = kHotBias;
}

// Collects what the replication metrics of one step say.
void observe(const Config& config, const StepResult& s, Observed& o) {
  o.peak_replica_bytes = s.record["memory"]["peak_replica_bytes"].get<double>();
  for (const auto& layer : s.record["moe"]["layers"]) o.expert_imbalance += layer["imbalance"].get<double>();
  if (!s.record["moe"].contains("replication")) return;
  o.replica_bytes.push_back(0);
  for (const auto& layer : s.record["moe"]["replication"]["layers"]) {
    o.cross_node += layer["cross_node_rows"].get<double>();
    o.cross_node_without += layer["cross_node_rows_without"].get<double>();
    o.replica_bytes.back() += layer["replica_bytes"].get<double>();
    if (o.rebalanced) {
      const auto with = layer["rank_tokens"].get<std::vector<double>>();
      const auto without = layer["rank_tokens_without"].get<std::vector<double>>();
      o.busiest_with += *std::max_element(with.begin(), with.end());
      o.busiest_without += *std::max_element(without.begin(), without.end());
    }
    o.moved_slots += layer["moved_slots"].get<int>();
  }
  if (s.step % config.model.moe.rebalance_interval == 0) o.rebalanced = true, ++o.rebalances_seen;
}

const TrainerOptions kQuiet{.quiet = true, .metrics_path = "/dev/null"};

// Trains `steps` steps free-running (from `resume` if given; `save` writes a checkpoint at the end)
// and collects what the replication metrics say.
Observed train(const Config& config, ParallelContext& pc, int steps, const std::string& resume = {},
               bool save = false) {
  Trainer trainer(config, pc, {.resume_from = resume, .quiet = true, .metrics_path = "/dev/null"});
  pin_hot_expert(trainer);
  Observed o;
  for (int i = 0; i < steps; ++i) {
    const StepResult s = trainer.train_step();
    o.result.losses.push_back(s.loss);
    o.result.aux.push_back(s.aux_loss);
    observe(config, s, o);
  }
  if (save) trainer.save_checkpoint();
  o.result.params = trainer.gather_parameters();
  return o;
}

Config with_layout(Config c, const ReplicationLayout& l) {
  c.parallel.expert_parallel = l.ep;
  c.parallel.tensor_parallel = l.tp;
  c.parallel.data_parallel = l.dp;
  c.parallel.pipeline_parallel = l.pp;
  c.parallel.zero_stage = l.zero;
  c.model.moe.redundant_experts = l.redundant;
  c.model.moe.rebalance_interval = l.redundant > 0 ? 3 : 0;
  c.model.moe.a2a_chunks = l.chunks;
  if (l.capacity) c.model.moe.capacity_factor = 1.25;
  if (l.recompute) c.parallel.recompute = RecomputeGranularity::kFull;
  c.parallel.sequence_parallel = l.sequence_parallel;
  c.parallel.local_worker_num = l.nodes_of;
  return c;
}

Config single_rank_config(const Config& layout_config) {
  Config single = layout_config;
  single.parallel = ParallelConfig{};
  single.parallel.micro_batch_num = layout_config.parallel.micro_batch_num * layout_config.parallel.data_replicas();
  single.parallel.recompute = layout_config.parallel.recompute;
  single.model.moe.redundant_experts = 0;
  single.model.moe.rebalance_interval = 0;
  return single;
}

Observed single_rank(const Config& layout_config) {
  const Config single = single_rank_config(layout_config);
  auto local = make_single_rank_context();
  return train(single, *local, kSteps);
}

class ReplicationEquivalence : public ::testing::TestWithParam<ReplicationLayout> {};

TEST_P(ReplicationEquivalence, ReproducesSingleRankAndUnreplicatedRuns) {
  const ReplicationLayout layout = GetParam();
  test::TempDir dir;
  const Config config = with_layout(base_config(test::write_synthetic_shard(dir.file("train.bin"), 64, 20000)), layout);
  auto world = MpiCommunicator::world(CommOptions{.timeout_seconds = 300});
  ASSERT_EQ(world->size(), config.parallel.world_size());
  // In lock-step with the single-rank run (tests/common/equivalence_harness.h): each step from its state.
  test::EquivalenceRun r;
  r.rank = world->rank();
  const Config single = single_rank_config(config);
  std::unique_ptr<ParallelContext> local;
  std::unique_ptr<Trainer> reference;
  if (r.rank == 0) {
    local = make_single_rank_context();
    reference = std::make_unique<Trainer>(single, *local, kQuiet);
    pin_hot_expert(*reference);
  }
  auto pc = make_parallel_context(std::move(world), config.parallel, 0);
  Trainer trainer(config, *pc, kQuiet);
  pin_hot_expert(trainer);
  Observed replicated;
  test::train_lock_step(config, reference.get(), r.rank == 0, trainer, *pc, kSteps, r,
                        [&](const StepResult& s) { observe(config, s, replicated); });
  test::expect_equivalent(r);
  if (r.rank != 0) return;
  EXPECT_EQ(replicated.rebalances_seen, kSteps / 3);
  EXPECT_GT(replicated.moved_slots, 0) << "a rebalance should have moved replicas";
  // The skew: the busiest EP rank's rows with the replicas against without them (same routing).
  std::printf("%s: expert load max/mean %.2f; busiest EP rank rows per step %.1f with replicas, %.1f without "
              "(%.2fx)\n",
              layout.name().c_str(), replicated.expert_imbalance / kSteps, replicated.busiest_with / (kSteps - 3),
              replicated.busiest_without / (kSteps - 3), replicated.busiest_without / replicated.busiest_with);
  // Dropless only (a capacity caps the hot expert's rows by itself). The placement follows a load
  // that a training router changes from step to step, so only "lower" is asserted here; the margin
  // on a fixed skewed router is tests/moe/replication_skew_test.cc.
  if (!layout.capacity) {
    EXPECT_LT(replicated.busiest_with, 0.95 * replicated.busiest_without);
  }
  // Across nodes the dispatch keeps a replicated expert's rows on the source's node where it can.
  if (layout.nodes_of > 0) {
    std::printf("%s: rows sent to another node %.0f with replicas, %.0f without\n", layout.name().c_str(),
                replicated.cross_node, replicated.cross_node_without);
    EXPECT_LT(replicated.cross_node, 0.9 * replicated.cross_node_without);
  }
  // Replica weights move once per step; their gradients once per step under ZeRO 0/1, once per
  // micro-batch under ZeRO-2/3 (which reduce every micro-batch). All ranks, all MoE layers.
  const double floats = double(layout.redundant / layout.ep) * 3 * config.model.hidden_size *
                        double(config.model.expert_ffn() / layout.tp);
  const int returns = layout.zero >= 2 ? config.parallel.micro_batch_num : 1;
  int layers = 0;
  for (int l = 0; l < config.model.num_layers; ++l) layers += config.model.is_moe_layer(l);
  // Each layer lives on one pipeline stage: world / pp ranks move its replicas.
  const double expected = 4.0 * floats * (1 + returns) * (config.parallel.world_size() / layout.pp) * layers;
  // The memory record holds at least the fetched weights and the gradient buffer of each layer.
  EXPECT_GE(replicated.peak_replica_bytes, 2 * 4.0 * floats * layers);
  ASSERT_EQ(replicated.replica_bytes.size(), size_t(kSteps));
  for (double bytes : replicated.replica_bytes) EXPECT_EQ(bytes, expected);
}

TEST(ReplicationEquivalenceSize2, MatchesTheUnreplicatedEp2Run) {
  test::TempDir dir;
  const Config base = base_config(test::write_synthetic_shard(dir.file("train.bin"), 64, 20000));
  const Config replicated = with_layout(base, {.ep = 2, .redundant = 2});
  const Config plain = with_layout(base, {.ep = 2, .redundant = 0});
  auto pc = make_parallel_context(MpiCommunicator::world(CommOptions{.timeout_seconds = 300}), plain.parallel, 0);
  test::EquivalenceRun r;
  r.rank = pc->rank;
  Trainer reference(plain, *pc, kQuiet);
  Trainer trainer(replicated, *pc, kQuiet);
  pin_hot_expert(reference);
  pin_hot_expert(trainer);
  const bool holds_biases = pc->coord.tp == 0 && pc->coord.dp == 0 && pc->coord.ep == 0;
  test::train_lock_step(replicated, &reference, holds_biases, trainer, *pc, kSteps, r);
  test::expect_equivalent(r);
}

// A directory every rank can use: made by rank 0, its path broadcast.
class SharedDir {
 public:
  SharedDir() {
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (rank == 0) dir_ = std::make_unique<test::TempDir>("moe4d-replication-ckpt");
    std::string path = rank == 0 ? dir_->path() : std::string();
    int size = static_cast<int>(path.size());
    MPI_Bcast(&size, 1, MPI_INT, 0, MPI_COMM_WORLD);
    path.resize(size);
    MPI_Bcast(path.data(), size, MPI_CHAR, 0, MPI_COMM_WORLD);
    path_ = path;
  }
  ~SharedDir() { MPI_Barrier(MPI_COMM_WORLD); }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::unique_ptr<test::TempDir> dir_;
  std::string path_;
};

TEST(ReplicationCheckpointSize2, ResumesWithAnotherRedundantExpertCount) {
  test::TempDir dir;
  SharedDir shared;
  const Config base = base_config(test::write_synthetic_shard(dir.file("train.bin"), 64, 20000));
  constexpr int kSaveAt = 10;
  for (const auto& [first_r, second_r] : {std::pair{2, 0}, std::pair{0, 2}}) {
    Config first = with_layout(base, {.ep = 2, .redundant = first_r});
    first.checkpoint.dir = shared.file("r" + std::to_string(first_r));
    Config second = with_layout(base, {.ep = 2, .redundant = second_r});
    test::EquivalenceRun r;
    auto pc = make_parallel_context(MpiCommunicator::world(CommOptions{.timeout_seconds = 300}), first.parallel, 0);
    r.rank = pc->rank;
    if (r.rank == 0) r.reference = std::move(single_rank(first).result);
    Observed before = train(first, *pc, kSaveAt, {}, true);
    Observed after = train(second, *pc, kSteps - kSaveAt, first.checkpoint.dir);
    r.run.losses = before.result.losses;
    r.run.losses.insert(r.run.losses.end(), after.result.losses.begin(), after.result.losses.end());
    r.run.aux = before.result.aux;
    r.run.aux.insert(r.run.aux.end(), after.result.aux.begin(), after.result.aux.end());
    r.run.params = std::move(after.result.params);
    SCOPED_TRACE("redundant_experts " + std::to_string(first_r) + " -> " + std::to_string(second_r));
    test::expect_equivalent(r);
  }
}

const ReplicationLayout kTwoRanks[] = {
    {.ep = 2, .redundant = 2},
    {.ep = 2, .redundant = 4, .chunks = 2, .capacity = true, .recompute = true},
    {.ep = 2, .zero = 1, .redundant = 2, .nodes_of = 1},
};
const ReplicationLayout kFourRanks[] = {
    {.ep = 4, .redundant = 4},
    {.ep = 2, .tp = 2, .redundant = 2},
    {.ep = 2, .tp = 2, .redundant = 2, .sequence_parallel = true},
    {.ep = 2, .dp = 2, .zero = 3, .redundant = 2},
    {.ep = 2, .pp = 2, .redundant = 2},
    {.ep = 4, .redundant = 4, .nodes_of = 2},
};

auto layout_name = [](const ::testing::TestParamInfo<ReplicationLayout>& info) { return info.param.name(); };
INSTANTIATE_TEST_SUITE_P(Size2, ReplicationEquivalence, ::testing::ValuesIn(kTwoRanks), layout_name);
INSTANTIATE_TEST_SUITE_P(Size4, ReplicationEquivalence, ::testing::ValuesIn(kFourRanks), layout_name);

}  // namespace
}  // namespace moe4d
