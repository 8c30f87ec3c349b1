// Sequence parallelism (parallel_config.sequence_parallel, model/sequence_shard.h) reproduces the
// single-rank run: with TP 2 and 4, alone and with EP, PP (1F1B and interleaved), ZeRO 1 and 3,
// full and selective recompute, tied and untied embeddings (docs/model.md §3); its MoE layers,
// routing each TP rank's sequence shard, make the TP run's routing decisions, drops and losses. And
// it does shard: the measured activation bytes per rank drop against the same layout without it.
//
// Launched through mpirun; suite SizeN holds the layouts of N ranks. The comparison itself is
// tests/common/equivalence_harness.h (each of 20 steps from the same weights: loss, aux loss and
// gradient norm 1e-5 relative, parameters 1e-4).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "../common/equivalence_harness.h"
#include "../train/train_fixture.h"
#include "comm/mpi/mpi_communicator.h"
#include "plan/layout.h"
#include "plan/memory_model.h"
#include "plan/model_source.h"
#include "train/trainer.h"

namespace moe4d {
namespace {

using S = PipelineSchedule;
using R = RecomputeGranularity;

struct SpLayout {
  int dp = 1, ep = 1, tp = 2, pp = 1;
  S schedule = S::k1F1B;
  int virtual_pipeline = 1;
  int zero = 0;
  R recompute = R::kNone;
  bool tied = false;
  int layers = 2;
  int micro_batches = 2;
  // Mixtral / DeepSeek-style options: GQA, narrow and shared experts, sigmoid routing with the
  // selection bias, a capacity factor that drops slots, a stronger aux loss.
  bool options = false;
  std::string name() const {
    std::string n = fmt::format("dp{}_ep{}_tp{}_pp{}", dp, ep, tp, pp);
    if (schedule == S::kInterleaved) n += fmt::format("_interleaved_v{}", virtual_pipeline);
    if (recompute == R::kFull) n += "_recompute_full";
    if (recompute == R::kSelective) n += "_recompute_selective";
    if (zero > 0) n += fmt::format("_zero{}", zero);
    if (tied) n += "_tied";
    if (options) n += "_gqa_shared_sigmoid_capacity";
    return n;
  }
};

Config layout_config(const SpLayout& layout, const std::string& shard) {
  Config config = test::tiny_training_config(shard);
  config.model.num_layers = layout.layers;  // layer_freq 2: odd layers are MoE
  config.model.tie_embeddings = layout.tied;
  if (layout.options) {
    ModelConfig& m = config.model;
    m.num_kv_heads = std::max(2, layout.tp);  // GQA where TP allows it: TP divides the KV heads
    m.moe.layer_freq = 1;
    m.moe.expert_ffn_hidden_size = 16;
    m.moe.shared_experts = 2;
    m.moe.shared_expert_ffn_hidden_size = 8;
    m.moe.score_function = RouterScore::kSigmoid;
    m.moe.router_bias_update_rate = 0.002;
    m.moe.capacity_factor = 1.0;
    m.moe.aux_loss_coeff = 0.02;
  }
  ParallelConfig& p = config.parallel;
  p.data_parallel = layout.dp;
  p.expert_parallel = layout.ep;
  p.tensor_parallel = layout.tp;
  p.pipeline_parallel = layout.pp;
  p.pipeline_schedule = layout.schedule;
  p.virtual_pipeline = layout.virtual_pipeline;
  p.micro_batch_num = layout.micro_batches;
  // With capacity dropping, router weights that tie exactly are dropped by position (the later slot
  // first), and exact ties come from identical rows: a sequence that starts with a repeated token
  // ("a a ...": the first rows attend to identical keys and values) or two sequences of a
  // micro-batch that start with the same token. Under sequence parallelism such rows meet in one
  // rank's shard, where the GEMMs run on fewer rows and can round them 1 ulp apart, so the tie breaks
  // the other way (seen on an AVX2 EPYC: expert weights 2.4e-4 apart after 20 steps). These layouts
  // train on a shard where no token follows itself, one sequence per micro-batch, so that every drop
  // they compare is decided by a real difference in router weights.
  if (layout.options) p.micro_batch_num = int(config.train.global_batch_size / (layout.dp * layout.ep));
  p.recompute = layout.recompute;
  p.zero_stage = layout.zero;
  p.sequence_parallel = true;
  p.collective_timeout = 120;
  return config;
}

class SequenceParallelEquivalence : public ::testing::TestWithParam<SpLayout> {};

TEST_P(SequenceParallelEquivalence, ReproducesSingleRankRun) {
  test::TempDir dir;
  const Config config = layout_config(
      GetParam(), test::write_synthetic_shard(dir.file("train.bin"), 64, 20000, 5, /*no_repeats=*/GetParam().options));
  test::expect_equivalent(test::run_equivalence(config, 20));
}

const SpLayout kTwoRanks[] = {
    {},
    {.recompute = R::kFull},
    {.recompute = R::kSelective, .tied = true},
    {.options = true},
};
const SpLayout kFourRanks[] = {
    {.tp = 4},
    {.tp = 4, .recompute = R::kSelective, .tied = true},
    {.ep = 2},
    {.pp = 2, .tied = true},
    {.pp = 2, .schedule = S::kInterleaved, .virtual_pipeline = 2, .recompute = R::kFull, .layers = 4},
    {.dp = 2, .zero = 1},
    {.dp = 2, .zero = 2, .recompute = R::kFull},
    {.dp = 2, .zero = 3, .recompute = R::kSelective, .tied = true},
    {.tp = 4, .options = true},
    {.ep = 2, .options = true},
};
const SpLayout kEightRanks[] = {
    {.ep = 2, .tp = 4},
    {.ep = 2, .pp = 2, .schedule = S::kInterleaved, .virtual_pipeline = 2, .zero = 3, .layers = 4},
};

auto layout_name = [](const ::testing::TestParamInfo<SpLayout>& info) { return info.param.name(); };
INSTANTIATE_TEST_SUITE_P(Size2, SequenceParallelEquivalence, ::testing::ValuesIn(kTwoRanks), layout_name);
INSTANTIATE_TEST_SUITE_P(Size4, SequenceParallelEquivalence, ::testing::ValuesIn(kFourRanks), layout_name);
INSTANTIATE_TEST_SUITE_P(Size8, SequenceParallelEquivalence, ::testing::ValuesIn(kEightRanks), layout_name);

// Each TP rank routes only its sequence shard (model/moe_block.h), yet the routing is the TP run's
// without sequence parallelism, step by step: the same tokens per expert (so the same aux-loss-free
// bias updates), the same capacity drops, the same aux and z losses, and the same router weights
// after training (their gradient, from the shards' aux, z-loss and gate-weight terms summed over TP).
void expect_routing_of_tensor_parallel_run(int tp) {
  test::TempDir dir;
  Config config = layout_config({.tp = tp, .layers = 2, .options = true},
                                test::write_synthetic_shard(dir.file("train.bin"), 64, 20000, 5, /*no_repeats=*/true));
  auto world = MpiCommunicator::world(CommOptions{.timeout_seconds = 120});
  ASSERT_EQ(world->size(), tp);
  auto pc = make_parallel_context(std::move(world), config.parallel, 0);
  struct Run {
    std::vector<nlohmann::json> moe;
    std::vector<double> losses;
    std::map<std::string, FullTensor> params;
  };
  auto run = [&](bool sequence_parallel) {
    Config c = config;
    c.parallel.sequence_parallel = sequence_parallel;
    Trainer trainer(c, *pc, {.quiet = true, .metrics_path = "/dev/null"});
    Run out;
    for (int i = 0; i < 6; ++i) {
      const StepResult r = trainer.train_step();
      out.moe.push_back(r.record["moe"]);
      out.losses.push_back(r.loss);
    }
    out.params = trainer.gather_parameters();
    return out;
  };
  const Run without = run(false), with = run(true);
  double dropped = 0;
  for (size_t step = 0; step < without.moe.size(); ++step) {
    const nlohmann::json &a = without.moe[step], &b = with.moe[step];
    SCOPED_TRACE(fmt::format("step {}", step));
    for (size_t l = 0; l < a["layers"].size(); ++l)
      EXPECT_EQ(a["layers"][l]["tokens_per_expert"], b["layers"][l]["tokens_per_expert"]) << "layer " << l;
    EXPECT_EQ(a["dropped_slots"], b["dropped_slots"]);
    EXPECT_NEAR(b["aux_loss"].get<double>(), a["aux_loss"].get<double>(), 1e-6 * a["aux_loss"].get<double>());
    EXPECT_NEAR(b["z_loss"].get<double>(), a["z_loss"].get<double>(), 1e-6 * a["z_loss"].get<double>());
    EXPECT_NEAR(with.losses[step], without.losses[step], 1e-6 * without.losses[step]);
    dropped += a["dropped_slots"].get<double>();
  }
  EXPECT_GT(dropped, 0) << "the capacity factor should drop slots in this test";
  if (pc->rank != 0) return;  // the gathered parameters are on world rank 0
  int routers = 0;
  for (const auto& [name, tensor] : without.params) {
    if (name.find("router") == std::string::npos) continue;
    ++routers;
    const FullTensor& other = with.params.at(name);
    ASSERT_EQ(tensor.data.bytes(), other.data.bytes()) << name;
    double worst = 0;
    for (size_t i = 0; i < tensor.data.bytes() / sizeof(float); ++i)
      worst = std::max(worst, std::fabs(double(tensor.data.f32()[i]) - other.data.f32()[i]));
    EXPECT_LT(worst, 1e-5) << name;
  }
  EXPECT_EQ(routers, config.model.num_layers);
}

TEST(SequenceParallelRouting, Size2ShardRoutingIsTheTensorParallelRuns) { expect_routing_of_tensor_parallel_run(2); }
TEST(SequenceParallelRouting, Size4ShardRoutingIsTheTensorParallelRuns) { expect_routing_of_tensor_parallel_run(4); }

// Sequence parallelism keeps 1/tp of the residual stream, norms and block inputs: the activation
// bytes each rank measures (saved for backward, and the pipeline's messages) drop against the same
// TP layout without it, by at least 0.8 x (1 - 1/tp) of what the layout without it keeps outside
// the TP regions, and the TP run's other activations (attention, FFN) are unchanged.
TEST(SequenceParallelMemory, Size2ShardsTheActivationsOutsideTensorParallelRegions) {
  auto world = MpiCommunicator::world(CommOptions{.timeout_seconds = 120});
  ASSERT_EQ(world->size(), 2);
  test::TempDir dir;
  Config config = layout_config({}, test::write_synthetic_shard(dir.file("train.bin"), 64, 20000));
  config.parallel.pipeline_parallel = 1;
  auto pc = make_parallel_context(std::move(world), config.parallel, 0);
  // Saved activations of the step (the pipeline record; scratch temporaries are not counted there).
  auto peak = [&](bool sequence_parallel) {
    Config c = config;
    c.parallel.sequence_parallel = sequence_parallel;
    Trainer trainer(c, *pc, {.quiet = true, .metrics_path = "/dev/null"});
    StepResult r;
    for (int i = 0; i < 2; ++i) r = trainer.train_step();
    EXPECT_EQ(r.record["memory"]["sequence_parallel"], sequence_parallel);
    return r.record["pipeline"]["peak_activation_bytes"][0].get<double>();
  };
  const double without = peak(false), with = peak(true);
  EXPECT_LT(with, without);
  // What the tiny model keeps per micro-batch outside the TP regions without SP, per layer: the layer
  // input and the residual between its two blocks, two norm outputs (T x d each) and two rstd
  // vectors; plus the chunk output, the final norm's output and rstd. SP keeps 1/2 of each.
  const ModelConfig& m = config.model;
  const double T = double(config.train.global_batch_size) / config.parallel.micro_batch_num * m.seq_length;
  const double d = m.hidden_size;
  const double outside = 4.0 * (m.num_layers * (4 * T * d + 2 * T) + 2 * T * d + T);
  EXPECT_GE(without - with, 0.8 * 0.5 * outside) << "without " << without << " with " << with;
}

// The planner's activation model (plan/memory_model.h) against the saved activations the runtime
// measures, per pipeline stage, with and without sequence parallelism, for four TP layouts of 4
// ranks, selective recompute on TP 4 and PP 2, and full recompute on all four (fp32, as the run).
// Under full recompute the runtime's own terms (plan::runtime_stage_bytes: each chunk's output per
// micro-batch in flight, the residual gradient in backward) are most of what is kept.
TEST(SequenceParallelMemory, Size4PlannerPredictsTheMeasuredActivations) {
  test::TempDir dir;
  const std::string shard = test::write_synthetic_shard(dir.file("train.bin"), 64, 20000);
  const SpLayout layouts[] = {{.tp = 4},
                              {.dp = 2},
                              {.pp = 2},
                              {.ep = 2},
                              {.tp = 4, .recompute = R::kSelective},
                              {.pp = 2, .recompute = R::kSelective},
                              {.tp = 4, .recompute = R::kFull},
                              {.dp = 2, .recompute = R::kFull},
                              {.pp = 2, .recompute = R::kFull},
                              {.ep = 2, .recompute = R::kFull}};
  for (const SpLayout& layout : layouts)
    for (const bool sp : {false, true}) {
      Config config = layout_config(layout, shard);
      config.model.num_layers = 4;
      config.model.seq_length = 32;
      config.parallel.sequence_parallel = sp;
      auto world = MpiCommunicator::world(CommOptions{.timeout_seconds = 120});
      ASSERT_EQ(world->size(), 4);
      auto pc = make_parallel_context(std::move(world), config.parallel, 0);
      Trainer trainer(config, *pc, {.quiet = true, .metrics_path = "/dev/null"});
      StepResult r;
      for (int i = 0; i < 2; ++i) r = trainer.train_step();
      const Layout planned = layout_from_parallel_config(config.parallel, config.train.global_batch_size, 4);
      const TrainingSetup setup = setup_from_config(config);
      ClusterSpec cluster;
      cluster.memory_reserve_fraction = 0;
      for (int s = 0; s < planned.pp; ++s) {
        const double predicted =
            stage_memory(config.model, setup, planned, cluster, s, stage_params(config.model, planned, s)).activations;
        const double measured = r.record["pipeline"]["peak_activation_bytes"][s].get<double>();
        EXPECT_NEAR(measured / predicted, 1.0, 0.10) << layout.name() << (sp ? " sp" : "") << " stage " << s
                                                    << ": measured " << measured << ", planned " << predicted;
      }
    }
}

}  // namespace
}  // namespace moe4d
