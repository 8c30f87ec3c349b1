// kernels/embedding.cc — (vocab-parallel) embedding lookup and its gradient scatter.
#include "kernels/embedding.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

namespace moe4d {

void embedding_forward(float* out, const float* table, const int* tokens, int n, int d, int v0, int vocab_local) {
  for (int t = 0; t < n; ++t) {
    float* o = out + static_cast<int64_t>(t) * d;
    const int local = tokens[t] - v0;
    if (local >= 0 && local < vocab_local)
      std::memcpy(o, table + static_cast<int64_t>(local) * d, sizeof(float) * d);
    else
      std::fill(o, o + d, 0.0f);
  }
}

void embedding_backward(float* dtable, const float* dout, const int* tokens, int n, int d, int v0, int vocab_local) {
  for (int t = 0; t < n; ++t) {
    const int local = tokens[t] - v0;
    if (local < 0 || local >= vocab_local) continue;
    float* row = dtable + static_cast<int64_t>(local) * d;
    const float* g = dout + static_cast<int64_t>(t) * d;
    for (int j = 0; j < d; ++j) row[j] += g[j];
  }
}

}  // namespace moe4d
