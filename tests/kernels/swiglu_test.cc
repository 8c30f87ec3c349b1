// tests/kernels/swiglu_test.cc — SwiGLU gate forward vs double reference, backward vs finite differences.
#include "kernels/swiglu.h"

#include <gtest/gtest.h>

#include <cmath>

#include "kernel_test_util.h"

namespace moe4d {
namespace {

std::vector<double> swiglu_reference(const std::vector<double>& a, const std::vector<double>& b) {
  std::vector<double> g(a.size());
  for (size_t i = 0; i < a.size(); ++i) g[i] = a[i] / (1.0 + std::exp(-a[i])) * b[i];
  return g;
}

TEST(SwiGlu, ForwardAndBackward) {
  for (size_t n : {1u, 7u, 53u}) {
    auto a = test::random_normal(n, 40, 3.0f);
    auto b = test::random_normal(n, 41);
    if (n > 2) {  // saturated regions of the sigmoid
      a[0] = -30.0f;
      a[1] = 25.0f;
    }
    auto r = test::random_normal(n, 42);
    std::vector<float> g(n);
    swiglu_forward(g.data(), a.data(), b.data(), static_cast<int64_t>(n));
    const auto ad = test::to_double(a), bd = test::to_double(b);
    test::expect_values_near(g.data(), swiglu_reference(ad, bd), 1e-6, "swiglu_forward");

    std::vector<float> da(n), db(n);
    swiglu_backward(da.data(), db.data(), r.data(), a.data(), b.data(), static_cast<int64_t>(n));
    auto fd_a = test::fd_gradient([&](const auto& v) { return test::dot(swiglu_reference(v, bd), r); }, ad);
    auto fd_b = test::fd_gradient([&](const auto& v) { return test::dot(swiglu_reference(ad, v), r); }, bd);
    test::expect_grad_near(da.data(), fd_a, 1e-5, "swiglu da");
    test::expect_grad_near(db.data(), fd_b, 1e-5, "swiglu db");

    // In place over dg gives the same result.
    auto inplace = r;
    swiglu_backward(inplace.data(), db.data(), inplace.data(), a.data(), b.data(), static_cast<int64_t>(n));
    for (size_t i = 0; i < n; ++i) EXPECT_EQ(inplace[i], da[i]);
  }
}

}  // namespace
}  // namespace moe4d
