// kernels/rmsnorm.cc — RMSNorm forward/backward over the last dimension (docs/model.md §1).
#include "kernels/rmsnorm.h"

#include <cmath>
#include <cstdint>

#include "kernels/vec_math.h"

namespace moe4d {

void rmsnorm_forward(float* out, float* rstd, const float* x, const float* w, int n, int d, float eps) {
  for (int i = 0; i < n; ++i) {
    const float* xi = x + static_cast<int64_t>(i) * d;
    float* oi = out + static_cast<int64_t>(i) * d;
    const float r = 1.0f / std::sqrt(vec::dot(xi, xi, d) / static_cast<float>(d) + eps);
    rstd[i] = r;
    for (int j = 0; j < d; ++j) oi[j] = xi[j] * r * w[j];
  }
}

// With y_j = x_j * r * w_j and r = (mean(x^2) + eps)^(-1/2), dr/dx_j = -r^3 x_j / d, so
//   dx_j = r * w_j * dy_j - x_j * r^3 / d * sum_k dy_k w_k x_k.
void rmsnorm_backward(float* dx, float* dw, const float* dout, const float* x, const float* w, const float* rstd,
                      int n, int d) {
  for (int i = 0; i < n; ++i) {
    const float* xi = x + static_cast<int64_t>(i) * d;
    const float* gi = dout + static_cast<int64_t>(i) * d;
    float* dxi = dx + static_cast<int64_t>(i) * d;
    const float r = rstd[i];
    const float proj = vec::lane_sum(d, [&](int64_t j) { return gi[j] * w[j] * xi[j]; });
    const float c = proj * r * r * r / static_cast<float>(d);
    for (int j = 0; j < d; ++j) {
      dxi[j] += r * w[j] * gi[j] - c * xi[j];
      dw[j] += gi[j] * xi[j] * r;
    }
  }
}

}  // namespace moe4d
