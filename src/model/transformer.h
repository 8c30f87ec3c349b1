// model/transformer.h — the part of the reference model (docs/model.md §1) that this rank holds.
//
// The model is cut into chunks of contiguous layers; a rank holds one chunk per pipeline stage it
// runs (one, or `virtual_pipeline` for the interleaved schedule). The first chunk of the model starts
// with the token embedding, the last ends with final norm + head + cross-entropy. Each chunk runs one
// micro-batch forward (saving activations in a MicroBatchState) and later backward (consuming them),
// which is all a pipeline schedule needs; without pipelining there is one chunk holding everything.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <variant>
#include <vector>

#include "kernels/rope.h"
#include "model/attention_block.h"
#include "model/mla_block.h"
#include "model/ffn_block.h"
#include "model/layer_hooks.h"
#include "model/lm_head.h"
#include "model/moe_block.h"

namespace moe4d {

struct ChunkSpec {
  int first_layer = 0;
  int num_layers = 0;
  bool has_embedding = false;  // first chunk of the model
  bool has_head = false;       // last chunk of the model
};

// Activations one micro-batch keeps between its forward and backward through one chunk.
// Reused across steps: the arena keeps its memory, the vectors their capacity.
struct MicroBatchState {
  Arena arena;                   // saved activations (reset after backward)
  std::vector<float*> residual;  // [num_layers + 1] residual stream entering each layer, and the chunk output
  std::vector<float*> mid;       // [num_layers] residual between attention and FFN (null under full recompute)
  std::vector<void*> attn_saved, ffn_saved;
  void* head_saved = nullptr;
  const int* tokens = nullptr;   // first chunk
  const int* targets = nullptr;  // last chunk
};

// Called during backward when the gradients of a layer's parameters are final for this micro-batch:
// layer index, -1 for the embedding, num_layers for final norm + head.
using GradReadyFn = std::function<void(int layer)>;

class Transformer {
 public:
  // Registers the parameters of `chunks` (in order) into `params`. `params` is finalised by the caller.
  Transformer(const ModelConfig& model, ParallelContext& pc, std::vector<ChunkSpec> chunks, ParamStore& params);

  int num_chunks() const { return static_cast<int>(chunks_.size()); }
  const ChunkSpec& chunk(int c) const { return chunks_[c]; }
  const RopeTable& rope() const { return rope_; }
  std::vector<MoeBlock*> moe_blocks();
  // Borrowed; null (the default) means no hooks. Called around every layer's forward, recomputation
  // and backward (model/layer_hooks.h): ZeRO-3 parameter gathering, ZeRO-2/3 gradient reduction.
  void set_layer_hooks(LayerHooks* hooks) { hooks_ = hooks; }

  // Runs micro-batch forward through chunk c. Input: `tokens` [T] if the chunk has the embedding, else
  // `x_in` [T, d] (the previous stage's output). Output: if the chunk has the head, adds the loss to
  // *head_out (targets [T] required); otherwise state.residual.back() [T, d] is the output to send on.
  // ctx.saved must be state.arena.
  void forward(int c, const int* tokens, const int* targets, const float* x_in, MicroBatchState& state,
               BlockContext& ctx, HeadOutput* head_out) const;

  // Inference through a single-chunk model: out[batch, vocab] = logits at `position` of each sequence
  // of tokens [batch, seq]. Uses and resets state.arena.
  void logits_at(const int* tokens, int position, float* out, MicroBatchState& state, BlockContext& ctx) const;

  // Inference with a KV cache through a single-chunk model (model/transformer_decode.cc): runs the n
  // tokens (ctx.batch 1, ctx.seq n) at absolute positions cache.length.. (appending their keys and
  // values), advances cache.length by n and writes the logits of the last one to out[vocab]. A
  // position at or beyond seq_length is a moe4d::Error. Uses and resets state.arena.
  void decode(const int* tokens, KvCache& cache, float* out, MicroBatchState& state, BlockContext& ctx) const;

  // Backward of the same micro-batch through chunk c. `dx_out` [T, d]: gradient of the chunk output
  // (ignored for the head chunk). If the chunk has no embedding, the gradient of its input is written
  // to `dx_in` [T, d]. Resets state.arena at the end.
  void backward(int c, const float* dx_out, float* dx_in, MicroBatchState& state, BlockContext& ctx,
                const GradReadyFn& on_ready) const;

 private:
  struct Layer {
    std::variant<AttentionBlock, MlaBlock> attn;  // MLA when model.kv_lora_rank is given
    std::variant<FfnBlock, MoeBlock> ffn;
  };
  void run_forward(const ChunkSpec& spec, const int* tokens, const int* targets, const float* x_in,
                   MicroBatchState& state, BlockContext& ctx, HeadOutput* head_out) const;
  void layer_forward(const Layer& layer, const float* x_in, float* x_mid, float* x_out, void** attn_saved,
                     void** ffn_saved, BlockContext& ctx) const;
  void enter(int layer, int next, bool backward) const {
    if (hooks_) hooks_->before_layer(layer, next, backward);
  }
  void leave(int layer, bool backward) const {
    if (hooks_) hooks_->after_layer(layer, backward);
  }

  const ModelConfig& model_;
  std::vector<ChunkSpec> chunks_;
  RopeTable rope_;
  std::vector<std::unique_ptr<Layer>> layers_;  // indexed by global layer - (owned layers only)
  std::vector<int> layer_index_;                // global layer -> index in layers_, -1 if not here
  std::unique_ptr<TokenEmbedding> embedding_;
  std::unique_ptr<TokenEmbedding> tied_copy_;   // last stage's copy of a tied table (pipeline only)
  std::unique_ptr<LmHead> head_;
  LayerHooks* hooks_ = nullptr;
};

}  // namespace moe4d
