// kernels/cross_entropy.cc — the per-row partials of (vocab-parallel) cross-entropy and its backward.
#include "kernels/cross_entropy.h"

#include <cmath>
#include <cstdint>

#include "kernels/vec_math.h"

namespace moe4d {

void ce_row_max(float* m, const float* logits, int tokens, int vocab_local) {
  for (int t = 0; t < tokens; ++t) m[t] = vec::max(logits + static_cast<int64_t>(t) * vocab_local, vocab_local);
}

void ce_row_sumexp(float* s, const float* logits, const float* m, int tokens, int vocab_local) {
  for (int t = 0; t < tokens; ++t)
    s[t] = vec::sum_exp(logits + static_cast<int64_t>(t) * vocab_local, m[t], vocab_local);
}

void ce_target_logit(float* tl, const float* logits, const int* targets, int tokens, int vocab_local, int v0) {
  for (int t = 0; t < tokens; ++t) {
    const int local = targets[t] - v0;
    tl[t] = local >= 0 && local < vocab_local ? logits[static_cast<int64_t>(t) * vocab_local + local] : 0.0f;
  }
}

void ce_loss(float* loss, const float* m, const float* s, const float* tl, int tokens) {
  for (int t = 0; t < tokens; ++t) loss[t] = std::log(s[t]) + m[t] - tl[t];
}

// The target's -dloss is applied after the softmax pass, so that the pass can run in place.
void ce_backward(float* dlogits, const float* logits, const float* m, const float* s, const int* targets,
                 float dloss_per_token, int tokens, int vocab_local, int v0) {
  for (int t = 0; t < tokens; ++t) {
    const float* l = logits + static_cast<int64_t>(t) * vocab_local;
    float* dl = dlogits + static_cast<int64_t>(t) * vocab_local;
    const float mt = m[t];
    const float scale = dloss_per_token / s[t];
    vec::map_lanes(vocab_local, [&](int64_t v, auto tag) {
      using V = decltype(tag);
      vec::put(dl + v, vec::exp(vec::get<V>(l + v) - mt) * scale);
    });
    const int local = targets[t] - v0;
    if (local >= 0 && local < vocab_local) dl[local] -= dloss_per_token;
  }
}

}  // namespace moe4d
