// tests/kernels/gemm_test.cc — gemm (all transposes, alpha/beta, leading dimensions) and the matmul pair.
#include "kernels/gemm.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "kernel_test_util.h"

namespace moe4d {
namespace {

using test::random_normal;

// Element (i, j) of op(X) for a row-major X with leading dimension ld.
double op_at(const std::vector<float>& x, bool trans, int ld, int i, int j) {
  return trans ? x[static_cast<size_t>(j) * ld + i] : x[static_cast<size_t>(i) * ld + j];
}

TEST(Gemm, AllTransposesAlphaBetaAndPaddedLeadingDims) {
  const int m = 7, n = 5, k = 9;
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      const int a_rows = ta ? k : m, a_cols = ta ? m : k;
      const int b_rows = tb ? n : k, b_cols = tb ? k : n;
      const int lda = a_cols + 3, ldb = b_cols + 2, ldc = n + 4;
      auto a = random_normal(static_cast<size_t>(a_rows) * lda, 1);
      auto b = random_normal(static_cast<size_t>(b_rows) * ldb, 2);
      auto c = random_normal(static_cast<size_t>(m) * ldc, 3);
      const auto c0 = c;
      const float alpha = 0.7f, beta = -0.3f;
      gemm(ta, tb, m, n, k, alpha, a.data(), lda, b.data(), ldb, beta, c.data(), ldc);
      for (int i = 0; i < m; ++i)
        for (int j = 0; j < ldc; ++j) {
          const size_t at = static_cast<size_t>(i) * ldc + j;
          if (j >= n) {
            EXPECT_EQ(c[at], c0[at]) << "padding column " << j << " was written";
            continue;
          }
          double ref = 0.0;
          for (int p = 0; p < k; ++p) ref += op_at(a, ta, lda, i, p) * op_at(b, tb, ldb, p, j);
          ref = alpha * ref + beta * c0[at];
          EXPECT_NEAR(c[at], ref, 1e-5 * (1.0 + std::fabs(ref)))
              << "ta " << ta << " tb " << tb << " at " << i << "," << j;
        }
    }
}

TEST(Gemm, BetaZeroOverwritesGarbageAndEmptyKScales) {
  const int m = 3, n = 4, k = 2;
  auto a = random_normal(m * k, 4), b = random_normal(k * n, 5);
  std::vector<float> c(m * n, std::numeric_limits<float>::quiet_NaN());
  gemm(false, false, m, n, k, 1.0f, a.data(), k, b.data(), n, 0.0f, c.data(), n);
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) {
      const double ref = static_cast<double>(a[i * k]) * b[j] + static_cast<double>(a[i * k + 1]) * b[n + j];
      EXPECT_NEAR(c[i * n + j], ref, 1e-5);
    }
  // k == 0: C = beta * C, and beta == 0 clears NaN.
  std::vector<float> d(m * n, 2.0f);
  gemm(false, false, m, n, 0, 1.0f, a.data(), 1, b.data(), n, 0.5f, d.data(), n);
  for (float v : d) EXPECT_EQ(v, 1.0f);
  std::fill(d.begin(), d.end(), std::numeric_limits<float>::quiet_NaN());
  gemm(false, false, m, n, 0, 1.0f, a.data(), 1, b.data(), n, 0.0f, d.data(), n);
  for (float v : d) EXPECT_EQ(v, 0.0f);
}

struct MatmulCase {
  int n, in_dim, out_dim;
};

class MatmulTest : public ::testing::TestWithParam<MatmulCase> {};

TEST_P(MatmulTest, ForwardMatchesNaiveAndBackwardMatchesFiniteDifferences) {
  const auto [n, in_dim, out_dim] = GetParam();
  auto x = random_normal(static_cast<size_t>(n) * in_dim, 10);
  auto w = random_normal(static_cast<size_t>(in_dim) * out_dim, 11, 0.5f);
  auto r = random_normal(static_cast<size_t>(n) * out_dim, 12);
  auto forward = [&](const std::vector<double>& xd, const std::vector<double>& wd) {
    std::vector<double> y(static_cast<size_t>(n) * out_dim, 0.0);
    for (int t = 0; t < n; ++t)
      for (int o = 0; o < out_dim; ++o)
        for (int i = 0; i < in_dim; ++i) y[t * out_dim + o] += xd[t * in_dim + i] * wd[i * out_dim + o];
    return y;
  };
  std::vector<float> y(static_cast<size_t>(n) * out_dim);
  matmul_forward(y.data(), x.data(), w.data(), n, in_dim, out_dim);
  test::expect_values_near(y.data(), forward(test::to_double(x), test::to_double(w)), 1e-5, "matmul_forward");

  const auto wd = test::to_double(w), xd = test::to_double(x);
  auto fd_x = test::fd_gradient([&](const std::vector<double>& v) { return test::dot(forward(v, wd), r); }, xd);
  auto fd_w = test::fd_gradient([&](const std::vector<double>& v) { return test::dot(forward(xd, v), r); }, wd);

  // Overwrite mode: din replaced; dw always accumulates onto what is there.
  auto dw0 = random_normal(w.size(), 13);
  std::vector<float> din(x.size(), std::numeric_limits<float>::quiet_NaN());
  std::vector<float> dw = dw0;
  matmul_backward(din.data(), dw.data(), r.data(), x.data(), w.data(), n, in_dim, out_dim, false);
  std::vector<float> dw_delta(w.size());
  for (size_t i = 0; i < w.size(); ++i) dw_delta[i] = dw[i] - dw0[i];
  test::expect_grad_near(din.data(), fd_x, 1e-4, "din");
  test::expect_grad_near(dw_delta.data(), fd_w, 1e-4, "dw (accumulated)");

  // Accumulate mode for din; null dw is skipped.
  auto din0 = random_normal(x.size(), 14);
  std::vector<float> din_acc = din0;
  matmul_backward(din_acc.data(), nullptr, r.data(), x.data(), w.data(), n, in_dim, out_dim, true);
  for (size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(din_acc[i] - din0[i], din[i], 1e-5 * (1 + std::fabs(din[i])));
  // Null din: only dw.
  std::vector<float> dw_only(w.size(), 0.0f);
  matmul_backward(nullptr, dw_only.data(), r.data(), x.data(), w.data(), n, in_dim, out_dim, false);
  test::expect_grad_near(dw_only.data(), fd_w, 1e-4, "dw (from zero)");
}

INSTANTIATE_TEST_SUITE_P(Shapes, MatmulTest,
                         ::testing::Values(MatmulCase{6, 5, 4}, MatmulCase{1, 8, 3}, MatmulCase{17, 3, 11}));

}  // namespace
}  // namespace moe4d
