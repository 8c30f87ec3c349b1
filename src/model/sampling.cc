#include "model/sampling.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

namespace moe4d {

int sample_token(const float* logits, int vocab, float temperature, int top_k, CounterRng& rng) {
  if (temperature <= 0.0f) return static_cast<int>(std::max_element(logits, logits + vocab) - logits);
  std::vector<int> ids(vocab);
  std::iota(ids.begin(), ids.end(), 0);
  const int k = top_k > 0 && top_k < vocab ? top_k : vocab;
  std::partial_sort(ids.begin(), ids.begin() + k, ids.end(), [&](int a, int b) { return logits[a] > logits[b]; });
  std::vector<double> weight(k);
  const double top = logits[ids[0]];
  for (int i = 0; i < k; ++i) weight[i] = std::exp((logits[ids[i]] - top) / temperature);
  double u = rng.next_uniform() * std::accumulate(weight.begin(), weight.end(), 0.0);
  for (int i = 0; i < k; ++i) {
    u -= weight[i];
    if (u <= 0) return ids[i];
  }
  return ids[k - 1];
}

}  // namespace moe4d
