// model/qk_norm.h — per-head query/key RMSNorm (model.qk_layernorm; Qwen3, OLMo-2-style "QK-norm").
//
// After the fused q/k/v projection and before RoPE, every query head is normalised with one RMSNorm
// weight q_norm [head_dim] and every key head with k_norm [head_dim] (the same weights for all heads
// of the layer; value heads are untouched), with model.norm_eps, as Hugging Face's Qwen3MoeAttention
// does. Under tensor parallelism each rank holds whole heads and both weights replicated: a rank's
// weight gradient sums over its own heads only, so it is all-reduced over the TP group before it is
// added (the TP region sees the whole sequence, with or without sequence parallelism).
#pragma once

#include "model/block_context.h"

namespace moe4d {

class QkNorm {
 public:
  // Registers layers.<layer>.attn.q_norm.weight and .attn.k_norm.weight when model.qk_norm is set;
  // otherwise does nothing and every call below is a no-op.
  QkNorm(int layer, const ModelConfig& model, ParamStore& params);
  QkNorm() = default;  // disabled
  bool enabled() const { return q_id_ >= 0; }

  // qkv [tokens, kv_heads, heads / kv_heads + 2, head_dim] (the local heads, kernels/attention.h):
  // normalises the query and key heads in place. Keeps what backward needs in `keep` and returns it.
  const void* forward(float* qkv, int tokens, int heads, int kv_heads, Arena& keep, BlockContext& ctx) const;

  // dqkv: on entry d loss / d (normalised q, k, v), on exit d loss / d (projected q, k, v). Adds the
  // weights' gradients (summed over TP) and reports them ready.
  void backward(float* dqkv, int tokens, int heads, int kv_heads, const void* saved, BlockContext& ctx) const;

 private:
  int q_id_ = -1, k_id_ = -1;
  int head_dim_ = 0;
};

}  // namespace moe4d
