// kernels/optimizer_kernels.h — element-wise optimizer updates and the reductions around them.
#pragma once

#include <cstdint>

namespace moe4d {

struct AdamWStep {
  float lr = 0.0f;
  float beta1 = 0.9f;
  float beta2 = 0.95f;
  float eps = 1e-8f;
  float weight_decay = 0.0f;  // decoupled: p -= lr * weight_decay * p
  float grad_scale = 1.0f;    // multiplies the gradient first (global-norm clipping, loss-scale removal)
  int64_t step = 1;           // 1-based, for bias correction
};

// One AdamW step over n elements: m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
// p -= lr * (m / (1-b1^t)) / (sqrt(v / (1-b2^t)) + eps) + lr * wd * p.
void adamw_update(float* param, const float* grad, float* m, float* v, int64_t n, const AdamWStep& step);

// Sum of squares in double precision (gradient norms).
double sum_squares(const float* x, int64_t n);

// True if every element is finite.
bool all_finite(const float* x, int64_t n);

// y[i] += alpha * x[i]
void axpy(float* y, const float* x, float alpha, int64_t n);

// x[i] *= alpha
void scale_inplace(float* x, float alpha, int64_t n);

}  // namespace moe4d
