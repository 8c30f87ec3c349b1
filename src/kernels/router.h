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
  // Group-limited routing (DeepSeek-V3's n_group / topk_group, Megatron-Core's
  // --moe-router-num-groups / --moe-router-group-topk): the experts form `groups` contiguous groups of
  // experts / groups; a group's score is the sum of its two best selection scores (score + bias); the
  // token picks its top-k experts only inside its `group_topk` best groups. groups = 1: no limit.
  int groups = 1;
  int group_topk = 1;
  float scaling = 1.0f;  // routed_scaling_factor: the pick weights are multiplied by it (after normalising)
};

// What the load-balancing loss is taken against. The rows split into `groups` equal consecutive runs
// (the sequences of a micro-batch for the sequence-wise loss; one run otherwise) and run g's rows are
// balanced against counts[g]:
//     loss = weight * E / (N^2 k) * sum_t sum_i counts[g(t), i] * q[t, i]
// with q[t] the token's scores normalised to sum 1 over the experts and N = `tokens`, the tokens behind
// one run's counts (all ranks' tokens, when the counts are reduced over ranks). With one run, N = the
// run's own tokens and weight 1 this is E * sum_i f_i P_i (Switch / GShard); see docs/moe.md for the
// micro-batch, sequence-wise and global-batch statistics.
struct RouterBalance {
  const float* counts = nullptr;  // [groups, experts]: (token, pick) slots per expert
  int groups = 1;
  double tokens = 0;
  double weight = 1.0;
};

// logits: [tokens, experts].
// scores [tokens, experts] = softmax(logits) or sigmoid(logits);  lse [tokens] = logsumexp(logits)
//   (the z-loss's, whatever the scoring).
// topk_idx [tokens, k]: the k experts with the largest scores[t, e] + select_bias[e] (select_bias may
//   be null = 0; it steers selection only, as in DeepSeek-V3's aux-loss-free balancing), in descending
//   order of that score; ties go to the lower expert index.
//   With scoring.groups > 1 only experts of the token's scoring.group_topk best groups are eligible
//   (group score: the sum of its two best score + bias; ties to the lower group index).
// topk_w [tokens, k]: scores of the picks (bias not included), renormalised to sum to 1 if
//   scoring.normalize, then multiplied by scoring.scaling.
void router_forward(float* scores, float* lse, int* topk_idx, float* topk_w, const float* logits,
                    const float* select_bias, int tokens, int experts, int k, const RouterScoring& scoring = {});

// The micro-batch statistics: counts [experts] of all `tokens` tokens of the micro-batch.
inline RouterBalance micro_batch_balance(const float* counts, double tokens) { return {counts, 1, tokens, 1.0}; }

// counts[experts] = number of (token, pick) slots routed to each expert (before any capacity limit).
void router_expert_counts(int* counts, const int* topk_idx, int tokens, int experts, int k);

// Load-balancing loss of these `tokens` rows against `balance` (above): E * sum_i f_i * P_i for one run
// of N = tokens rows, f_i = counts[i] / (N k), P_i = mean over the rows of the token's scores
// normalised to sum 1 over the experts: the softmax probabilities themselves, or sigmoid scores
// s[t, i] / sum_e s[t, e] (DeepSeek-V3's complementary balance loss).
//
// Shards (balance.tokens > the rows of a run here): `scores` are a TP rank's sequence shard, or one
// data replica's rows of statistics reduced over replicas, and the counts are those of all N tokens.
// The result is this shard's share, so the shares of disjoint shards sum to the whole loss
// (Megatron-Core's switch_load_balancing_loss_func with a sequence partition group). Likewise for
// the z-loss (sum over the rows / total) and for router_backward, whose dlogits rows are then the
// whole loss's gradient on those rows.
float router_aux_loss(const float* scores, const RouterBalance& balance, int tokens, int experts, int k,
                      const RouterScoring& scoring = {});

// z-loss mean over tokens of lse[t]^2 (a shard's share with total_tokens > 0, as above).
float router_z_loss(const float* lse, int tokens, int total_tokens = 0);

// dlogits [tokens, experts], overwritten, = d/d logits of
//     sum_{t,j} dtopk_w[t,j] * topk_w[t,j]  +  aux_coef * aux_loss  +  z_coef * z_loss
// where dtopk_w (may be null = 0) is the upstream gradient of the pick weights. The counts (hence
// f_i) and the top-k choice are piecewise constant and treated as constants. `logits` is needed by
// the sigmoid scoring (for the z-loss's softmax); the softmax scoring ignores it. total_tokens > 0:
// the rows are a shard of a micro-batch of total_tokens tokens (the z-loss's mean; above).
void router_backward(float* dlogits, const float* dtopk_w, const float* scores, const float* lse, const int* topk_idx,
                     const float* topk_w, const RouterBalance& balance, int tokens, int experts, int k, float aux_coef,
                     float z_coef, const RouterScoring& scoring = {}, const float* logits = nullptr,
                     int total_tokens = 0);

}  // namespace moe4d
