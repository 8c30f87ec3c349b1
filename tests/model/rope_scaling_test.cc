// YaRN RoPE frequencies and MLA's softmax scale (model/rope_scaling.h) against values worked out
// independently from the YaRN paper's formulas with DeepSeek-V3's settings (qk_rope_head_dim 64,
// rope_theta 10000, factor 40 over 4096 positions, beta 32 / 1, mscale = mscale_all_dim = 1): the
// correction range is pairs 10 .. 23, below it the original frequencies, above it divided by 40.
#include <gtest/gtest.h>

#include <cmath>

#include "model/rope_scaling.h"

namespace moe4d {
namespace {

ModelConfig deepseek_v3_attention() {
  ModelConfig m;
  m.hidden_size = 7168;
  m.num_heads = 128;
  m.seq_length = 64;
  m.mla = {.q_lora_rank = 1536, .kv_lora_rank = 512, .qk_nope_head_dim = 128, .qk_rope_head_dim = 64,
           .v_head_dim = 128};
  m.rope_scaling = {.factor = 40, .original_max_position_embeddings = 4096, .beta_fast = 32, .beta_slow = 1,
                    .mscale = 1, .mscale_all_dim = 1};
  return m;
}

TEST(RopeScaling, YarnFrequenciesOfDeepSeekV3) {
  const ModelConfig m = deepseek_v3_attention();
  const YarnFrequencies y = yarn_frequencies(m, rope_dim(m));
  ASSERT_EQ(y.inv_freq.size(), 32u);
  const std::pair<int, double> expected[] = {{0, 1.0},
                                             {5, 0.23713736133077676},
                                             {10, 0.056234129824763876},
                                             {11, 0.039006925857898146},
                                             {15, 0.008334509273718533},
                                             {20, 0.0007905694483703238},
                                             {23, 3.333803505979481e-05},
                                             {24, 2.5e-05},
                                             {31, 3.333803668785824e-06}};
  for (const auto& [i, want] : expected) EXPECT_NEAR(y.inv_freq[i], want, 1e-6 * want) << "pair " << i;
  EXPECT_DOUBLE_EQ(y.attention_factor, 1.0);  // mscale / mscale_all_dim
  const double mscale = 0.1 * std::log(40.0) + 1.0;
  EXPECT_NEAR(mla_softmax_scale(m), mscale * mscale / std::sqrt(192.0), 1e-12);
  EXPECT_NEAR(mla_softmax_scale(m), 0.1352337788608801, 1e-12);
}

TEST(RopeScaling, TableTurnsByTheScaledFrequencies) {
  ModelConfig m = deepseek_v3_attention();
  m.rope_scaling.mscale_all_dim = 0;  // attention factor mscale(40) on cos and sin
  const RopeTable table = make_rope_table(m);
  ASSERT_EQ(table.head_dim, 64);
  const double factor = 0.1 * std::log(40.0) + 1.0;
  const YarnFrequencies y = yarn_frequencies(m, 64);
  EXPECT_DOUBLE_EQ(y.attention_factor, factor);
  for (int p : {1, 17, 63})
    for (int i : {0, 12, 31}) {
      EXPECT_NEAR(table.cos[p * 32 + i], std::cos(p * y.inv_freq[i]) * factor, 1e-6);
      EXPECT_NEAR(table.sin[p * 32 + i], std::sin(p * y.inv_freq[i]) * factor, 1e-6);
    }
  EXPECT_DOUBLE_EQ(mla_softmax_scale(m), 1.0 / std::sqrt(192.0));  // no mscale_all_dim: plain scale
  m.rope_scaling = {};
  EXPECT_EQ(make_rope_table(m).cos, RopeTable(64, 64, 10000.0f).cos);  // unscaled: the plain table
}

}  // namespace
}  // namespace moe4d
