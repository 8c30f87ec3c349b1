// model/transformer_decode.cc — Transformer::decode: incremental inference over a KV cache.
//
// Only attention looks at other positions, so each new token needs the cached keys and values of
// the earlier ones and nothing else: embedding, the FFN / MoE blocks and the head run on the new
// tokens alone (the MoE blocks route them as in training; with capacity dropping the capacity then
// depends on how many tokens are decoded together).
#include "model/transformer.h"

namespace moe4d {

void Transformer::decode(const int* tokens, KvCache& cache, float* out, MicroBatchState& state,
                         BlockContext& ctx) const {
  MOE4D_CHECK(num_chunks() == 1 && chunks_[0].has_embedding && chunks_[0].has_head);
  MOE4D_CHECK(&ctx.saved == &state.arena && ctx.batch == 1);
  const size_t width = size_t(ctx.tokens()) * model_.hidden_size;
  float* x = state.arena.alloc_f32(width);
  float* mid = state.arena.alloc_f32(width);
  float* next = state.arena.alloc_f32(width);
  embedding_->forward(tokens, x, ctx);
  for (int l = 0; l < model_.num_layers; ++l) {
    const Layer& layer = *layers_[layer_index_[l]];
    std::visit([&](const auto& block) { block.forward_cached(x, mid, cache, l, ctx); }, layer.attn);
    std::visit([&](const auto& block) { block.forward(mid, next, ctx); }, layer.ffn);
    ctx.scratch.reset();
    std::swap(x, next);
  }
  cache.length += ctx.tokens();
  head_->logits_at(x, ctx.seq - 1, out, ctx);
  ctx.scratch.reset();
  state.arena.reset();
}

}  // namespace moe4d
