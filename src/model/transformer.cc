#include "model/transformer.h"

#include "backend/backend.h"
#include "model/param_store.h"
#include "model/rope_scaling.h"

namespace moe4d {

Transformer::Transformer(const ModelConfig& model, ParallelContext& pc, std::vector<ChunkSpec> chunks,
                         ParamStore& params)
    : model_(model),
      chunks_(std::move(chunks)),
      rope_(make_rope_table(model)),
      layer_index_(model.num_layers, -1) {
  for (const ChunkSpec& spec : chunks_) {
    if (spec.has_embedding) embedding_ = std::make_unique<TokenEmbedding>(model, pc, params);
    for (int l = spec.first_layer; l < spec.first_layer + spec.num_layers; ++l) {
      layer_index_[l] = static_cast<int>(layers_.size());
      auto attn = model.is_mla()
                      ? std::variant<AttentionBlock, MlaBlock>(std::in_place_type<MlaBlock>, l, model, pc, params)
                      : std::variant<AttentionBlock, MlaBlock>(std::in_place_type<AttentionBlock>, l, model, pc, params);
      if (model.is_moe_layer(l))
        layers_.push_back(std::make_unique<Layer>(
            Layer{std::move(attn),
                  std::variant<FfnBlock, MoeBlock>(std::in_place_type<MoeBlock>, l, model, pc, params)}));
      else
        layers_.push_back(std::make_unique<Layer>(
            Layer{std::move(attn),
                  std::variant<FfnBlock, MoeBlock>(std::in_place_type<FfnBlock>, l, model, pc, params)}));
    }
    if (spec.has_head) {
      const TokenEmbedding* tied = nullptr;
      if (model.tie_embeddings) {
        if (!embedding_) tied_copy_ = std::make_unique<TokenEmbedding>(model, pc, params, /*tied_copy=*/true);
        tied = embedding_ ? embedding_.get() : tied_copy_.get();
      }
      head_ = std::make_unique<LmHead>(model, pc, params, tied);
    }
  }
}

std::vector<MoeBlock*> Transformer::moe_blocks() {
  std::vector<MoeBlock*> out;
  for (auto& layer : layers_)
    if (auto* moe = std::get_if<MoeBlock>(&layer->ffn)) out.push_back(moe);
  return out;
}

void Transformer::layer_forward(const Layer& layer, const float* x_in, float* x_mid, float* x_out, void** attn_saved,
                                void** ffn_saved, BlockContext& ctx) const {
  *attn_saved = std::visit([&](const auto& block) { return block.forward(x_in, x_mid, ctx); }, layer.attn);
  *ffn_saved = std::visit([&](const auto& block) { return block.forward(x_mid, x_out, ctx); }, layer.ffn);
}

void Transformer::forward(int c, const int* tokens, const int* targets, const float* x_in, MicroBatchState& state,
                          BlockContext& ctx, HeadOutput* head_out) const {
  run_forward(chunks_[c], tokens, targets, x_in, state, ctx, head_out);
}

void Transformer::run_forward(const ChunkSpec& spec, const int* tokens, const int* targets, const float* x_in,
                              MicroBatchState& state, BlockContext& ctx, HeadOutput* head_out) const {
  MOE4D_CHECK(&ctx.saved == &state.arena);
  const int n = spec.num_layers;
  // The residual stream: this rank's sequence shard under sequence parallelism.
  const size_t width = size_t(ctx.shard_tokens()) * model_.hidden_size;
  const bool full_recompute = ctx.recompute == RecomputeGranularity::kFull;
  state.residual.assign(n + 1, nullptr);
  state.mid.assign(n, nullptr);
  state.attn_saved.assign(n, nullptr);
  state.ffn_saved.assign(n, nullptr);
  state.head_saved = nullptr;
  state.tokens = tokens;
  state.targets = targets;

  ctx.value_hooks = hooks_;  // the blocks announce each weight they read
  state.residual[0] = state.arena.alloc_f32(width);
  const int head = model_.num_layers;
  if (spec.has_embedding) {
    enter(-1, n > 0 ? spec.first_layer : (spec.has_head ? head : LayerHooks::kNoLayer), false);
    embedding_->forward(tokens, state.residual[0], ctx);
    leave(-1, false);
  } else {
    ctx.backend().copy(state.residual[0], x_in, sizeof(float) * width);
  }
  for (int i = 0; i < n; ++i) {
    const Layer& layer = *layers_[layer_index_[spec.first_layer + i]];
    enter(spec.first_layer + i,
          i + 1 < n ? spec.first_layer + i + 1 : (spec.has_head ? head : LayerHooks::kNoLayer), false);
    // Full recompute keeps only each layer's input: everything else of the layer is scratch.
    float* mid = full_recompute ? ctx.scratch.alloc_f32(width) : state.arena.alloc_f32(width);
    state.residual[i + 1] = state.arena.alloc_f32(width);
    layer_forward(layer, state.residual[i], mid, state.residual[i + 1], &state.attn_saved[i], &state.ffn_saved[i],
                  ctx);
    if (!full_recompute) state.mid[i] = mid;
    ctx.scratch.reset();
    leave(spec.first_layer + i, false);
  }
  if (spec.has_head) {
    MOE4D_CHECK(targets != nullptr);
    enter(head, LayerHooks::kNoLayer, false);
    state.head_saved = head_->forward(state.residual[n], targets, ctx, head_out);
    ctx.scratch.reset();
    leave(head, false);
  }
}

void Transformer::logits_at(const int* tokens, int position, float* out, MicroBatchState& state,
                            BlockContext& ctx) const {
  MOE4D_CHECK(num_chunks() == 1 && chunks_[0].has_embedding && chunks_[0].has_head);
  MOE4D_CHECK_MSG(!ctx.sequence_sharded(), "inference runs without sequence parallelism");
  // Run the chunk without its loss, then project only the requested position.
  ChunkSpec body = chunks_[0];
  body.has_head = false;
  run_forward(body, tokens, nullptr, nullptr, state, ctx, nullptr);
  enter(model_.num_layers, LayerHooks::kNoLayer, false);
  head_->logits_at(state.residual.back(), position, out, ctx);
  leave(model_.num_layers, false);
  ctx.scratch.reset();
  state.arena.reset();
}

void Transformer::backward(int c, const float* dx_out, float* dx_in, MicroBatchState& state, BlockContext& ctx,
                           const GradReadyFn& on_ready) const {
  const ChunkSpec& spec = chunks_[c];
  const int n = spec.num_layers;
  // The residual stream: this rank's sequence shard under sequence parallelism.
  const size_t width = size_t(ctx.shard_tokens()) * model_.hidden_size;
  ctx.grad_hooks = hooks_;  // the blocks report their parameters' gradients as they write them
  ctx.value_hooks = hooks_;
  float* dx = state.arena.alloc_f32(width);
  const int after_last = spec.has_embedding ? -1 : LayerHooks::kNoLayer;  // what backward visits last
  if (spec.has_head) {
    enter(model_.num_layers, n > 0 ? spec.first_layer + n - 1 : after_last, true);
    head_->backward(dx, state.residual[n], state.targets, state.head_saved, ctx);
    ctx.scratch.reset();
    leave(model_.num_layers, true);
    if (on_ready) on_ready(model_.num_layers);
  } else {
    ctx.backend().copy(dx, dx_out, sizeof(float) * width);
  }
  for (int i = n - 1; i >= 0; --i) {
    const Layer& layer = *layers_[layer_index_[spec.first_layer + i]];
    void* attn_saved = state.attn_saved[i];
    void* ffn_saved = state.ffn_saved[i];
    const float* mid = state.mid[i];
    enter(spec.first_layer + i, i > 0 ? spec.first_layer + i - 1 : after_last, true);
    if (ctx.recompute == RecomputeGranularity::kFull) {
      // Rebuild this layer's activations from its saved input (in scratch), then run its backward.
      BlockContext again{ctx.pc, ctx.params, ctx.model, ctx.rope, ctx.scratch, ctx.scratch, ctx.batch, ctx.seq,
                         ctx.grad_scale, RecomputeGranularity::kNone, nullptr};
      again.numerics = ctx.numerics;  // rebuilt in the precision the forward used
      again.sequence_parallel = ctx.sequence_parallel;
      again.value_hooks = ctx.value_hooks;  // the recomputation reads the weights too
      float* rebuilt_mid = ctx.scratch.alloc_f32(width);
      float* rebuilt_out = ctx.scratch.alloc_f32(width);
      layer_forward(layer, state.residual[i], rebuilt_mid, rebuilt_out, &attn_saved, &ffn_saved, again);
      mid = rebuilt_mid;
    }
    std::visit([&](const auto& block) { block.backward(dx, mid, ffn_saved, ctx); }, layer.ffn);
    std::visit([&](const auto& block) { block.backward(dx, state.residual[i], attn_saved, ctx); }, layer.attn);
    ctx.scratch.reset();
    leave(spec.first_layer + i, true);
    if (on_ready) on_ready(spec.first_layer + i);
  }
  if (spec.has_embedding) {
    enter(-1, LayerHooks::kNoLayer, true);
    embedding_->backward(state.tokens, dx, ctx);
    leave(-1, true);
    if (on_ready) on_ready(-1);
  } else {
    ctx.backend().copy(dx_in, dx, sizeof(float) * width);
  }
  state.arena.reset();
}

}  // namespace moe4d
