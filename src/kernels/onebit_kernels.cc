// kernels/onebit_kernels.cc — 1-bit Adam's compression and updates (see the header).
#include "kernels/onebit_kernels.h"

#include <cmath>
#include <cstring>

namespace moe4d {

void onebit_compress(const float* x, size_t n, size_t chunk, float* error, uint8_t* block) {
  double sq = 0;
  for (size_t i = 0; i < n; ++i) sq += double(x[i]) * x[i];
  const float scale = n > 0 ? static_cast<float>(std::sqrt(sq / double(n))) : 0.0f;
  std::memcpy(block, &scale, sizeof scale);
  uint8_t* bits = block + sizeof scale;
  std::memset(bits, 0, chunk / 8);
  for (size_t i = 0; i < n; ++i) {
    const bool positive = x[i] >= 0.0f;
    if (positive) bits[i / 8] |= uint8_t(1u << (i % 8));
    error[i] = x[i] - (positive ? scale : -scale);
  }
}

void onebit_decompress(const uint8_t* block, size_t n, float weight, float* out, bool accumulate) {
  float scale;
  std::memcpy(&scale, block, sizeof scale);
  const uint8_t* bits = block + sizeof scale;
  const float plus = weight * scale;
  for (size_t i = 0; i < n; ++i) {
    const float v = (bits[i / 8] >> (i % 8)) & 1u ? plus : -plus;
    out[i] = accumulate ? out[i] + v : v;
  }
}

void momentum_update(float* m, const float* grad, float beta1, float coef, size_t n) {
  for (size_t i = 0; i < n; ++i) m[i] = beta1 * m[i] + coef * grad[i];
}

void onebit_adam_update(float* param, const float* m, const float* v, size_t n, float lr, float inv_bc1, float inv_bc2,
                        float eps, float decay) {
  for (size_t i = 0; i < n; ++i) {
    const float p = param[i];
    param[i] = p - lr * (m[i] * inv_bc1) / (std::sqrt(v[i] * inv_bc2) + eps) - decay * p;
  }
}

}  // namespace moe4d
