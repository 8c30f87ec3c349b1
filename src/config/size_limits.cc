// config/size_limits.cc — the 64-bit size arithmetic of check_size_limits.
#include "config/size_limits.h"

#include <algorithm>
#include <string>

#include "config/config_keys.h"
#include "core/error.h"

namespace moe4d {
namespace {

// Products are formed in long double: exact far beyond 2^31 for these magnitudes and never
// overflowing, so a product of several huge keys is compared with the limit instead of wrapping.
using Size = long double;

std::string count_text(Size value) {
  if (value < 1e15L) return fmt::format("{}", static_cast<int64_t>(value));
  return fmt::format("{:.3g}", static_cast<double>(value));
}

class LimitChecker {
 public:
  explicit LimitChecker(const Config& c) : c_(c) {}

  // `what` is e.g. "the embedding shard [vocab_size / tensor_parallel, hidden_size]".
  void tensor(const char* key, const std::string& what, Size elements) const {
    if (elements <= kMaxTensorElements) return;
    fail("{}: {}: {} would have {} elements on one rank, more than 2^31 - 1 = {} (the largest tensor the kernels "
         "index); lower {} or split it over more ranks",
         c_.source, key, what, count_text(elements), kMaxTensorElements, key);
  }
  void count(const char* key, const std::string& what, Size value) const {
    if (value <= kMaxTensorElements) return;
    fail("{}: {}: {} is {}, more than 2^31 - 1 = {}; lower {}", c_.source, key, what, count_text(value),
         kMaxTensorElements, key);
  }

 private:
  const Config& c_;
};

}  // namespace

void check_size_limits(const Config& c) {
  const LimitChecker check(c);
  const auto key = [&](const auto& field) { return config_key_path(c, &field).data(); };  // its path
  const ModelConfig& m = c.model;
  const ParallelConfig& p = c.parallel;
  const Size dp = p.data_parallel, ep = p.expert_parallel, tp = p.tensor_parallel, pp = p.pipeline_parallel;
  check.count("parallel_config", "data_parallel x expert_parallel x tensor_parallel x pipeline_parallel (ranks)",
              dp * ep * tp * pp);
  check.count(key(p.micro_batch_num), "data_parallel x expert_parallel x micro_batch_num",
              dp * ep * p.micro_batch_num);

  // Micro-batch size as the trainer derives it (divisibility is checked with the layout).
  const Size replicas_x_micro = dp * ep * static_cast<Size>(std::max(1, p.micro_batch_num));
  const Size mbs = std::max<Size>(1, static_cast<Size>(c.train.global_batch_size / static_cast<int64_t>(replicas_x_micro)));
  check.count(key(c.train.global_batch_size),
              "the micro-batch size global_batch_size / (data_parallel x expert_parallel x micro_batch_num)", mbs);
  const Size tokens = mbs * m.seq_length;  // T: tokens of one micro-batch
  // A tensor with the tokens of a micro-batch as one dimension is blamed on the key that made it too
  // big: the larger of its two factors (the tokens, or its width), and for the tokens the larger of
  // the micro-batch size (train.global_batch_size) and model.seq_length.
  const char* tokens_key = mbs > m.seq_length ? key(c.train.global_batch_size) : key(m.seq_length);
  const auto by_tokens = [&](const char* width_key, Size width) { return tokens >= width ? tokens_key : width_key; };
  if (tokens > kMaxTensorElements)
    fail("{}: {}: the tokens of one micro-batch, micro-batch size {} (global_batch_size {} / (data_parallel x "
         "expert_parallel x micro_batch_num = {})) x seq_length {}, are {}, more than 2^31 - 1 = {}; lower {}",
         c.source, tokens_key, count_text(mbs), c.train.global_batch_size, count_text(replicas_x_micro),
         m.seq_length, count_text(tokens), kMaxTensorElements,
         mbs > m.seq_length ? "train.global_batch_size or raise parallel_config.micro_batch_num" : key(m.seq_length));

  const Size d = m.hidden_size, f = m.ffn_hidden_size, V = m.vocab_size, S = m.seq_length;
  const Size heads_per_rank = std::max<Size>(1, static_cast<Size>(m.num_heads) / tp);
  check.tensor(key(m.vocab_size), "the embedding shard [vocab_size / tensor_parallel, hidden_size]",
               (V / tp) * d);
  check.tensor(key(m.hidden_size), "the attention weight W_qkv [hidden_size, 3 hidden_size / tensor_parallel]",
               d * 3 * d / tp);
  check.tensor(key(m.ffn_hidden_size), "the FFN weight W1 [hidden_size, ffn_hidden_size / tensor_parallel]",
               d * f / tp);
  check.tensor(by_tokens(key(m.hidden_size), 3 * d), "the activations [tokens of a micro-batch, 3 hidden_size]",
               tokens * 3 * d);
  check.tensor(by_tokens(key(m.ffn_hidden_size), f / tp),
               "the FFN activations [tokens of a micro-batch, ffn_hidden_size]", tokens * f / tp);
  check.tensor(by_tokens(key(m.vocab_size), V / tp),
               "the logits [tokens of a micro-batch, vocab_size / tensor_parallel]", tokens * (V / tp));
  check.tensor(key(m.seq_length),
               "the attention probabilities [micro-batch size, heads / tensor_parallel, seq_length, seq_length]",
               mbs * heads_per_rank * S * S);
  check.count(key(m.num_layers), "num_layers", m.num_layers);
  if (m.is_moe()) {
    const Size E = m.moe.num_experts, k = m.moe.top_k;
    check.tensor(by_tokens(key(m.moe.num_experts), E), "the router logits [tokens of a micro-batch, num_experts]",
                 tokens * E);
    check.tensor(key(m.moe.num_experts), "the router weight [hidden_size, num_experts]", d * E);
    check.tensor(key(m.moe.num_experts),
                 "the expert weights of one layer [num_experts / expert_parallel, hidden_size, ffn_hidden_size / "
                 "tensor_parallel]",
                 (E / ep) * d * f / tp);
    // Routed rows: every token's top_k picks can land on one rank's experts.
    check.tensor(by_tokens(key(m.moe.top_k), k * std::max(d, f / tp)),
                 "the routed rows [tokens of a micro-batch x top_k, ffn_hidden_size]", tokens * k * std::max(d, f / tp));
  }
}

}  // namespace moe4d
