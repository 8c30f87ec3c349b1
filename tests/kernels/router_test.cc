// tests/kernels/router_test.cc — router softmax or sigmoid scores / top-k / (optional) renormalisation
// vs a double reference, counts, aux and z losses, and router_backward vs finite differences
// (selection and counts held fixed), whole or as sequence shards.
#include "kernels/router.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <utility>

#include "kernel_test_util.h"

namespace moe4d {
namespace {

// Logits whose probabilities are well separated: each row is a random permutation of 0.6 * e plus
// small noise, so no two scores are within ~0.1 of each other in log space.
std::vector<float> separated_logits(int tokens, int experts, uint64_t seed) {
  std::vector<float> logits(static_cast<size_t>(tokens) * experts);
  CounterRng rng(seed);
  for (int t = 0; t < tokens; ++t) {
    std::vector<int> perm(experts);
    std::iota(perm.begin(), perm.end(), 0);
    for (int i = experts - 1; i > 0; --i) std::swap(perm[i], perm[rng.next_u64() % (i + 1)]);
    for (int e = 0; e < experts; ++e)
      logits[t * experts + e] = 0.6f * perm[e] - 1.5f + 0.05f * static_cast<float>(rng.next_uniform());
  }
  return logits;
}

struct RouterRef {
  std::vector<double> probs, lse, w;
  std::vector<int> idx;
};

// Scores (softmax or sigmoid) and lse in double. Selection by (score + bias) descending, index
// ascending, unless `fixed_idx` is given (the backward treats the choice as constant).
RouterRef router_reference(const std::vector<double>& logits, const float* bias, int tokens, int experts, int k,
                           const std::vector<int>* fixed_idx = nullptr, RouterScoring scoring = {}) {
  RouterRef ref;
  ref.probs.resize(logits.size());
  for (int t = 0; t < tokens; ++t) {
    const double* l = &logits[t * experts];
    const double m = *std::max_element(l, l + experts);
    double s = 0.0;
    for (int e = 0; e < experts; ++e) s += std::exp(l[e] - m);
    for (int e = 0; e < experts; ++e)
      ref.probs[t * experts + e] = scoring.sigmoid ? 1.0 / (1.0 + std::exp(-l[e])) : std::exp(l[e] - m) / s;
    ref.lse.push_back(m + std::log(s));
    std::vector<int> order(experts);
    std::iota(order.begin(), order.end(), 0);
    auto score = [&](int e) { return ref.probs[t * experts + e] + (bias ? bias[e] : 0.0); };
    // Group-limited: only the experts of the group_topk groups with the best top-2 sums take part.
    std::vector<bool> allowed(experts, true);
    if (scoring.groups > 1) {
      const int size = experts / scoring.groups;
      std::vector<std::pair<double, int>> groups;
      for (int g = 0; g < scoring.groups; ++g) {
        std::vector<double> members;
        for (int e = g * size; e < (g + 1) * size; ++e) members.push_back(score(e));
        std::sort(members.rbegin(), members.rend());
        groups.push_back({-(members[0] + members[1]), g});
      }
      std::sort(groups.begin(), groups.end());
      for (int e = 0; e < experts; ++e) {
        allowed[e] = false;
        for (int j = 0; j < scoring.group_topk; ++j) allowed[e] = allowed[e] || groups[j].second == e / size;
      }
    }
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
      return allowed[a] != allowed[b] ? bool(allowed[a]) : score(a) > score(b);
    });
    double picked = 0.0;
    for (int j = 0; j < k; ++j) {
      const int e = fixed_idx ? (*fixed_idx)[t * k + j] : order[j];
      ref.idx.push_back(e);
      picked += ref.probs[t * experts + e];
    }
    for (int j = 0; j < k; ++j)
      ref.w.push_back(scoring.scaling * ref.probs[t * experts + ref.idx[t * k + j]] / (scoring.normalize ? picked : 1.0));
  }
  return ref;
}

