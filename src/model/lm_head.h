// model/lm_head.h — the two ends of the model: the vocab-parallel token embedding (first pipeline
// stage) and final RMSNorm + vocab-parallel output projection + cross-entropy (last stage).
//
// Both are sharded over the TP group by vocabulary rows (Megatron): the embedding lookup is completed
// by a TP all-reduce, and the cross-entropy combines per-shard max / sum-exp / target logit with
// three small all-reduces, so no rank ever materialises the full [tokens, vocab] logits.
// With tie_embeddings the head multiplies by the embedding table transposed; when the two ends sit on
// different pipeline stages the last stage holds a copy whose gradient is summed with the first
// stage's over the `embed` group (train/ does that).
#pragma once

#include "model/block_context.h"

namespace moe4d {

class TokenEmbedding {
 public:
  // Registers embed.weight [vocab, d] (vocab rows sharded over TP). `tied_copy`: this is the last
  // stage's copy of a tied table (same name, same initial values).
  TokenEmbedding(const ModelConfig& model, const ParallelContext& pc, ParamStore& params, bool tied_copy = false);

  // out[T, d] = embed[tokens].
  void forward(const int* tokens, float* out, BlockContext& ctx) const;
  // Accumulates the table gradient from dout[T, d].
  void backward(const int* tokens, const float* dout, BlockContext& ctx) const;

  int param_id() const { return id_; }
  int vocab_start() const { return vocab_start_; }
  int vocab_local() const { return vocab_local_; }

 private:
  int id_;
  int hidden_, vocab_start_, vocab_local_;
};

// Per-token losses of one micro-batch, as computed on the last stage.
struct HeadOutput {
  double loss_sum = 0;  // sum over tokens of the cross-entropy
  int tokens = 0;
};

class LmHead {
 public:
  // Registers final_norm.weight and head.weight [d, vocab] unless `tied` (then uses tied->param_id()).
  LmHead(const ModelConfig& model, const ParallelContext& pc, ParamStore& params, const TokenEmbedding* tied);

  // x[T, d] -> mean cross-entropy against targets. Returns the saved state for backward.
  void* forward(const float* x, const int* targets, BlockContext& ctx, HeadOutput* out) const;
  // dx[T, d] is overwritten with d (grad_scale * mean CE) / d x.
  void backward(float* dx, const float* x, const int* targets, const void* saved, BlockContext& ctx) const;

  // Logits at `position` of each sequence, for generation: out[batch, vocab] (gathered over TP).
  void logits_at(const float* x, int position, float* out, BlockContext& ctx) const;

 private:
  const float* weight(const BlockContext& ctx) const;
  void project(const float* xn, float* logits, int rows, BlockContext& ctx) const;
  int norm_id_, head_id_;
  bool tied_;
  int hidden_, vocab_, vocab_start_, vocab_local_;
};

}  // namespace moe4d
