// Multi-head latent attention (model/mla_block.h) in every parallel dimension against the
// single-rank run (docs/model.md §3: each of 20 steps from the same weights, loss, aux loss and
// gradient norm within 1e-5 relative, parameters within 1e-4): TP over heads with its replicated
// down-projections and latent norms, with and without sequence parallelism, PP, DP, EP, ZeRO-3 and
// recompute, on a DeepSeek-V3-style tiny model (query compression, YaRN with mscale_all_dim, a
// dense first layer, a shared expert, sigmoid routing). Launched through mpirun; suite SizeN holds
// the layouts of N ranks.
#include <gtest/gtest.h>

#include "../common/equivalence_harness.h"
#include "../train/train_fixture.h"
#include "train/trainer.h"

namespace moe4d {
namespace {

using R = RecomputeGranularity;

struct Layout {
  int dp = 1, ep = 1, tp = 1, pp = 1;
  bool sp = false;
  int zero = 0;
  R recompute = R::kNone;
  std::string name() const {
    std::string n = fmt::format("dp{}_ep{}_tp{}_pp{}", dp, ep, tp, pp);
    if (sp) n += "_sp";
    if (zero > 0) n += fmt::format("_zero{}", zero);
    if (recompute == R::kFull) n += "_recompute_full";
    if (recompute == R::kSelective) n += "_recompute_selective";
    return n;
  }
};

class MlaEquivalence : public ::testing::TestWithParam<Layout> {};

TEST_P(MlaEquivalence, ReproducesSingleRankRun) {
  const Layout l = GetParam();
  test::TempDir dir;
  Config c = test::tiny_training_config(test::write_synthetic_shard(dir.file("train.bin"), 64, 20000));
  ModelConfig& m = c.model;
  m.mla = {.q_lora_rank = 12, .kv_lora_rank = 8, .qk_nope_head_dim = 4, .qk_rope_head_dim = 4, .v_head_dim = 6};
  m.rope_scaling = {.factor = 2, .original_max_position_embeddings = 8, .mscale = 1, .mscale_all_dim = 1};
  m.moe.layer_freq = 1;
  m.moe.first_dense_layers = 1;
  m.moe.shared_experts = 1;
  m.moe.score_function = RouterScore::kSigmoid;
  ParallelConfig& p = c.parallel;
  p.data_parallel = l.dp;
  p.expert_parallel = l.ep;
  p.tensor_parallel = l.tp;
  p.pipeline_parallel = l.pp;
  p.sequence_parallel = l.sp;
  p.zero_stage = l.zero;
  p.recompute = l.recompute;
  p.collective_timeout = 120;
  test::expect_equivalent(test::run_equivalence(c, 20));
}

const Layout kTwoRanks[] = {
    {.tp = 2, .sp = true},
    {.tp = 2, .recompute = R::kSelective},
    {.pp = 2},
    {.dp = 2},
    {.ep = 2},
};
const Layout kFourRanks[] = {
    {.dp = 2, .tp = 2, .sp = true, .zero = 3, .recompute = R::kFull},
};
const Layout kEightRanks[] = {
    {.dp = 2, .ep = 2, .tp = 2, .sp = true, .zero = 3},
    {.ep = 2, .tp = 2, .pp = 2, .sp = true},
};

auto layout_name = [](const ::testing::TestParamInfo<Layout>& info) { return info.param.name(); };
INSTANTIATE_TEST_SUITE_P(Size2, MlaEquivalence, ::testing::ValuesIn(kTwoRanks), layout_name);
INSTANTIATE_TEST_SUITE_P(Size4, MlaEquivalence, ::testing::ValuesIn(kFourRanks), layout_name);
INSTANTIATE_TEST_SUITE_P(Size8, MlaEquivalence, ::testing::ValuesIn(kEightRanks), layout_name);

}  // namespace
}  // namespace moe4d
