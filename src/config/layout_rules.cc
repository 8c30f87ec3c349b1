// config/layout_rules.cc — the divisibility rules of a parallel layout (see layout_rules.h).
#include "config/layout_rules.h"

namespace moe4d {

std::vector<SplitRule> split_rules(const ModelConfig& m) {
  std::vector<SplitRule> rules = {
      {SplitRule::kTensor, m.num_heads, "num_heads", "num_heads"},
      {SplitRule::kTensor, m.kv_heads(), "num_kv_heads", "num_kv_heads"},
      {SplitRule::kTensor, m.ffn_hidden_size, "ffn_hidden_size", "ffn_hidden_size"},
  };
  if (m.is_moe()) {
    rules.push_back({SplitRule::kTensor, m.expert_ffn(), "moe.expert_ffn_hidden_size", "expert_ffn_hidden_size"});
    if (m.shared_ffn() > 0)
      rules.push_back({SplitRule::kTensor, m.shared_ffn(), "moe.shared_experts x moe.shared_expert_ffn_hidden_size",
                       "the shared experts' width"});
  }
  rules.push_back({SplitRule::kTensor, m.vocab_size, "vocab_size", "vocab_size"});
  if (m.is_moe()) rules.push_back({SplitRule::kExpert, m.moe.num_experts, "num_experts", "num_experts"});
  return rules;
}

InterleavedFit interleaved_fit(int num_layers, int pp, int v, int micro_batch_num) {
  InterleavedFit fit;
  fit.few_stages = pp < 2;
  fit.few_chunks = v < 2;
  fit.layers_uneven = pp < 1 || v < 1 || num_layers % (pp * v) != 0;
  fit.micro_batches_uneven = pp < 1 || micro_batch_num % pp != 0;
  return fit;
}

ReplicationFit replication_fit(const ModelConfig& m, int ep, int redundant) {
  ReplicationFit fit;
  if (redundant <= 0) return fit;
  fit.needs_two_ranks = ep < 2;
  fit.uneven = ep >= 1 && redundant % ep != 0;
  fit.most = int64_t{m.moe.num_experts} * (ep - 1);
  fit.too_many = redundant > fit.most;
  return fit;
}

}  // namespace moe4d
