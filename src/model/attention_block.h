// model/attention_block.h — x + W_o · Attn(RoPE(RMSNorm(x) · W_qkv)), Megatron tensor parallel.
//
// W_qkv [d, 3d] is column-parallel (each TP rank holds whole heads: the column layout is
// head-major, see kernels/attention.h), W_o [d, d] row-parallel; the partial outputs are summed
// over the TP group in forward and the partial input gradients in backward.
#pragma once

#include "model/block_context.h"
#include "model/kv_cache.h"

namespace moe4d {

class AttentionBlock {
 public:
  // Registers this layer's parameters (layers.<layer>.attn_norm.weight, .attn.qkv.weight, .attn.out.weight).
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
  int head_dim_;
  int hidden_;
};

}  // namespace moe4d