// sum r * w + aux_coef * balance loss + z_coef * mean(lse^2), with the counts and the picks fixed. The
// balance loss: weight * E / (N^2 k) * sum_t sum_i counts[run(t), i] q[t, i], q the token's scores
// normalised over the experts; with one run of all tokens E sum_i f_i P_i.
double router_loss(const std::vector<double>& logits, const std::vector<int>& idx, const RouterBalance& balance,
                   const std::vector<float>* r, int tokens, int experts, int k, double aux_coef, double z_coef,
                   RouterScoring scoring = {}) {
  const RouterRef ref = router_reference(logits, nullptr, tokens, experts, k, &idx, scoring);
  double loss = 0.0;
  if (r)
    for (size_t s = 0; s < ref.w.size(); ++s) loss += ref.w[s] * (*r)[s];
  double aux = 0.0;
  for (int t = 0; t < tokens; ++t) {
    double row_sum = 0.0;
    for (int e = 0; e < experts; ++e) row_sum += ref.probs[t * experts + e];
    const float* c = balance.counts + size_t(t / (tokens / balance.groups)) * experts;
    for (int e = 0; e < experts; ++e) aux += c[e] * ref.probs[t * experts + e] / row_sum;
  }
  aux *= balance.weight * experts / (balance.tokens * balance.tokens * k);
  double z = 0.0;
  for (double l : ref.lse) z += l * l / tokens;
  return loss + aux_coef * aux + z_coef * z;
}

struct RouterCase {
  int tokens, experts, k;
  bool bias, upstream;
  float aux_coef, z_coef;
  RouterScoring scoring = {};
};

class RouterTest : public ::testing::TestWithParam<RouterCase> {};

