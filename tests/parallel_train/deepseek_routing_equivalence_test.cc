// DeepSeek-V3-style routing and balance losses reproduce the single-rank run on up to 8 ranks:
// sigmoid scores with the selection bias, group-limited routing (num_groups / group_topk), the routed
// scaling factor, and each load-balancing statistic — the sequence-wise loss (per sequence, whatever
// the layout) and the global-batch loss (counts reduced over the data replicas) — in DP, EP, TP with
// sequence parallelism, PP and ZeRO-3 (docs/moe.md §4, §9: each of 20 steps from the same weights,
// loss, aux loss and gradient norm within 1e-5 relative, parameters within 1e-4). Suite SizeN holds
// the layouts of N ranks.
#include <gtest/gtest.h>

#include "../common/equivalence_harness.h"
#include "../train/train_fixture.h"
#include "config/config_names.h"
#include "train/trainer.h"

namespace moe4d {
namespace {

struct Case {
  LoadBalancing balancing;
  int dp = 1, ep = 1, tp = 1, pp = 1;
  int zero = 0;
  int micro_batches = 2;  // per replica
  std::string name() const {
    return fmt::format("{}_dp{}_ep{}_tp{}_pp{}_zero{}_m{}",
                       config_names::name_of(config_names::kLoadBalancingNames, balancing), dp, ep, tp, pp, zero,
                       micro_batches);
  }
};

// The tiny fixture model with 8 experts in 4 groups of 2, top-3 from the best 2 groups, sigmoid
// scores with the aux-loss-free bias, weights renormalised then scaled by 2.5, a shared expert and a
// leading dense layer.
Config deepseek_config(const Case& c, const std::string& shard) {
  Config config = test::tiny_training_config(shard);
  MoeConfig& moe = config.model.moe;
  moe.num_experts = 8;
  moe.top_k = 3;
  moe.num_groups = 4;
  moe.group_topk = 2;
  moe.routed_scaling_factor = 2.5;
  moe.score_function = RouterScore::kSigmoid;
  moe.router_bias_update_rate = 0.002;
  moe.layer_freq = 1;
  moe.first_dense_layers = 1;
  moe.expert_ffn_hidden_size = 16;
  moe.shared_experts = 1;
  moe.aux_loss_coeff = 0.05;
  moe.load_balancing_type = c.balancing;
  ParallelConfig& p = config.parallel;
  p.data_parallel = c.dp;
  p.expert_parallel = c.ep;
  p.tensor_parallel = c.tp;
  p.sequence_parallel = c.tp > 1;
  p.pipeline_parallel = c.pp;
  p.zero_stage = c.zero;
  p.micro_batch_num = c.micro_batches;
  p.collective_timeout = 120;
  return config;
}

class DeepSeekRoutingEquivalence : public ::testing::TestWithParam<Case> {};

TEST_P(DeepSeekRoutingEquivalence, ReproducesSingleRankRun) {
  const Case c = GetParam();
  test::TempDir dir;
  const Config config = deepseek_config(c, test::write_synthetic_shard(dir.file("train.bin"), 64, 20000));
  // The global-batch statistics of micro-batch j are those of the replicas' micro-batches j together
  // (and the step's earlier ones): with one micro-batch per replica the reference runs their union
  // as its one micro-batch. The other statistics are per micro-batch or sequence: the usual reference.
  const bool global = c.balancing == LoadBalancing::kGlobalAuxLoss && config.parallel.data_replicas() > 1;
  test::expect_equivalent(test::run_equivalence(config, 20, global ? c.micro_batches : 0));
}

constexpr LoadBalancing kMicro = LoadBalancing::kAuxLoss, kSeq = LoadBalancing::kSeqAuxLoss,
                        kGlobal = LoadBalancing::kGlobalAuxLoss;
const Case kTwoRanks[] = {
    {.balancing = kMicro, .ep = 2},
    {.balancing = kSeq, .dp = 2},
    {.balancing = kSeq, .ep = 2},
    {.balancing = kSeq, .tp = 2},
    {.balancing = kSeq, .pp = 2},
    {.balancing = kGlobal, .dp = 2, .micro_batches = 1},
    {.balancing = kGlobal, .ep = 2, .micro_batches = 1},
    {.balancing = kGlobal, .tp = 2},
    {.balancing = kGlobal, .pp = 2},
    {.balancing = kGlobal, .dp = 2, .zero = 3, .micro_batches = 1},
};
const Case kEightRanks[] = {
    {.balancing = kSeq, .dp = 2, .ep = 2, .tp = 2, .zero = 3},
    {.balancing = kGlobal, .dp = 2, .ep = 2, .tp = 2, .zero = 3, .micro_batches = 1},
    {.balancing = kSeq, .ep = 2, .tp = 2, .pp = 2},
    // A pipeline needs micro_batch_num >= its stages, and with data replicas the global statistics of
    // micro-batch j (the replicas' micro-batches j) are then no single-rank micro-batch's: global
    // with PP is compared without replicas.
    {.balancing = kGlobal, .tp = 4, .pp = 2},
};

auto case_name = [](const ::testing::TestParamInfo<Case>& info) { return info.param.name(); };
INSTANTIATE_TEST_SUITE_P(Size2, DeepSeekRoutingEquivalence, ::testing::ValuesIn(kTwoRanks), case_name);
INSTANTIATE_TEST_SUITE_P(Size8, DeepSeekRoutingEquivalence, ::testing::ValuesIn(kEightRanks), case_name);

}  // namespace
}  // namespace moe4d
