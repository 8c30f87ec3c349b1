// kernels/optimizer_kernels.cc — AdamW and the element-wise reductions used around the optimizer.
#include "kernels/optimizer_kernels.h"

#include <bit>
#include <cmath>
#include <cstdint>

#include "kernels/vec_math.h"

namespace moe4d {

void adamw_update(float* param, const float* grad, float* m, float* v, int64_t n, const AdamWStep& step) {
  const float b1 = step.beta1, b2 = step.beta2;
  // Bias corrections once per call, in double: 1 - b^t loses digits in float for small t.
  const double t = static_cast<double>(step.step);
  const float inv_bc1 = static_cast<float>(1.0 / (1.0 - std::pow(static_cast<double>(b1), t)));
  const float inv_bc2 = static_cast<float>(1.0 / (1.0 - std::pow(static_cast<double>(b2), t)));
  const float lr = step.lr, decay = step.lr * step.weight_decay, eps = step.eps, gs = step.grad_scale;
  vec::map_lanes(n, [&](int64_t i, auto tag) {
    using V = decltype(tag);
    const V g = vec::get<V>(grad + i) * gs;
    const V mi = b1 * vec::get<V>(m + i) + (1.0f - b1) * g;
    const V vi = b2 * vec::get<V>(v + i) + (1.0f - b2) * (g * g);
    const V p = vec::get<V>(param + i);
    vec::put(m + i, mi);
    vec::put(v + i, vi);
    vec::put(param + i, p - lr * (mi * inv_bc1) / (vec::sqrt(vi * inv_bc2) + eps) - decay * p);
  });
}

double sum_squares(const float* x, int64_t n) {
  constexpr int kLanes = 16;
  double acc[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int l = 0; l < kLanes; ++l) acc[l] += static_cast<double>(x[i + l]) * x[i + l];
  for (int l = 0; i + l < n; ++l) acc[l] += static_cast<double>(x[i + l]) * x[i + l];
  double s = 0.0;
  for (int l = 0; l < kLanes; ++l) s += acc[l];
  return s;
}

// A float is Inf or NaN exactly when its exponent bits are all ones; testing the bits keeps the
// loop an integer OR-reduction that vectorises.
bool all_finite(const float* x, int64_t n) {
  uint32_t bad = 0;
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t exponent = std::bit_cast<uint32_t>(x[i]) & 0x7f800000u;
    bad |= exponent == 0x7f800000u ? 1u : 0u;
  }
  return bad == 0;
}

void axpy(float* y, const float* x, float alpha, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += alpha * x[i];
}

void scale_inplace(float* x, float alpha, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] *= alpha;
}

}  // namespace moe4d
