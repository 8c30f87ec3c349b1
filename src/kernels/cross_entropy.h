// kernels/cross_entropy.h — token cross-entropy over a (possibly vocab-sharded) logits block.
//
// Vocab-parallel cross-entropy (Megatron) never materialises the full logits: each tensor-parallel
// rank holds logits[:, v0 : v0 + vocab_local]. The loss is assembled from three per-row partials,
// each followed by an all-reduce over the TP group (max, then sum, then sum):
//     m  = max over vocab,  s = sum exp(l - m),  tl = logit of the target
//     loss[t] = log(s[t]) + m[t] - tl[t]
// With one rank the all-reduces are no-ops and this is ordinary cross-entropy.
#pragma once

namespace moe4d {

// logits: [tokens, vocab_local] for vocab ids [v0, v0 + vocab_local).
void ce_row_max(float* m, const float* logits, int tokens, int vocab_local);
// s[t] = sum_v exp(logits[t, v] - m[t]), m the global row max.
void ce_row_sumexp(float* s, const float* logits, const float* m, int tokens, int vocab_local);
// tl[t] = logits[t, targets[t] - v0] if this shard owns targets[t], else 0.
void ce_target_logit(float* tl, const float* logits, const int* targets, int tokens, int vocab_local, int v0);
// loss[t] = log(s[t]) + m[t] - tl[t] (all three already globally reduced).
void ce_loss(float* loss, const float* m, const float* s, const float* tl, int tokens);

// dlogits[t, v] = (exp(logits[t, v] - m[t]) / s[t] - [v0 + v == targets[t]]) * dloss_per_token.
// dlogits may alias logits (the backward then runs in place).
void ce_backward(float* dlogits, const float* logits, const float* m, const float* s, const int* targets,
                 float dloss_per_token, int tokens, int vocab_local, int v0);

}  // namespace moe4d
