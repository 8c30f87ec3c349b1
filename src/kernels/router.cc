// kernels/router.cc — MoE router: fp32 softmax or sigmoid scores, top-k weights, aux and z losses.
#include "kernels/router.h"

#include <cmath>
#include <cstdint>
#include <vector>

#include "core/check.h"
#include "kernels/vec_math.h"

namespace moe4d {
namespace {

// Writes the k best experts of one token by score = p[e] + bias[e], in the order (score descending,
// index ascending). Pick j is the best expert strictly after pick j-1 in that order, which needs no
// "already picked" bookkeeping: O(k * experts), no allocation.
void select_top_k(int* idx, const float* p, const float* bias, int experts, int k) {
  float prev_score = 0.0f;
  int prev = -1;
  for (int j = 0; j < k; ++j) {
    int best = -1;
    float best_score = 0.0f;
    for (int e = 0; e < experts; ++e) {
      const float score = bias != nullptr ? p[e] + bias[e] : p[e];
      const bool after_prev = prev < 0 || score < prev_score || (score == prev_score && e > prev);
      if (after_prev && (best < 0 || score > best_score)) {
        best = e;
        best_score = score;
      }
    }
    if (best < 0) {
      // Only reachable with NaN scores (a diverged run): fall back to the lowest unpicked index so
      // that the indices stay valid and the NaN surfaces in the loss instead of as a crash.
      for (int e = 0; e < experts && best < 0; ++e) {
        bool taken = false;
        for (int q = 0; q < j; ++q) taken |= idx[q] == e;
        if (!taken) best = e;
      }
      best_score = prev_score;
    }
    idx[j] = best;
    prev = best;
    prev_score = best_score;
  }
}

// Group-limited routing: writes into `sel` the selection scores p[e] + bias[e] of the experts in the
// token's group_topk best groups and -inf elsewhere (group score: the sum of its two best selection
// scores; ties to the lower group index).
void group_limited_scores(float* sel, float* group_score, const float* p, const float* bias, int experts,
                          const RouterScoring& scoring) {
  const int per_group = experts / scoring.groups;
  for (int e = 0; e < experts; ++e) sel[e] = bias != nullptr ? p[e] + bias[e] : p[e];
  for (int g = 0; g < scoring.groups; ++g) {
    float best = -INFINITY, second = -INFINITY;
    for (int e = g * per_group; e < (g + 1) * per_group; ++e) {
      if (sel[e] > best) {
        second = best;
        best = sel[e];
      } else if (sel[e] > second) {
        second = sel[e];
      }
    }
    group_score[g] = best + second;
  }
  for (int j = 0; j < scoring.group_topk; ++j) {  // mark the picked groups with +inf
    int pick = -1;
    for (int g = 0; g < scoring.groups; ++g)
      if (group_score[g] != INFINITY && (pick < 0 || group_score[g] > group_score[pick])) pick = g;
    if (pick >= 0) group_score[pick] = INFINITY;
  }
  for (int e = 0; e < experts; ++e)
    if (group_score[e / per_group] != INFINITY) sel[e] = -INFINITY;
}

}  // namespace

void router_forward(float* scores, float* lse, int* topk_idx, float* topk_w, const float* logits,
                    const float* select_bias, int tokens, int experts, int k, const RouterScoring& scoring) {
  MOE4D_CHECK(tokens >= 0 && experts > 0 && k > 0 && k <= experts);
  const bool grouped = scoring.groups > 1;
  MOE4D_CHECK(!grouped || (experts % scoring.groups == 0 && experts / scoring.groups >= 2 &&
                           scoring.group_topk >= 1 && k <= scoring.group_topk * (experts / scoring.groups)));
  std::vector<float> sel(grouped ? experts : 0), group_score(grouped ? scoring.groups : 0);
  for (int t = 0; t < tokens; ++t) {
    const float* l = logits + static_cast<int64_t>(t) * experts;
    float* p = scores + static_cast<int64_t>(t) * experts;
    const float m = vec::max(l, experts);
    float s = 0.0f;
    for (int e = 0; e < experts; ++e) {
      p[e] = vec::exp(l[e] - m);
      s += p[e];
    }
    lse[t] = m + std::log(s);
    if (scoring.sigmoid) {
      for (int e = 0; e < experts; ++e) p[e] = 1.0f / (1.0f + std::exp(-l[e]));
    } else {
      const float inv_s = 1.0f / s;
      for (int e = 0; e < experts; ++e) p[e] *= inv_s;
    }

    int* idx = topk_idx + static_cast<int64_t>(t) * k;
    float* w = topk_w + static_cast<int64_t>(t) * k;
    if (grouped) {
      group_limited_scores(sel.data(), group_score.data(), p, select_bias, experts, scoring);
      select_top_k(idx, sel.data(), nullptr, experts, k);
    } else {
      select_top_k(idx, p, select_bias, experts, k);
    }
    if (!scoring.normalize) {
      for (int j = 0; j < k; ++j) w[j] = p[idx[j]] * scoring.scaling;
      continue;
    }
    float picked = 0.0f;
    for (int j = 0; j < k; ++j) picked += p[idx[j]];
    // picked == 0 needs every picked score to underflow (a bias steering far away from the scores);
    // the token then gets zero weights instead of 0/0.
    const float inv_picked = picked > 0.0f ? scoring.scaling / picked : 0.0f;
    for (int j = 0; j < k; ++j) w[j] = p[idx[j]] * inv_picked;
  }
}

void router_expert_counts(int* counts, const int* topk_idx, int tokens, int experts, int k) {
  for (int e = 0; e < experts; ++e) counts[e] = 0;
  const int64_t slots = static_cast<int64_t>(tokens) * k;
  for (int64_t s = 0; s < slots; ++s) {
    MOE4D_CHECK(topk_idx[s] >= 0 && topk_idx[s] < experts);
    ++counts[topk_idx[s]];
  }
}

// weight * E / (N^2 k) * sum_{t,i} counts[g(t), i] * q[t, i], q the token's normalised scores.
float router_aux_loss(const float* scores, const RouterBalance& balance, int tokens, int experts, int k,
                      const RouterScoring& scoring) {
  if (tokens == 0) return 0.0f;
  MOE4D_CHECK(balance.groups > 0 && tokens % balance.groups == 0 && balance.tokens > 0);
  const int run = tokens / balance.groups;
  double acc = 0.0;
  for (int t = 0; t < tokens; ++t) {
    const float* p = scores + static_cast<int64_t>(t) * experts;
    const float* counts = balance.counts + static_cast<int64_t>(t / run) * experts;
    double row = 0.0, total = 0.0;
    for (int e = 0; e < experts; ++e) {
      row += static_cast<double>(counts[e]) * p[e];
      total += p[e];
    }
    acc += scoring.sigmoid ? (total > 0.0 ? row / total : 0.0) : row;
  }
  return static_cast<float>(acc * balance.weight * experts / (balance.tokens * balance.tokens * k));
}

float router_z_loss(const float* lse, int tokens, int total_tokens) {
  if (tokens == 0) return 0.0f;
  double acc = 0.0;
  for (int t = 0; t < tokens; ++t) acc += static_cast<double>(lse[t]) * lse[t];
  return static_cast<float>(acc / (total_tokens > 0 ? total_tokens : tokens));
}

// Per token, with scores p (softmax) or s (sigmoid), picks e_j, S = sum_j p[e_j], w_j = p[e_j] / S
// (normalised) or p[e_j], and upstream g_j, first the gradient dp of the scores:
//   d/dp[e_j] of sum_j g_j w_j  = (c g_j - sum_q g_q w_q) / S  normalised;   c g_j otherwise
//                                 (c = scoring.scaling, w_j including it)
//   d/dp[e]   of aux_coef * aux = a * c_e      softmax, with a = aux_coef * weight * E / (N^2 k) and
//                                              c the run's counts (held constant);
//                                 with q = s / sum(s), Z = sum(s):  a * (c_e - sum_i c_i q_i) / Z
// then through the scores:
//   softmax:  dl[e] = p[e] * (dp[e] - sum_e' p[e'] dp[e'])
//   sigmoid:  dl[e] = dp[e] * s[e] * (1 - s[e])
// and the z-loss: dl[e] += z_coef * 2 lse / T * softmax(l)[e]      (d lse / d l[e] = softmax(l)[e]).
void router_backward(float* dlogits, const float* dtopk_w, const float* scores, const float* lse, const int* topk_idx,
                     const float* topk_w, const RouterBalance& balance, int tokens, int experts, int k, float aux_coef,
                     float z_coef, const RouterScoring& scoring, const float* logits, int total_tokens) {
  if (tokens == 0) return;
  MOE4D_CHECK_MSG(!scoring.sigmoid || logits != nullptr, "sigmoid router backward needs the logits");
  MOE4D_CHECK(balance.groups > 0 && tokens % balance.groups == 0 && balance.tokens > 0);
  const int run = tokens / balance.groups;
  const double all = total_tokens > 0 ? total_tokens : tokens;
  const float aux_scale = static_cast<float>(static_cast<double>(aux_coef) * balance.weight * experts /
                                             (balance.tokens * balance.tokens * k));
  const float z_scale = 2.0f * z_coef / static_cast<float>(all);
  for (int t = 0; t < tokens; ++t) {
    const float* p = scores + static_cast<int64_t>(t) * experts;
    const float* counts = balance.counts + static_cast<int64_t>(t / run) * experts;
    float* dl = dlogits + static_cast<int64_t>(t) * experts;  // holds dp until the score step
    if (scoring.sigmoid) {
      float total = 0.0f, fq = 0.0f;
      for (int e = 0; e < experts; ++e) {
        total += p[e];
        fq += static_cast<float>(counts[e]) * p[e];
      }
      const float inv_total = total > 0.0f ? 1.0f / total : 0.0f;
      fq *= inv_total;
      for (int e = 0; e < experts; ++e) dl[e] = aux_scale * (static_cast<float>(counts[e]) - fq) * inv_total;
    } else {
      for (int e = 0; e < experts; ++e) dl[e] = aux_scale * static_cast<float>(counts[e]);
    }
    if (dtopk_w != nullptr) {
      const int* idx = topk_idx + static_cast<int64_t>(t) * k;
      const float* g = dtopk_w + static_cast<int64_t>(t) * k;
      const float* w = topk_w + static_cast<int64_t>(t) * k;
      if (scoring.normalize) {
        float picked = 0.0f, gw = 0.0f;
        for (int j = 0; j < k; ++j) {
          picked += p[idx[j]];
          gw += g[j] * w[j];
        }
        if (picked > 0.0f)  // see router_forward: zero weights carry no gradient
          for (int j = 0; j < k; ++j) dl[idx[j]] += (scoring.scaling * g[j] - gw) / picked;
      } else {
        for (int j = 0; j < k; ++j) dl[idx[j]] += scoring.scaling * g[j];
      }
    }
    const float z = z_scale * lse[t];
    if (scoring.sigmoid) {
      const float* l = logits + static_cast<int64_t>(t) * experts;
      for (int e = 0; e < experts; ++e) dl[e] = dl[e] * p[e] * (1.0f - p[e]) + z * std::exp(l[e] - lse[t]);
    } else {
      float dot = 0.0f;
      for (int e = 0; e < experts; ++e) dot += p[e] * dl[e];
      for (int e = 0; e < experts; ++e) dl[e] = p[e] * (dl[e] - dot + z);
    }
  }
}

}  // namespace moe4d
