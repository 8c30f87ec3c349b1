// model/sampling.h — picking the next token from logits (temperature and top-k sampling).
#pragma once

#include "core/rng.h"

namespace moe4d {

// temperature <= 0: greedy (argmax). top_k <= 0 or >= vocab: sample from the whole vocabulary.
// Deterministic for a given rng state.
int sample_token(const float* logits, int vocab, float temperature, int top_k, CounterRng& rng);

}  // namespace moe4d
