// tests/kernels/rope_test.cc — RoPE table, forward vs double reference, backward = transpose.
#include "kernels/rope.h"

#include <gtest/gtest.h>

#include <cmath>

#include "kernel_test_util.h"

namespace moe4d {
namespace {

// Rotation of the qkv layout in double; `sign` -1 rotates backwards.
std::vector<double> rope_reference(const std::vector<double>& x, int batch, int seq, int heads, int hd) {
  std::vector<double> y = x;
  for (int b = 0; b < batch; ++b)
    for (int p = 0; p < seq; ++p)
      for (int h = 0; h < heads; ++h)
        for (int part = 0; part < 2; ++part) {
          const size_t base = ((static_cast<size_t>(b) * seq + p) * heads + h) * 3 * hd + part * hd;
          for (int i = 0; i < hd / 2; ++i) {
            const double angle = p * std::pow(10000.0, -2.0 * i / hd);
            const double x0 = x[base + 2 * i], x1 = x[base + 2 * i + 1];
            y[base + 2 * i] = x0 * std::cos(angle) - x1 * std::sin(angle);
            y[base + 2 * i + 1] = x0 * std::sin(angle) + x1 * std::cos(angle);
          }
        }
  return y;
}

TEST(Rope, TableMatchesFormula) {
  RopeTable table(40, 16);
  ASSERT_EQ(table.cos.size(), 40u * 8u);
  for (int p = 0; p < 40; ++p)
    for (int i = 0; i < 8; ++i) {
      const double angle = p * std::pow(10000.0, -2.0 * i / 16);
      EXPECT_NEAR(table.cos[p * 8 + i], std::cos(angle), 1e-7);
      EXPECT_NEAR(table.sin[p * 8 + i], std::sin(angle), 1e-7);
    }
}

TEST(Rope, ForwardRotatesQAndKOnlyAndBackwardIsTheTranspose) {
  const int batch = 2, seq = 9, heads = 3, hd = 8;
  RopeTable table(seq, hd);
  const size_t n = static_cast<size_t>(batch) * seq * heads * 3 * hd;
  auto x = test::random_normal(n, 30);
  auto y = x;
  rope_forward(y.data(), table, batch, heads);
  const auto ref = rope_reference(test::to_double(x), batch, seq, heads, hd);
  test::expect_values_near(y.data(), ref, 1e-6, "rope_forward");
  for (size_t t = 0; t < static_cast<size_t>(batch) * seq * heads; ++t)
    for (int j = 0; j < hd; ++j) EXPECT_EQ(y[t * 3 * hd + 2 * hd + j], x[t * 3 * hd + 2 * hd + j]) << "v was touched";

  // <R x, g> == <x, R^T g>, and the FD of L(x) = <R x, g> is R^T g.
  auto g = test::random_normal(n, 31);
  auto rt_g = g;
  rope_backward(rt_g.data(), table, batch, heads);
  double lhs = 0.0, rhs = 0.0;
  for (size_t i = 0; i < n; ++i) {
    lhs += static_cast<double>(y[i]) * g[i];
    rhs += static_cast<double>(x[i]) * rt_g[i];
  }
  EXPECT_NEAR(lhs, rhs, 1e-4 * (1.0 + std::fabs(lhs)));
  auto fd = test::fd_gradient(
      [&](const std::vector<double>& v) { return test::dot(rope_reference(v, batch, seq, heads, hd), g); },
      test::to_double(x), 300);
  test::expect_grad_near(rt_g.data(), fd, 1e-5, "rope_backward");

  // Backward undoes forward (rotations are orthogonal).
  rope_backward(y.data(), table, batch, heads);
  for (size_t i = 0; i < n; ++i) EXPECT_NEAR(y[i], x[i], 1e-5);
}

}  // namespace
}  // namespace moe4d
