// tests/kernels/kernel_test_util.h — random inputs, central finite differences and gradient
// comparison shared by the kernel tests.
//
// The pattern of every backward test: write the op's forward naively in double, define the scalar
// loss L = sum_i r_i * y_i for a random projection r, take central differences of L in double, and
// compare them with the kernel's fp32 backward fed dout = r.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/rng.h"

namespace moe4d::test {

inline std::vector<float> random_normal(size_t n, uint64_t seed, float scale = 1.0f) {
  std::vector<float> x(n);
  for (size_t i = 0; i < n; ++i) x[i] = scale * normal_at(seed, i);
  return x;
}

inline std::vector<float> random_uniform(size_t n, uint64_t seed, float lo, float hi) {
  CounterRng rng(seed);
  std::vector<float> x(n);
  for (size_t i = 0; i < n; ++i) x[i] = lo + static_cast<float>(rng.next_uniform()) * (hi - lo);
  return x;
}

inline std::vector<double> to_double(const std::vector<float>& x) { return std::vector<double>(x.begin(), x.end()); }

inline double dot(const std::vector<double>& a, const std::vector<float>& b) {
  double s = 0.0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

// Central differences of `loss` at x (double), at up to max_coords coordinates spread evenly over x.
struct FdGradient {
  std::vector<size_t> index;
  std::vector<double> grad;
};

inline FdGradient fd_gradient(const std::function<double(const std::vector<double>&)>& loss, std::vector<double> x,
                              size_t max_coords = SIZE_MAX, double h = 1e-4) {
  FdGradient fd;
  const size_t n = x.size();
  const size_t count = std::min(n, max_coords);
  for (size_t c = 0; c < count; ++c) {
    const size_t i = count == n ? c : c * n / count + (c * 7) % std::max<size_t>(1, n / count);
    const double saved = x[i];
    x[i] = saved + h;
    const double up = loss(x);
    x[i] = saved - h;
    const double down = loss(x);
    x[i] = saved;
    fd.index.push_back(i);
    fd.grad.push_back((up - down) / (2.0 * h));
  }
  return fd;
}

// Worst |a - b| / (|b| + rms(b)) over the compared elements: relative for large entries, relative to
// the gradient's overall size for entries near zero (where fp32 cancellation dominates).
inline double grad_error(const std::vector<double>& actual, const std::vector<double>& expected, size_t* worst) {
  double ss = 0.0;
  for (double e : expected) ss += e * e;
  const double rms = std::sqrt(ss / std::max<size_t>(1, expected.size())) + 1e-30;
  double err = 0.0;
  for (size_t i = 0; i < expected.size(); ++i) {
    const double e = std::fabs(actual[i] - expected[i]) / (std::fabs(expected[i]) + rms);
    if (e > err || std::isnan(e)) {
      err = std::isnan(e) ? INFINITY : e;
      *worst = i;
    }
  }
  return err;
}

// Kernel gradient (fp32, full array) vs finite differences at the FD's coordinates.
inline void expect_grad_near(const float* kernel_grad, const FdGradient& fd, double tol, const std::string& what) {
  std::vector<double> actual;
  for (size_t i : fd.index) actual.push_back(kernel_grad[i]);
  size_t worst = 0;
  const double err = grad_error(actual, fd.grad, &worst);
  EXPECT_LE(err, tol) << what << ": worst element " << fd.index[worst] << " kernel " << actual[worst] << " vs fd "
                      << fd.grad[worst];
}

// Forward values (fp32) vs a double reference, same error measure.
inline void expect_values_near(const float* actual, const std::vector<double>& expected, double tol,
                               const std::string& what) {
  std::vector<double> a(actual, actual + expected.size());
  size_t worst = 0;
  const double err = grad_error(a, expected, &worst);
  EXPECT_LE(err, tol) << what << ": worst element " << worst << " kernel " << a[worst] << " vs reference "
                      << expected[worst];
}

}  // namespace moe4d::test
