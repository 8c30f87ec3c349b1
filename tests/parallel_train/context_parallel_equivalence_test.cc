// Context parallelism (parallel_config.context_parallel, model/context_parallel.h) reproduces the
// single-rank run: CP 2 and 4 alone, and CP 2 with EP, TP + sequence parallelism, PP (1F1B and
// interleaved), ZeRO 1 and 3, full and selective recompute, tied embeddings, and the Mixtral /
// DeepSeek-style options (GQA, shared experts, sigmoid routing with the selection bias): the CP
// ranks of a dense replica read the same sequences, each keeps chunks i and 2 CP - 1 - i of every
// one, attention all-gathers K/V over the CP group, the loss and the MoE aux and z losses are the
// unsplit sequences', and the dense gradients are reduced over DP_dense x CP.
//
// Launched through mpirun; suite SizeN holds the layouts of N ranks. The comparison itself is
// tests/common/equivalence_harness.h (each of 20 steps from the same weights: loss, aux loss and
// gradient norm 1e-5 relative, parameters 1e-4).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "../common/equivalence_harness.h"
#include "../train/train_fixture.h"
#include "comm/mpi/mpi_communicator.h"
#include "model/context_parallel.h"
#include "plan/layout.h"
#include "plan/memory_model.h"
#include "plan/model_source.h"
#include "train/trainer.h"

