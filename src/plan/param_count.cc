// plan/param_count.cc — parameter counts by sharding group.
#include "plan/param_count.h"

#include <algorithm>

namespace moe4d {

int64_t moe_layers_in(const ModelConfig& m, int64_t first, int64_t last) {
  if (!m.is_moe()) return 0;
  first = std::max<int64_t>(first, m.moe.first_dense_layers);
  if (last <= first) return 0;
  const int64_t freq = std::max(1, m.moe.layer_freq);
  const int64_t r = freq - 1;
  // Layers l in [0, x] with l % freq == r.
  auto upto = [&](int64_t x) -> int64_t { return x < r ? 0 : (x - r) / freq + 1; };
  int64_t n = upto(last - 1) - upto(first - 1);
  // model.moe.dense_layers (listed once each) removes the MoE layers it names.
  std::vector<int> listed = m.moe.dense_layers;
  std::sort(listed.begin(), listed.end());
  listed.erase(std::unique(listed.begin(), listed.end()), listed.end());
  for (int l : listed) n -= l >= first && l < last && l % freq == r;
  return n;
}

ModelParamCount count_model_params(const ModelConfig& m) {
  const double d = m.hidden_size;
  const double f = m.ffn_hidden_size;
  const double fe = m.expert_ffn();
  const double v = m.vocab_size;
  const double e = m.moe.num_experts;
  const double n_moe = static_cast<double>(moe_layers_in(m, 0, m.num_layers));
  const double n_dense = m.num_layers - n_moe;
  ModelParamCount c;
  c.attention = m.num_layers * (m.attention_sharded_weights() + m.attention_replicated_weights());
  c.norms = m.num_layers * (2 * d + m.attention_latent_norm_weights() + (m.qk_norm ? 2.0 * m.head_dim() : 0.0)) + d;
  c.routers = n_moe * d * e;
  c.experts = n_moe * e * 3 * d * fe;
  c.shared_experts = n_moe * 3 * d * m.shared_ffn();
  c.dense_ffn = n_dense * 3 * d * f;
  const double active_ffn = n_moe * m.moe.top_k * 3 * d * fe + n_dense * 3 * d * f;
  c.embedding = v * d;
  c.head = m.tie_embeddings ? 0 : v * d;
  c.active = c.dense() + active_ffn - c.dense_ffn;
  return c;
}

StageParams stage_params(const ModelConfig& m, const Layout& layout, int stage) {
  const double d = m.hidden_size;
  const double f = m.ffn_hidden_size;
  const double fe = m.expert_ffn();
  const double v = m.vocab_size;
  const double t = layout.tp;
  const int e_local = m.is_moe() ? m.moe.num_experts / layout.ep : 0;
  const int chunks = layout.virtual_stages;
  const int per_chunk = m.num_layers / (layout.pp * chunks);
  StageParams s;
  // MLA's down-projections and latent norms are held whole by every TP rank, as are the q/k norms.
  const double attention = m.attention_sharded_weights() / t + m.attention_replicated_weights() +
                           m.attention_latent_norm_weights() + 2 * d + (m.qk_norm ? 2.0 * m.head_dim() : 0.0);
  const double dense_layer = attention + 3 * d * f / t;
  const double moe_dense = attention + d * m.moe.num_experts + 3 * d * m.shared_ffn() / t;
  const double moe_experts = e_local * 3 * d * fe / t;
  for (int c = 0; c < chunks; ++c) {
    const int64_t first = (int64_t{c} * layout.pp + stage) * per_chunk;
    const int n_moe = static_cast<int>(moe_layers_in(m, first, first + per_chunk));
    const int n_dense = per_chunk - n_moe;
    s.dense += n_dense * dense_layer + n_moe * moe_dense;
    s.experts += n_moe * moe_experts;
    if (n_dense > 0) s.largest_layer = std::max(s.largest_layer, dense_layer);
    if (n_moe > 0) s.largest_layer = std::max(s.largest_layer, moe_dense + moe_experts);
    s.moe_layers += n_moe;
    s.layers += per_chunk;
  }
  s.has_embedding = stage == 0;
  s.has_head = stage == layout.pp - 1;
  if (s.has_embedding) s.dense += v * d / t;
  if (s.has_head) {
    s.dense += d;  // final norm
    // A tied head shares the embedding only when both live on the same stage.
    if (!m.tie_embeddings || layout.pp > 1) s.dense += v * d / t;
  }
  return s;
}

}  // namespace moe4d
