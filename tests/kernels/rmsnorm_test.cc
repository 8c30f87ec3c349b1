// tests/kernels/rmsnorm_test.cc — RMSNorm forward vs double reference, backward vs finite differences.
#include "kernels/rmsnorm.h"

#include <gtest/gtest.h>

#include <cmath>

#include "kernel_test_util.h"

namespace moe4d {
namespace {

std::vector<double> rmsnorm_reference(const std::vector<double>& x, const std::vector<double>& w, int n, int d,
                                      std::vector<double>* rstd = nullptr) {
  std::vector<double> y(x.size());
  for (int i = 0; i < n; ++i) {
    double ss = 0.0;
    for (int j = 0; j < d; ++j) ss += x[i * d + j] * x[i * d + j];
    const double r = 1.0 / std::sqrt(ss / d + kRmsNormEps);
    if (rstd) rstd->push_back(r);
    for (int j = 0; j < d; ++j) y[i * d + j] = x[i * d + j] * r * w[j];
  }
  return y;
}

class RmsNormTest : public ::testing::TestWithParam<std::pair<int, int>> {};

TEST_P(RmsNormTest, ForwardAndAccumulatingBackward) {
  const auto [n, d] = GetParam();
  auto x = test::random_normal(static_cast<size_t>(n) * d, 20, 1.5f);
  auto w = test::random_uniform(d, 21, 0.5f, 1.5f);
  auto r = test::random_normal(x.size(), 22);
  std::vector<float> y(x.size()), rstd(n);
  rmsnorm_forward(y.data(), rstd.data(), x.data(), w.data(), n, d);
  std::vector<double> rstd_ref;
  const auto xd = test::to_double(x), wd = test::to_double(w);
  test::expect_values_near(y.data(), rmsnorm_reference(xd, wd, n, d, &rstd_ref), 1e-6, "rmsnorm out");
  test::expect_values_near(rstd.data(), rstd_ref, 1e-6, "rmsnorm rstd");

  std::vector<float> dx(x.size(), 0.0f), dw(d, 0.0f);
  rmsnorm_backward(dx.data(), dw.data(), r.data(), x.data(), w.data(), rstd.data(), n, d);
  auto fd_x = test::fd_gradient(
      [&](const std::vector<double>& v) { return test::dot(rmsnorm_reference(v, wd, n, d), r); }, xd);
  auto fd_w = test::fd_gradient(
      [&](const std::vector<double>& v) { return test::dot(rmsnorm_reference(xd, v, n, d), r); }, wd);
  test::expect_grad_near(dx.data(), fd_x, 1e-4, "rmsnorm dx");
  test::expect_grad_near(dw.data(), fd_w, 1e-4, "rmsnorm dw");

  // Both gradients accumulate onto what the buffers hold (dw sums over rows, so the rounding differs).
  auto dx_acc = test::random_normal(x.size(), 23), dw_acc = test::random_normal(d, 24);
  const auto dx0 = dx_acc, dw0 = dw_acc;
  rmsnorm_backward(dx_acc.data(), dw_acc.data(), r.data(), x.data(), w.data(), rstd.data(), n, d);
  for (size_t i = 0; i < dx.size(); ++i) EXPECT_FLOAT_EQ(dx_acc[i], dx0[i] + dx[i]);
  for (int j = 0; j < d; ++j) EXPECT_NEAR(dw_acc[j], dw0[j] + dw[j], 1e-5 * (1.0 + std::fabs(dw0[j])));
}

INSTANTIATE_TEST_SUITE_P(Shapes, RmsNormTest,
                         ::testing::Values(std::pair{1, 3}, std::pair{3, 8}, std::pair{5, 37}, std::pair{2, 130}));

}  // namespace
}  // namespace moe4d
