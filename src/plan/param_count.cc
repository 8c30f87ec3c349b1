// plan/param_count.cc — parameter counts by sharding group.
#include "plan/param_count.h"

#include <algorithm>

namespace moe4d {

ModelParamCount count_model_params(const ModelConfig& m) {
  const double d = m.hidden_size;
  const double f = m.ffn_hidden_size;
  const double fe = m.expert_ffn();
  const double v = m.vocab_size;
  const double e = m.moe.num_experts;
  ModelParamCount c;
  double active_ffn = 0;
  for (int l = 0; l < m.num_layers; ++l) {
    c.attention += d * m.qkv_width() + d * d;
    c.norms += 2 * d;
    if (m.is_moe_layer(l)) {
      c.routers += d * e;
      c.experts += e * 3 * d * fe;
      c.shared_experts += 3 * d * m.shared_ffn();
      active_ffn += m.moe.top_k * 3 * d * fe;
    } else {
      c.dense_ffn += 3 * d * f;
      active_ffn += 3 * d * f;
    }
  }
  c.norms += d;
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
  for (int c = 0; c < chunks; ++c) {
    const int first = (c * layout.pp + stage) * per_chunk;
    for (int l = first; l < first + per_chunk; ++l) {
      double dense = (d * m.qkv_width() + d * d) / t + 2 * d;
      double experts = 0;
      if (m.is_moe_layer(l)) {
        dense += d * m.moe.num_experts + 3 * d * m.shared_ffn() / t;
        experts = e_local * 3 * d * fe / t;
        ++s.moe_layers;
      } else {
        dense += 3 * d * f / t;
      }
      s.dense += dense;
      s.experts += experts;
      s.largest_layer = std::max(s.largest_layer, dense + experts);
      ++s.layers;
    }
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
