// model/generator.h — autoregressive generation from a single-rank model, with or without a KV cache.
//
// Positions are absolute (token i of prompt + output sits at position i, as in Hugging Face's
// generate), so a sequence can hold at most model.seq_length tokens: the trained context, which is
// also the length of the RoPE table and of the KV cache. Generation stops at the end-of-document
// id, after max_new_tokens, or when the sequence fills seq_length (GenerationResult says which).
//   kv_cache true:  the prompt runs once, then each new token alone over the cached keys/values.
//   kv_cache false: every step recomputes the whole sequence (a full seq_length window).
// Both compute the same logits up to float summation order; greedy decoding (temperature 0) gives
// the same tokens (tested).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "model/transformer.h"

namespace moe4d {

struct GenerationOptions {
  int max_new_tokens = 64;
  float temperature = 0.8f;  // 0: greedy
  int top_k = 40;
  uint64_t seed = 0;
  bool kv_cache = true;
  int sample_vocab = 0;  // ids >= this (the model vocab padded beyond the tokenizer's) are never picked
  int eos_id = -1;       // stop (without emitting it) when picked
  std::function<void(const std::vector<int>& generated)> on_token;  // after each new token (may be empty)
};

struct GenerationResult {
  std::vector<int> tokens;  // the new tokens, without the prompt
  std::string stop;         // "eos", "max_new_tokens" or "seq_length"
  double seconds = 0;       // wall time of the whole generation (prompt included)
};

// `prompt` must be non-empty and shorter than model.seq_length (moe4d::Error otherwise).
GenerationResult generate_tokens(const Transformer& model, ParallelContext& pc, ParamStore& params,
                                 const ModelConfig& config, const std::vector<int>& prompt,
                                 const GenerationOptions& options);

}  // namespace moe4d