TEST_P(RouterTest, ForwardLossesAndBackward) {
  const RouterCase c = GetParam();
  const auto logits = separated_logits(c.tokens, c.experts, 60 + c.k);
  std::vector<float> bias;
  if (c.bias) bias = test::random_uniform(c.experts, 61, -0.2f, 0.2f);
  const float* bias_ptr = c.bias ? bias.data() : nullptr;
  const size_t slots = static_cast<size_t>(c.tokens) * c.k;
  std::vector<float> probs(logits.size()), lse(c.tokens), topk_w(slots);
  std::vector<int> topk_idx(slots);
  router_forward(probs.data(), lse.data(), topk_idx.data(), topk_w.data(), logits.data(), bias_ptr, c.tokens,
                 c.experts, c.k, c.scoring);
  const auto logits_d = test::to_double(logits);
  const RouterRef ref = router_reference(logits_d, bias_ptr, c.tokens, c.experts, c.k, nullptr, c.scoring);
  test::expect_values_near(probs.data(), ref.probs, 1e-6, "router probs");
  test::expect_values_near(lse.data(), ref.lse, 1e-6, "router lse");
  EXPECT_EQ(topk_idx, ref.idx);
  test::expect_values_near(topk_w.data(), ref.w, 1e-6, "router topk_w");
  for (int t = 0; t < c.tokens && c.scoring.normalize; ++t) {
    double s = 0.0;
    for (int j = 0; j < c.k; ++j) s += topk_w[t * c.k + j];
    EXPECT_NEAR(s, c.scoring.scaling, 1e-6) << "weights of token " << t << " are not renormalised (and scaled)";
  }

  std::vector<int> int_counts(c.experts);
  router_expert_counts(int_counts.data(), topk_idx.data(), c.tokens, c.experts, c.k);
  std::vector<int> counts_ref(c.experts, 0);
  for (int e : ref.idx) ++counts_ref[e];
  EXPECT_EQ(int_counts, counts_ref);
  const std::vector<float> counts(int_counts.begin(), int_counts.end());
  const RouterBalance micro = micro_batch_balance(counts.data(), c.tokens);
  EXPECT_NEAR(router_aux_loss(probs.data(), micro, c.tokens, c.experts, c.k, c.scoring),
              router_loss(logits_d, ref.idx, micro, nullptr, c.tokens, c.experts, c.k, 1.0, 0.0, c.scoring), 1e-6);
  EXPECT_NEAR(router_z_loss(lse.data(), c.tokens),
              router_loss(logits_d, ref.idx, micro, nullptr, c.tokens, c.experts, c.k, 0.0, 1.0, c.scoring), 1e-5);

  const auto r = test::random_normal(slots, 62);
  std::vector<float> dlogits(logits.size(), std::numeric_limits<float>::quiet_NaN());
  router_backward(dlogits.data(), c.upstream ? r.data() : nullptr, probs.data(), lse.data(), topk_idx.data(),
                  topk_w.data(), micro, c.tokens, c.experts, c.k, c.aux_coef, c.z_coef, c.scoring,
                  logits.data());
  auto fd = test::fd_gradient(
      [&](const std::vector<double>& v) {
        return router_loss(v, ref.idx, micro, c.upstream ? &r : nullptr, c.tokens, c.experts, c.k, c.aux_coef,
                           c.z_coef, c.scoring);
      },
      logits_d);
  test::expect_grad_near(dlogits.data(), fd, 1e-4, "router dlogits");

  // Sequence-parallel shards: the rows split in two (uneven for an odd token count), each routed
  // with the whole micro-batch's counts and token count. Their shares sum to the losses, and their
  // dlogits put together are the whole micro-batch's loss gradient (its finite differences above).
  const int split = c.tokens / 2;
  std::vector<float> shard_dlogits(logits.size(), std::numeric_limits<float>::quiet_NaN());
  double aux_sum = 0.0, z_sum = 0.0;
  for (const auto& [begin, end] : {std::pair{0, split}, std::pair{split, c.tokens}}) {
    const int n = end - begin;
    const size_t row = size_t(begin) * c.experts, slot = size_t(begin) * c.k;
    aux_sum += router_aux_loss(probs.data() + row, micro, n, c.experts, c.k, c.scoring);
    z_sum += router_z_loss(lse.data() + begin, n, c.tokens);
    router_backward(shard_dlogits.data() + row, c.upstream ? r.data() + slot : nullptr, probs.data() + row,
                    lse.data() + begin, topk_idx.data() + slot, topk_w.data() + slot, micro, n, c.experts,
                    c.k, c.aux_coef, c.z_coef, c.scoring, logits.data() + row, c.tokens);
  }
  EXPECT_NEAR(aux_sum, router_aux_loss(probs.data(), micro, c.tokens, c.experts, c.k, c.scoring), 1e-6);
  EXPECT_NEAR(z_sum, router_z_loss(lse.data(), c.tokens), 1e-5);
  test::expect_grad_near(shard_dlogits.data(), fd, 1e-4, "router dlogits of two sequence shards");
}