namespace moe4d {
namespace {

using S = PipelineSchedule;
using R = RecomputeGranularity;

struct CpLayout {
  int dp = 2, ep = 1, tp = 1, pp = 1, cp = 2;
  S schedule = S::k1F1B;
  int virtual_pipeline = 1;
  int zero = 0;
  R recompute = R::kNone;
  bool sequence_parallel = false;
  bool tied = false;
  int layers = 2;
  // GQA (2 KV heads of 4), one MoE layer per layer, narrow and shared experts, sigmoid routing with
  // the aux-loss-free selection bias and a stronger aux loss; dropless (a capacity counts a rank's
  // own tokens, as Megatron's, so drops are not the unsplit sequence's).
  bool options = false;
  std::string name() const {
    std::string n = fmt::format("dp{}_ep{}_tp{}_pp{}_cp{}", dp, ep, tp, pp, cp);
    if (schedule == S::kInterleaved) n += fmt::format("_interleaved_v{}", virtual_pipeline);
    if (sequence_parallel) n += "_sp";
    if (recompute == R::kFull) n += "_recompute_full";
    if (recompute == R::kSelective) n += "_recompute_selective";
    if (zero > 0) n += fmt::format("_zero{}", zero);
    if (tied) n += "_tied";
    if (options) n += "_gqa_shared_sigmoid";
    return n;
  }
};

Config layout_config(const CpLayout& layout, const std::string& shard) {
  Config config = test::tiny_training_config(shard);  // seq_length 16, global batch 8
  config.model.num_layers = layout.layers;
  config.model.tie_embeddings = layout.tied;
  if (layout.options) {
    ModelConfig& m = config.model;
    m.num_kv_heads = 2;
    m.moe.layer_freq = 1;
    m.moe.expert_ffn_hidden_size = 16;
    m.moe.shared_experts = 2;
    m.moe.shared_expert_ffn_hidden_size = 8;
    m.moe.score_function = RouterScore::kSigmoid;
    m.moe.router_bias_update_rate = 0.002;
    m.moe.aux_loss_coeff = 0.02;
  }
  ParallelConfig& p = config.parallel;
  p.data_parallel = layout.dp;
  p.expert_parallel = layout.ep;
  p.tensor_parallel = layout.tp;
  p.pipeline_parallel = layout.pp;
  p.context_parallel = layout.cp;
  p.pipeline_schedule = layout.schedule;
  p.virtual_pipeline = layout.virtual_pipeline;
  p.micro_batch_num = 2;
  p.recompute = layout.recompute;
  p.zero_stage = layout.zero;
  p.sequence_parallel = layout.sequence_parallel;
  p.collective_timeout = 120;
  return config;
}

class ContextParallelEquivalence : public ::testing::TestWithParam<CpLayout> {};

TEST_P(ContextParallelEquivalence, ReproducesSingleRankRun) {
  test::TempDir dir;
  const Config config = layout_config(GetParam(), test::write_synthetic_shard(dir.file("train.bin"), 64, 20000));
  test::expect_equivalent(test::run_equivalence(config, 20));
}

const CpLayout kTwoRanks[] = {
    {},
    {.recompute = R::kFull},
    {.recompute = R::kSelective, .tied = true},
    {.zero = 1},
    {.zero = 3, .recompute = R::kSelective},
    {.dp = 1, .ep = 2, .options = true},
};
const CpLayout kFourRanks[] = {
    {.dp = 4, .cp = 4},
    {.dp = 2, .ep = 2, .cp = 4, .options = true},
    {.dp = 2, .ep = 2},
    {.tp = 2, .sequence_parallel = true},
    {.tp = 2, .sequence_parallel = true, .options = true},
    {.pp = 2, .tied = true},
    {.pp = 2, .schedule = S::kInterleaved, .virtual_pipeline = 2, .recompute = R::kFull, .layers = 4},
};

auto layout_name = [](const ::testing::TestParamInfo<CpLayout>& info) { return info.param.name(); };
INSTANTIATE_TEST_SUITE_P(Size2, ContextParallelEquivalence, ::testing::ValuesIn(kTwoRanks), layout_name);
INSTANTIATE_TEST_SUITE_P(Size4, ContextParallelEquivalence, ::testing::ValuesIn(kFourRanks), layout_name);

// Evaluation (Trainer::evaluate, `moe4d eval`) under context parallelism: the CP ranks of a dense
// replica read the same validation windows and their token means average to the unsplit loss.
TEST(ContextParallelEvaluation, Size2ValidationLossIsTheSingleRankRuns) {
  test::TempDir dir;
  Config config = layout_config({}, test::write_synthetic_shard(dir.file("train.bin"), 64, 20000));
  config.data.valid = config.data.train;
  config.train.eval_batches = 2;
  auto world = MpiCommunicator::world(CommOptions{.timeout_seconds = 120});
  ASSERT_EQ(world->size(), 2);
  test::EquivalenceRun out;
  out.rank = world->rank();
  Config single = config;
  single.parallel = ParallelConfig{};
  single.parallel.micro_batch_num = config.parallel.micro_batch_num * config.parallel.dense_replicas();
  std::unique_ptr<ParallelContext> local;
  std::unique_ptr<Trainer> reference;
  if (out.rank == 0) {
    local = make_single_rank_context();
    reference = std::make_unique<Trainer>(single, *local, TrainerOptions{.quiet = true, .metrics_path = "/dev/null"});
  }
  auto pc = make_parallel_context(std::move(world), config.parallel, 0);
  Trainer run(config, *pc, {.quiet = true, .metrics_path = "/dev/null"});
  test::train_lock_step(config, reference.get(), out.rank == 0, run, *pc, 2, out);  // run takes the reference's state
  const double mine = run.evaluate();
  if (out.rank != 0) return;
  const double expected = reference->evaluate();
  ASSERT_TRUE(std::isfinite(expected));
  EXPECT_NEAR(mine, expected, 1e-5 * expected);
}

// The chunk layout: CP rank i holds chunks i and 2 CP - 1 - i of every sequence, in that order, so
// the CP ranks' rows together are every position exactly once.
TEST(ContextParallelChunks, Size2RanksHoldChunksIAndTwoCpMinusOneMinusI) {
  const int seq = 16, cp = 4, batch = 2;
  std::vector<int> seen(seq, 0);
  for (int rank = 0; rank < cp; ++rank) {
    std::vector<int> tokens(size_t(batch) * seq);
    std::iota(tokens.begin(), tokens.end(), 0);  // sequence b holds b * seq + position
    cp_keep_local_tokens(tokens.data(), batch, seq, cp, rank);
    for (int b = 0; b < batch; ++b)
      for (int i = 0; i < seq / cp; ++i) {
        const int position = cp_position(i, seq, cp, rank);
        EXPECT_EQ(tokens[size_t(b) * (seq / cp) + i], b * seq + position) << "rank " << rank << " row " << i;
        if (b == 0) ++seen[position];
      }
  }
  EXPECT_EQ(std::count(seen.begin(), seen.end(), 1), seq);
  EXPECT_EQ(cp_position(0, seq, cp, 1), 2);   // chunk 1: positions 2, 3
  EXPECT_EQ(cp_position(2, seq, cp, 1), 12);  // chunk 6: positions 12, 13
  std::vector<int> one = {5, 6, 7, 8};
  cp_keep_local_tokens(one.data(), 1, 4, 1, 0);
  EXPECT_EQ(one, (std::vector<int>{5, 6, 7, 8}));
}

// The planner's activation model (plan/memory_model.h) against the saved activations the runtime
// measures per pipeline stage, for CP layouts of 4 ranks (fp32, as the run): the per-token terms
// shrink by CP, attention's q/k/v and probabilities stay whole-sequence (the all-gather form).
TEST(ContextParallelMemory, Size4PlannerPredictsTheMeasuredActivations) {
  test::TempDir dir;
  const std::string shard = test::write_synthetic_shard(dir.file("train.bin"), 64, 20000);
  const CpLayout layouts[] = {{.dp = 4},
                              {.dp = 4, .cp = 4},
                              {.tp = 2, .sequence_parallel = true},
                              {.pp = 2},
                              {.dp = 4, .cp = 4, .recompute = R::kSelective},
                              {.dp = 4, .cp = 4, .recompute = R::kFull}};
  for (const CpLayout& layout : layouts) {
    Config config = layout_config(layout, shard);
    config.model.num_layers = 4;
    config.model.seq_length = 64;
    auto world = MpiCommunicator::world(CommOptions{.timeout_seconds = 120});
    ASSERT_EQ(world->size(), 4);
    auto pc = make_parallel_context(std::move(world), config.parallel, 0);
    Trainer trainer(config, *pc, {.quiet = true, .metrics_path = "/dev/null"});
    StepResult r;
    for (int i = 0; i < 2; ++i) r = trainer.train_step();
    const Layout planned = layout_from_parallel_config(config.parallel, config.train.global_batch_size, 4);
    ASSERT_EQ(planned.cp, layout.cp);
    const TrainingSetup setup = setup_from_config(config);
    ClusterSpec cluster;
    cluster.memory_reserve_fraction = 0;
    for (int s = 0; s < planned.pp; ++s) {
      const double predicted =
          stage_memory(config.model, setup, planned, cluster, s, stage_params(config.model, planned, s)).activations;
      const double measured = r.record["pipeline"]["peak_activation_bytes"][s].get<double>();
      EXPECT_NEAR(measured / predicted, 1.0, 0.10) << layout.name() << " stage " << s << ": measured " << measured
                                                  << ", planned " << predicted;
    }
  }
}

}  // namespace
}  // namespace moe4d
