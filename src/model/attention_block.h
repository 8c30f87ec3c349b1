// model/attention_block.h — x + W_o · Attn(RoPE(RMSNorm(x) · W_qkv)), Megatron tensor parallel,
// with grouped-query attention (model.num_kv_heads KV heads shared by num_heads query heads).
//
// W_qkv [d, (h + 2 kvh) * head_dim] has its columns grouped by KV head (kernels/attention.h):
// for KV group j in 0..kvh-1, the g = h / kvh query heads j*g .. j*g+g-1, then key head j, then
// value head j, each head_dim columns (model.head_dim; hidden_size / h by default). kvh == h is today's
// [d, 3d] layout [head][q, k, v]. It is
// column-parallel: TP rank r holds groups r*kvh/tp .. (r+1)*kvh/tp - 1, i.e. its own query heads
// and the KV heads they read, one contiguous column block (num_kv_heads % tp == 0). W_o [h * head_dim,
// d] is row-parallel; the partial outputs are summed over the TP group in forward and the
// partial input gradients in backward.
#pragma once

#include "model/block_context.h"
#include "model/kv_cache.h"
#include "model/qk_norm.h"

namespace moe4d {

class AttentionBlock {
 public:
  // Registers this layer's parameters (layers.<layer>.attn_norm.weight, .attn.qkv.weight, .attn.out.weight,
  // and with model.qk_layernorm .attn.q_norm.weight, .attn.k_norm.weight).
  AttentionBlock(int layer, const ModelConfig& model, const ParallelContext& pc, ParamStore& params);

  // x_out[T, d] = x_in + attention(x_in). Returns the saved state for backward (lives in ctx.saved);
  // with ctx.recompute == kFull nothing but the pointer to x_in is needed and the caller recomputes.
  void* forward(const float* x_in, float* x_out, BlockContext& ctx) const;

  // dx[T, d]: on entry d loss / d x_out, on exit d loss / d x_in. Accumulates parameter gradients.
  void backward(float* dx, const float* x_in, const void* saved, BlockContext& ctx) const;

  // Inference with a KV cache (model/attention_cached.cc): x_out[n, d] = x_in + attention of the n
  // new tokens (ctx.batch 1, ctx.seq n) at positions cache.length .. cache.length + n - 1 over every
  // cached position before them; appends their keys and values to layer `layer` of the cache (the
  // caller advances cache.length after the last layer). Temporaries in ctx.scratch.
  void forward_cached(const float* x_in, float* x_out, KvCache& cache, int layer, BlockContext& ctx) const;

 private:
  int norm_id_, qkv_id_, out_id_;
  int local_heads_;
  int local_kv_heads_;
  int head_dim_;
  int hidden_;
  QkNorm qk_norm_;  // model.qk_layernorm (model/qk_norm.h); a no-op without it
};

}  // namespace moe4d