INSTANTIATE_TEST_SUITE_P(
    Cases, RouterTest,
    ::testing::Values(RouterCase{6, 5, 2, false, true, 0.0f, 0.0f},   // renormalisation only
                      RouterCase{6, 5, 2, false, false, 0.5f, 0.0f},  // aux only
                      RouterCase{6, 5, 2, false, false, 0.0f, 0.3f},  // z-loss only
                      RouterCase{7, 8, 3, false, true, 0.01f, 0.001f},
                      RouterCase{7, 8, 3, true, true, 0.2f, 0.1f},    // with select_bias
                      RouterCase{5, 4, 1, true, true, 0.3f, 0.0f},    // k = 1: weights are constant 1
                      RouterCase{3, 6, 6, false, true, 0.1f, 0.1f},  // k = E
                      // softmax without renormalising the picks (Qwen-MoE's norm_topk_prob: false)
                      RouterCase{7, 8, 3, true, true, 0.2f, 0.1f, {.sigmoid = false, .normalize = false}},
                      // sigmoid scores (DeepSeek-V3), renormalised or not, with and without the bias
                      RouterCase{6, 5, 2, false, true, 0.0f, 0.0f, {.sigmoid = true, .normalize = true}},
                      RouterCase{7, 8, 3, true, true, 0.2f, 0.1f, {.sigmoid = true, .normalize = true}},
                      RouterCase{6, 5, 2, false, false, 0.5f, 0.0f, {.sigmoid = true, .normalize = true}},
                      RouterCase{6, 5, 2, false, false, 0.0f, 0.3f, {.sigmoid = true, .normalize = false}},
                      RouterCase{7, 8, 3, true, true, 0.2f, 0.1f, {.sigmoid = true, .normalize = false}},
                      RouterCase{5, 4, 1, false, true, 0.3f, 0.0f, {.sigmoid = true, .normalize = false}},
                      // group-limited routing and the routed scaling factor (DeepSeek-V3: sigmoid, bias,
                      // n_group / topk_group, routed_scaling_factor), and each on its own
                      RouterCase{7, 8, 3, true, true, 0.2f, 0.1f,
                                 {.sigmoid = true, .normalize = true, .groups = 4, .group_topk = 2, .scaling = 2.5f}},
                      RouterCase{6, 12, 4, true, true, 0.1f, 0.0f,
                                 {.sigmoid = true, .normalize = true, .groups = 3, .group_topk = 2, .scaling = 1.0f}},
                      RouterCase{7, 8, 2, false, true, 0.2f, 0.1f,
                                 {.sigmoid = false, .normalize = true, .groups = 2, .group_topk = 1, .scaling = 1.0f}},
                      RouterCase{6, 5, 2, true, true, 0.0f, 0.0f,
                                 {.sigmoid = true, .normalize = false, .groups = 1, .group_topk = 1, .scaling = 0.5f}}));

// Group-limited routing picks inside the best groups even when a lone better expert sits elsewhere.
TEST(Router, GroupLimitedRoutingPicksInsideTheBestGroups) {
  // 6 experts in 3 groups of 2; sigmoid scores ~ logits order. Expert 0 alone is the best single
  // expert, but group 0's top-2 sum (0 + 1) loses to group 2's (4 + 5), and to group 1's.
  const std::vector<float> logits = {3.0f, -3.0f, 1.0f, 1.2f, 1.5f, 1.4f};
  const RouterScoring scoring{.sigmoid = true, .normalize = true, .groups = 3, .group_topk = 1, .scaling = 2.0f};
  std::vector<float> probs(6), lse(1), w(2);
  std::vector<int> idx(2);
  router_forward(probs.data(), lse.data(), idx.data(), w.data(), logits.data(), nullptr, 1, 6, 2, scoring);
  EXPECT_EQ(idx, (std::vector<int>{4, 5}));
  EXPECT_NEAR(w[0] + w[1], 2.0, 1e-6);  // normalised, then scaled
  // A bias on expert 1 makes group 0 the best by biased sum (selection only): picks 0, 1 with weights
  // from the unbiased scores.
  const std::vector<float> bias = {0.0f, 2.0f, 0.0f, 0.0f, 0.0f, 0.0f};
  router_forward(probs.data(), lse.data(), idx.data(), w.data(), logits.data(), bias.data(), 1, 6, 2, scoring);
  EXPECT_EQ(idx, (std::vector<int>{1, 0}));
  EXPECT_NEAR(w[1], 2.0 * probs[0] / (probs[0] + probs[1]), 1e-6);
}

