// kernels/rmsnorm.h — RMSNorm: out = x * rsqrt(mean(x^2) + eps) * w, over the last dimension
// (eps = model.norm_eps, default 1e-5).
#pragma once

namespace moe4d {

constexpr float kRmsNormEps = 1e-5f;

// x, out: [n, d]; w: [d]; rstd: [n] saved for backward (1 / sqrt(mean(x^2) + eps)).
void rmsnorm_forward(float* out, float* rstd, const float* x, const float* w, int n, int d, float eps = kRmsNormEps);

// dx[n, d] += d loss / d x (accumulates: x is a residual-stream value with other consumers);
// dw[d] += d loss / d w. dout: [n, d].
void rmsnorm_backward(float* dx, float* dw, const float* dout, const float* x, const float* w, const float* rstd,
                      int n, int d);

}  // namespace moe4d
