// model/model_flops.h — training FLOPs of the reference model, the numerator of throughput and MFU.
//
// Per token: 6 x (weights of the matmuls the token passes through: attention QKV + output, the dense
// FFN or its top_k experts plus the shared experts, the router, the head) + 6 x layers x seq x
// h head_dim (the hidden size unless model.head_dim says otherwise) for causal attention (scores and weighted sum over on average seq/2 positions, forward 2
// GEMMs x 2 FLOP, backward twice that; grouped-query attention does not change these, only the
// width of the QKV projection). This is the convention of the issue that introduced it and of
// Megatron's MFU accounting.
#pragma once

#include "config/config.h"

namespace moe4d {

inline double matmul_params_per_token(const ModelConfig& m) {
  const double d = m.hidden_size, f = m.ffn_hidden_size;
  double per_token = 0;
  for (int l = 0; l < m.num_layers; ++l) {
    per_token += d * m.qkv_width() + d * m.attn_width();  // W_qkv [d, (h + 2 kvh) head_dim] + W_o [h head_dim, d]
    if (m.is_moe_layer(l))
      per_token += m.moe.top_k * 3 * d * m.expert_ffn() + 3 * d * m.shared_ffn() + d * m.moe.num_experts;
    else
      per_token += 3 * d * f;
  }
  return per_token + d * m.vocab_size;
}

inline double model_flops_per_token(const ModelConfig& m) {
  return 6 * matmul_params_per_token(m) + 6.0 * m.num_layers * m.seq_length * m.attn_width();
}

}  // namespace moe4d