// The sequence-wise and global balance statistics (RouterBalance with several runs, counts that are
// not the rows' own, a weight): loss against the double reference, dlogits against finite
// differences, and the shares of two shards summing to the whole.
TEST(Router, SequenceAndGlobalBalanceLossGradients) {
  const int tokens = 8, experts = 6, k = 2;
  const RouterScoring scorings[] = {{.sigmoid = true, .normalize = true}, {.sigmoid = false, .normalize = true}};
  for (const RouterScoring& scoring : scorings) {
    const auto logits = separated_logits(tokens, experts, 71);
    const size_t slots = size_t(tokens) * k;
    std::vector<float> probs(logits.size()), lse(tokens), topk_w(slots);
    std::vector<int> idx(slots);
    router_forward(probs.data(), lse.data(), idx.data(), topk_w.data(), logits.data(), nullptr, tokens, experts, k,
                   scoring);
    // Two sequences of 4 tokens, each against its own counts (averaged: weight 1/2); and one run against
    // counts of 3 replicas x 8 tokens (fractional: a running average), weighted by the 3 replicas.
    std::vector<float> per_seq(size_t(2) * experts, 0.0f);
    for (size_t s = 0; s < slots; ++s) per_seq[s / (4 * k) * experts + idx[s]] += 1.0f;
    const std::vector<float> global = {7.5f, 9.0f, 4.5f, 8.0f, 10.0f, 9.0f};
    const RouterBalance cases[] = {{per_seq.data(), 2, 4.0, 0.5}, {global.data(), 1, 24.0, 3.0}};
    const auto logits_d = test::to_double(logits);
    const auto r = test::random_normal(slots, 72);
    for (const RouterBalance& balance : cases) {
      const double want = router_loss(logits_d, idx, balance, nullptr, tokens, experts, k, 1.0, 0.0, scoring);
      EXPECT_NEAR(router_aux_loss(probs.data(), balance, tokens, experts, k, scoring), want, 1e-6);
      std::vector<float> dlogits(logits.size());
      router_backward(dlogits.data(), r.data(), probs.data(), lse.data(), idx.data(), topk_w.data(), balance, tokens,
                      experts, k, 0.3f, 0.05f, scoring, logits.data());
      const auto fd = test::fd_gradient(
          [&](const std::vector<double>& v) {
            return router_loss(v, idx, balance, &r, tokens, experts, k, 0.3, 0.05, scoring);
          },
          logits_d);
      test::expect_grad_near(dlogits.data(), fd, 1e-4, "balance dlogits");
      // The global statistics' shares of two halves (e.g. two replicas' rows) sum to the loss.
      if (balance.groups == 1) {
        const double half = router_aux_loss(probs.data(), balance, 4, experts, k, scoring) +
                            router_aux_loss(probs.data() + 4 * experts, balance, 4, experts, k, scoring);
        EXPECT_NEAR(half, want, 1e-6);
      }
    }
  }
}

TEST(Router, TiesGoToTheLowerIndexAndBiasSteersSelectionOnly) {
  const int experts = 5, k = 3;
  // Token 0: all equal. Token 1: experts 1 and 3 tie for first, 0 and 4 for third.
  const std::vector<float> logits = {0.f, 0.f, 0.f, 0.f, 0.f, 0.5f, 2.f, -1.f, 2.f, 0.5f};
  std::vector<float> probs(10), lse(2), w(6);
  std::vector<int> idx(6);
  router_forward(probs.data(), lse.data(), idx.data(), w.data(), logits.data(), nullptr, 2, experts, k);
  EXPECT_EQ(idx, (std::vector<int>{0, 1, 2, 1, 3, 0}));
  for (int j = 0; j < 3; ++j) EXPECT_NEAR(w[j], 1.0 / 3.0, 1e-7);

  // A bias that excludes expert 1 and favours 4 changes the picks, not the probabilities/weights rule.
  const std::vector<float> bias = {0.f, -2.f, 0.f, 0.f, 1.f};
  std::vector<float> probs_b(10), lse_b(2), w_b(6);
  std::vector<int> idx_b(6);
  router_forward(probs_b.data(), lse_b.data(), idx_b.data(), w_b.data(), logits.data(), bias.data(), 2, experts, k);
  EXPECT_EQ(idx_b, (std::vector<int>{4, 0, 2, 4, 3, 0}));
  EXPECT_EQ(probs_b, probs);
  const double picked = probs[5 + 4] + probs[5 + 3] + probs[5 + 0];
  EXPECT_NEAR(w_b[3], probs[5 + 4] / picked, 1e-7);
  EXPECT_NEAR(w_b[4], probs[5 + 3] / picked, 1e-7);
}

}  // namespace
}  // namespace moe4d
