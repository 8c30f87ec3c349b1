// model/kv_cache.h — keys and values of the tokens decoded so far, for incremental generation.
//
// One [capacity, kv_heads, head_dim] array of keys (RoPE applied) and one of values per layer of a
// single-chunk model. Positions are absolute, as in Hugging Face's generate: the token at cache
// position p is rotated by p. The capacity is the model's seq_length, the longest context it was
// trained on (and the length of its RoPE table); Transformer::decode refuses to go beyond it.
// Under multi-head latent attention (model.kv_lora_rank) the cache of a layer is one [capacity,
// kv_lora_rank + qk_rope_head_dim] array in `k` (the normalised latent and the rotated key, shared by
// every head: model/mla_cached.cc) and `v` is empty: per token and layer kv_lora_rank + qk_rope_head_dim
// floats instead of num_heads (qk_nope_head_dim + qk_rope_head_dim + v_head_dim) (DeepSeek-V3: 576
// instead of 40960, 71x less).
// Not thread-safe; one cache per sequence.
#pragma once

#include <vector>

#include "config/config.h"

namespace moe4d {

struct KvCache {
  KvCache(const ModelConfig& model, int local_kv_heads)
      : capacity(model.seq_length),
        heads(model.is_mla() ? 1 : local_kv_heads),
        head_dim(model.is_mla() ? model.mla.kv_lora_rank + model.mla.qk_rope_head_dim : model.head_dim()),
        k(model.num_layers), v(model.num_layers) {
    for (int l = 0; l < model.num_layers; ++l) {
      k[l].assign(size_t(capacity) * heads * head_dim, 0.0f);
      if (!model.is_mla()) v[l].assign(size_t(capacity) * heads * head_dim, 0.0f);
    }
  }
  float* keys(int layer, int position) { return k[layer].data() + size_t(position) * heads * head_dim; }
  float* values(int layer, int position) { return v[layer].data() + size_t(position) * heads * head_dim; }

  int capacity;
  int heads;  // KV heads held here
  int head_dim;
  int length = 0;  // positions filled (the next token goes to position `length`)
  std::vector<std::vector<float>> k, v;
};

}  // namespace moe4d
