// kernels/router.h — the MoE router in fp32: expert scores (softmax over the experts, or a sigmoid
// per expert as in DeepSeek-V3), top-k, the pick weights (optionally renormalised), the
// Switch/GShard load-balancing loss and the router z-loss (docs/model.md §1, docs/moe.md).
//
// The router logits are x @ W_r (a matmul_forward call); these kernels start from the logits.
#pragma once

namespace moe4d {

struct RouterScoring {
  bool sigmoid = false;   // scores = sigmoid(logits) per expert; false: softmax(logits) over experts
  bool normalize = true;  // pick weights = picked scores / their sum; false: the picked scores as they are
};

// logits: [tokens, experts].
// scores [tokens, experts] = softmax(logits) or sigmoid(logits);  lse [tokens] = logsumexp(logits)
//   (the z-loss's, whatever the scoring).
// topk_idx [tokens, k]: the k experts with the largest scores[t, e] + select_bias[e] (select_bias may
//   be null = 0; it steers selection only, as in DeepSeek-V3's aux-loss-free balancing), in descending
//   order of that score; ties go to the lower expert index.
// topk_w [tokens, k]: scores of the picks (bias not included), renormalised to sum to 1 if
//   scoring.normalize.
void router_forward(float* scores, float* lse, int* topk_idx, float* topk_w, const float* logits,
                    const float* select_bias, int tokens, int experts, int k, const RouterScoring& scoring = {});

// counts[experts] = number of (token, pick) slots routed to each expert (before any capacity limit).
void router_expert_counts(int* counts, const int* topk_idx, int tokens, int experts, int k);

// Load-balancing loss E * sum_i f_i * P_i, f_i = counts[i] / (tokens * k), P_i = mean over tokens of
// the token's scores normalised to sum 1 over the experts: the softmax probabilities themselves, or
// sigmoid scores s[t, i] / sum_e s[t, e] (DeepSeek-V3's complementary balance loss, taken over the
// micro-batch's tokens).
//
// Shards (total_tokens > 0): `scores` are `tokens` rows of a micro-batch of total_tokens tokens (a
// TP rank's sequence shard under sequence parallelism) and `counts` are those of all total_tokens.
// The result is this shard's share: E / (total^2 k) * sum over its rows, so the shares of disjoint
// shards sum to the loss of the whole micro-batch (Megatron-Core's switch_load_balancing_loss_func
// with a sequence partition group). Likewise for the z-loss (sum over the rows / total) and for
// router_backward, whose dlogits rows are then the whole micro-batch's loss gradient on those rows.
float router_aux_loss(const float* scores, const int* counts, int tokens, int experts, int k,
                      const RouterScoring& scoring = {}, int total_tokens = 0);

// z-loss mean over tokens of lse[t]^2 (a shard's share with total_tokens > 0, as above).
float router_z_loss(const float* lse, int tokens, int total_tokens = 0);

// dlogits [tokens, experts], overwritten, = d/d logits of
//     sum_{t,j} dtopk_w[t,j] * topk_w[t,j]  +  aux_coef * aux_loss  +  z_coef * z_loss
// where dtopk_w (may be null = 0) is the upstream gradient of the pick weights. The counts (hence
// f_i) and the top-k choice are piecewise constant and treated as constants. `logits` is needed by
// the sigmoid scoring (for the z-loss's softmax); the softmax scoring ignores it. total_tokens > 0:
// the rows are a shard of a micro-batch of total_tokens tokens and counts are the whole one's (above).
void router_backward(float* dlogits, const float* dtopk_w, const float* scores, const float* lse, const int* topk_idx,
                     const float* topk_w, const int* counts, int tokens, int experts, int k, float aux_coef,
                     float z_coef, const RouterScoring& scoring = {}, const float* logits = nullptr,
                     int total_tokens = 0);

}  // namespace moe4d
