// kernels/router.h — the MoE router: softmax over experts in fp32, top-k, renormalised weights,
// the Switch/GShard load-balancing loss and the router z-loss (design.md §2).
//
// The router logits are x @ W_r (a matmul_forward call); these kernels start from the logits.
#pragma once

namespace moe4d {

// logits: [tokens, experts].
// probs  [tokens, experts] = softmax(logits);  lse [tokens] = logsumexp(logits).
// topk_idx [tokens, k]: the k experts with the largest probs[t, e] + select_bias[e] (select_bias may be
//   null = 0; it steers selection only, as in DeepSeek-V3's aux-loss-free balancing), in descending
//   order of that score; ties go to the lower expert index.
// topk_w [tokens, k]: probs of the picks renormalised to sum to 1.
void router_forward(float* probs, float* lse, int* topk_idx, float* topk_w, const float* logits,
                    const float* select_bias, int tokens, int experts, int k);

// counts[experts] = number of (token, pick) slots routed to each expert (before any capacity limit).
void router_expert_counts(int* counts, const int* topk_idx, int tokens, int experts, int k);

// Load-balancing loss E * sum_i f_i * P_i, f_i = counts[i] / (tokens * k), P_i = mean over tokens of probs[t, i].
float router_aux_loss(const float* probs, const int* counts, int tokens, int experts, int k);

// z-loss mean over tokens of lse[t]^2.
float router_z_loss(const float* lse, int tokens);

// dlogits [tokens, experts], overwritten, = d/d logits of
//     sum_{t,j} dtopk_w[t,j] * topk_w[t,j]  +  aux_coef * aux_loss  +  z_coef * z_loss
// where dtopk_w (may be null = 0) is the upstream gradient of the renormalised weights. The counts
// (hence f_i) and the top-k choice are piecewise constant and treated as constants.
void router_backward(float* dlogits, const float* dtopk_w, const float* probs, const float* lse, const int* topk_idx,
                     const float* topk_w, const int* counts, int tokens, int experts, int k, float aux_coef,
                     float z_coef);

}  // namespace moe4d
