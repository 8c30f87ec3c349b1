// Tests of config/layout_rules.h: the divisibility rules shared by the runtime's layout check and
// the planner (their messages are tested in tests/parallel and tests/plan).
#include "config/layout_rules.h"

#include <gtest/gtest.h>

#include <string>

namespace moe4d {
namespace {

ModelConfig moe_model() {
  ModelConfig m;
  m.vocab_size = 1000;
  m.hidden_size = 64;
  m.num_heads = 8;
  m.num_kv_heads = 2;
  m.num_layers = 6;
  m.ffn_hidden_size = 96;
  m.seq_length = 16;
  m.moe.num_experts = 6;
  m.moe.expert_ffn_hidden_size = 48;
  m.moe.shared_experts = 3;
  m.moe.shared_expert_ffn_hidden_size = 10;
  return m;
}

TEST(LayoutRules, TensorRulesThenExpertRule) {
  const std::vector<SplitRule> rules = split_rules(moe_model());
  ASSERT_EQ(rules.size(), 7u);
  std::string keys;
  for (const SplitRule& r : rules) keys += std::string(r.key) + "=" + std::to_string(r.value) + ";";
  EXPECT_EQ(keys,
            "num_heads=8;num_kv_heads=2;ffn_hidden_size=96;moe.expert_ffn_hidden_size=48;"
            "moe.shared_experts x moe.shared_expert_ffn_hidden_size=30;vocab_size=1000;num_experts=6;");
  for (size_t i = 0; i + 1 < rules.size(); ++i) EXPECT_EQ(rules[i].by, SplitRule::kTensor);
  EXPECT_EQ(rules.back().by, SplitRule::kExpert);
}

TEST(LayoutRules, DenseModelHasNoExpertRules) {
  ModelConfig m = moe_model();
  m.moe = MoeConfig{};
  m.num_kv_heads = 0;
  const std::vector<SplitRule> rules = split_rules(m);
  ASSERT_EQ(rules.size(), 4u);  // heads, KV heads (= heads), ffn, vocab
  EXPECT_EQ(rules[1].value, 8);
  for (const SplitRule& r : rules) EXPECT_EQ(r.by, SplitRule::kTensor);
}

TEST(LayoutRules, InterleavedFit) {
  EXPECT_TRUE(interleaved_fit(8, 2, 2, 4).fits());
  EXPECT_TRUE(interleaved_fit(8, 1, 2, 4).few_stages);
  EXPECT_TRUE(interleaved_fit(8, 2, 1, 4).few_chunks);
  EXPECT_TRUE(interleaved_fit(6, 2, 2, 4).layers_uneven);
  EXPECT_FALSE(interleaved_fit(6, 2, 2, 4).micro_batches_uneven);
  EXPECT_TRUE(interleaved_fit(8, 2, 2, 3).micro_batches_uneven);
}

TEST(LayoutRules, ReplicationFit) {
  const ModelConfig m = moe_model();  // 6 experts
  EXPECT_FALSE(replication_fit(m, 1, 0).needs_two_ranks);
  EXPECT_TRUE(replication_fit(m, 1, 2).needs_two_ranks);
  EXPECT_TRUE(replication_fit(m, 2, 3).uneven);
  const ReplicationFit fit = replication_fit(m, 2, 8);  // at most 6 x (2 - 1)
  EXPECT_FALSE(fit.uneven);
  EXPECT_TRUE(fit.too_many);
  EXPECT_EQ(fit.most, 6);
  EXPECT_FALSE(replication_fit(m, 3, 6).too_many);
}

}  // namespace
}  // namespace moe4d
