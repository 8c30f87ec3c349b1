// The model options of Mixtral / DeepSeek / Qwen3-style models (grouped-query attention, rope_theta,
// norm_eps, narrow routed experts, shared experts, leading dense layers, sigmoid routing with and
// without renormalised weights, q/k RMSNorm with an explicit head_dim, dense_layers) reproduce the single-rank run in every parallel dimension: DP2, TP2,
// EP2, PP2 and 8-rank 3-D layouts (docs/model.md §3: each of 20 steps from the same weights, loss,
// aux loss and gradient norm within 1e-5 relative, parameters within 1e-4). Launched through mpirun;
// suite SizeN holds the layouts of N ranks.
#include <gtest/gtest.h>

#include "../common/equivalence_harness.h"
#include "../train/train_fixture.h"
#include "train/trainer.h"

namespace moe4d {
namespace {

// Which set of options a run uses (both on the tiny 2-layer fixture model, 4 experts top-2).
enum class Options {
  // GQA (4 query heads on 2 KV heads), theta 1e6, eps 1e-6, experts of 16 next to a dense 48, two
  // shared experts of 8, layer 0 dense by first_dense_layers, sigmoid scores renormalised.
  kDeepSeekLike,
  // GQA on 2 KV heads, softmax scores without renormalised weights, one shared expert of the routed
  // width, layer_freq 2 (layer 1 MoE): the other side of each switch.
  kQwenLike,
  // Qwen3-MoE: per-head q/k RMSNorm, head_dim 12 (4 heads x 12 = 48 != hidden 32), GQA on 2 KV
  // heads, fine-grained experts of 16, layer 0 kept dense by moe.dense_layers (mlp_only_layers).
  kQwen3,
};

struct Case {
  Options options;
  int dp = 1, ep = 1, tp = 1, pp = 1;
  bool sp = false;  // sequence parallelism (with tp > 1)
  int zero = 0;
  bool recompute = false;  // full recompute
  std::string name() const {
    const char* names[] = {"deepseek_like", "qwen_like", "qwen3"};
    return fmt::format("{}_dp{}_ep{}_tp{}_pp{}{}{}{}", names[int(options)], dp, ep, tp, pp, sp ? "_sp" : "",
                       zero ? fmt::format("_zero{}", zero) : "", recompute ? "_recompute" : "");
  }
};

Config options_config(Options options, const std::string& shard) {
  Config c = test::tiny_training_config(shard);
  ModelConfig& m = c.model;
  m.num_heads = 4;
  m.num_kv_heads = 2;
  if (options == Options::kDeepSeekLike) {
    m.rope_theta = 1e6;
    m.norm_eps = 1e-6;
    m.moe.layer_freq = 1;
    m.moe.first_dense_layers = 1;
    m.moe.expert_ffn_hidden_size = 16;
    m.moe.shared_experts = 2;
    m.moe.shared_expert_ffn_hidden_size = 8;
    m.moe.score_function = RouterScore::kSigmoid;
    m.moe.router_bias_update_rate = 0.002;  // the selection bias steers sigmoid top-k too
  } else if (options == Options::kQwenLike) {
    m.moe.normalize_top_k = false;
    m.moe.shared_experts = 1;
  } else {
    m.head_size = 12;
    m.qk_norm = true;
    m.rope_theta = 1e6;
    m.norm_eps = 1e-6;
    m.moe.layer_freq = 1;
    m.moe.dense_layers = {0};
    m.moe.expert_ffn_hidden_size = 16;
  }
  return c;
}

class ModelOptionsEquivalence : public ::testing::TestWithParam<Case> {};

TEST_P(ModelOptionsEquivalence, ReproducesSingleRankRun) {
  const Case c = GetParam();
  test::TempDir dir;
  Config config = options_config(c.options, test::write_synthetic_shard(dir.file("train.bin"), 64, 20000));
  ParallelConfig& p = config.parallel;
  p.data_parallel = c.dp;
  p.expert_parallel = c.ep;
  p.tensor_parallel = c.tp;
  p.pipeline_parallel = c.pp;
  p.sequence_parallel = c.sp;
  p.zero_stage = c.zero;
  if (c.recompute) p.recompute = RecomputeGranularity::kFull;
  p.collective_timeout = 120;
  test::expect_equivalent(test::run_equivalence(config, 20));
}

constexpr Options kDeepSeek = Options::kDeepSeekLike, kQwen = Options::kQwenLike, kQwen3 = Options::kQwen3;
const Case kTwoRanks[] = {
    {.options = kDeepSeek, .dp = 2}, {.options = kDeepSeek, .tp = 2}, {.options = kDeepSeek, .ep = 2},
    {.options = kDeepSeek, .pp = 2}, {.options = kQwen, .dp = 2},     {.options = kQwen, .tp = 2},
    {.options = kQwen, .ep = 2},     {.options = kQwen, .pp = 2},
    {.options = kQwen3, .dp = 2},    {.options = kQwen3, .tp = 2, .sp = true},
    {.options = kQwen3, .ep = 2},    {.options = kQwen3, .pp = 2, .recompute = true},
};
const Case kEightRanks[] = {
    {.options = kDeepSeek, .dp = 2, .ep = 2, .tp = 2},
    {.options = kDeepSeek, .ep = 2, .tp = 2, .pp = 2},
    {.options = kQwen3, .dp = 2, .ep = 2, .tp = 2, .sp = true, .zero = 3},
    {.options = kQwen3, .ep = 2, .tp = 2, .pp = 2, .sp = true, .recompute = true},
};

auto case_name = [](const ::testing::TestParamInfo<Case>& info) { return info.param.name(); };
INSTANTIATE_TEST_SUITE_P(Size2, ModelOptionsEquivalence, ::testing::ValuesIn(kTwoRanks), case_name);
INSTANTIATE_TEST_SUITE_P(Size8, ModelOptionsEquivalence, ::testing::ValuesIn(kEightRanks), case_name);

}  // namespace
}  // namespace moe4d
