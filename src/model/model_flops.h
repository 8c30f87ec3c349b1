// model/model_flops.h — training FLOPs of the reference model, the numerator of throughput and MFU.
//
// Per token: 6 x (weights of the matmuls the token passes through: attention QKV + output, the dense
// FFN or its top_k experts plus the shared experts, the router, the head) + 6 x layers x seq x
// h head_dim (the hidden size unless model.head_dim says otherwise) for causal attention (scores and weighted sum over on average seq/2 positions, forward 2
// GEMMs x 2 FLOP, backward twice that; grouped-query attention does not change these, only the
// width of the QKV projection). This is the convention of the issue that introduced it and of
// Megatron's MFU accounting. Multi-head latent attention (model.kv_lora_rank) counts its five
// projections and, for the core, each head's scores over qk_nope + qk_rope and its sum over v_head_dim.
#pragma once

#include "config/config.h"

namespace moe4d {

// Training FLOPs of one layer's causal attention core per token (scores and weighted sum).
inline double attention_core_flops_per_token(const ModelConfig& m) {
  if (!m.is_mla()) return 6.0 * m.seq_length * m.attn_width();
  return 3.0 * m.seq_length * m.num_heads * (m.mla.qk_head_dim() + m.mla.v_head_dim);
}

inline double matmul_params_per_token(const ModelConfig& m) {
  const double d = m.hidden_size, f = m.ffn_hidden_size;
  double per_token = 0;
  for (int l = 0; l < m.num_layers; ++l) {
    per_token += m.attention_sharded_weights() + m.attention_replicated_weights();
    if (m.is_moe_layer(l))
      per_token += m.moe.top_k * 3 * d * m.expert_ffn() + 3 * d * m.shared_ffn() + d * m.moe.num_experts;
    else
      per_token += 3 * d * f;
  }
  return per_token + d * m.vocab_size;
}

inline double model_flops_per_token(const ModelConfig& m) {
  return 6 * matmul_params_per_token(m) + m.num_layers * attention_core_flops_per_token(m);
}

}  // namespace moe4d
