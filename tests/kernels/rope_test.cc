// tests/kernels/rope_test.cc — RoPE table (default and custom theta), forward vs double reference on
// the multi-head and grouped-query layouts, backward = transpose.
#include "kernels/rope.h"

#include <gtest/gtest.h>

#include <cmath>

#include "kernel_test_util.h"

namespace moe4d {
namespace {

struct RopeCase {
  int batch, seq, heads, kv_heads, hd;
  double theta;
  int row() const { return (heads + 2 * kv_heads) * hd; }  // floats per token
  // Slot of the grouped layout [kv, g + 2, hd] that holds value head j (never rotated).
  bool is_value_slot(int slot) const {
    const int g = heads / kv_heads;
    return slot % (g + 2) == g + 1;
  }
};

// Rotation of every q and k head slot in double.
std::vector<double> rope_reference(const std::vector<double>& x, const RopeCase& c) {
  std::vector<double> y = x;
  const int slots = c.heads + 2 * c.kv_heads;
  for (int b = 0; b < c.batch; ++b)
    for (int p = 0; p < c.seq; ++p)
      for (int slot = 0; slot < slots; ++slot) {
        if (c.is_value_slot(slot)) continue;
        const size_t base = (static_cast<size_t>(b) * c.seq + p) * c.row() + static_cast<size_t>(slot) * c.hd;
        for (int i = 0; i < c.hd / 2; ++i) {
          const double angle = p * std::pow(c.theta, -2.0 * i / c.hd);
          const double x0 = x[base + 2 * i], x1 = x[base + 2 * i + 1];
          y[base + 2 * i] = x0 * std::cos(angle) - x1 * std::sin(angle);
          y[base + 2 * i + 1] = x0 * std::sin(angle) + x1 * std::cos(angle);
        }
      }
  return y;
}

TEST(Rope, TableMatchesFormula) {
  for (double theta : {10000.0, 1e6}) {
    RopeTable table(40, 16, static_cast<float>(theta));
    ASSERT_EQ(table.cos.size(), 40u * 8u);
    for (int p = 0; p < 40; ++p)
      for (int i = 0; i < 8; ++i) {
        const double angle = p * std::pow(theta, -2.0 * i / 16);
        EXPECT_NEAR(table.cos[p * 8 + i], std::cos(angle), 1e-7) << "theta " << theta;
        EXPECT_NEAR(table.sin[p * 8 + i], std::sin(angle), 1e-7) << "theta " << theta;
      }
  }
  EXPECT_EQ(RopeTable(8, 4).cos, RopeTable(8, 4, 10000.0f).cos);  // the default theta
}

class RopeTest : public ::testing::TestWithParam<RopeCase> {};

TEST_P(RopeTest, ForwardRotatesQAndKOnlyAndBackwardIsTheTranspose) {
  const RopeCase c = GetParam();
  RopeTable table(c.seq, c.hd, static_cast<float>(c.theta));
  const size_t n = static_cast<size_t>(c.batch) * c.seq * c.row();
  auto x = test::random_normal(n, 30);
  auto y = x;
  rope_forward(y.data(), table, c.batch, c.heads, c.kv_heads);
  const auto ref = rope_reference(test::to_double(x), c);
  test::expect_values_near(y.data(), ref, 1e-6, "rope_forward");
  for (size_t t = 0; t < static_cast<size_t>(c.batch) * c.seq; ++t)
    for (int slot = 0; slot < c.heads + 2 * c.kv_heads; ++slot)
      if (c.is_value_slot(slot))
        for (int j = 0; j < c.hd; ++j) {
          const size_t i = t * c.row() + static_cast<size_t>(slot) * c.hd + j;
          EXPECT_EQ(y[i], x[i]) << "v was touched";
        }

  // <R x, g> == <x, R^T g>, and the FD of L(x) = <R x, g> is R^T g.
  auto g = test::random_normal(n, 31);
  auto rt_g = g;
  rope_backward(rt_g.data(), table, c.batch, c.heads, c.kv_heads);
  double lhs = 0.0, rhs = 0.0;
  for (size_t i = 0; i < n; ++i) {
    lhs += static_cast<double>(y[i]) * g[i];
    rhs += static_cast<double>(x[i]) * rt_g[i];
  }
  EXPECT_NEAR(lhs, rhs, 1e-4 * (1.0 + std::fabs(lhs)));
  auto fd = test::fd_gradient([&](const std::vector<double>& v) { return test::dot(rope_reference(v, c), g); },
                              test::to_double(x), 300);
  test::expect_grad_near(rt_g.data(), fd, 1e-5, "rope_backward");

  // Backward undoes forward (rotations are orthogonal).
  rope_backward(y.data(), table, c.batch, c.heads, c.kv_heads);
  for (size_t i = 0; i < n; ++i) EXPECT_NEAR(y[i], x[i], 1e-5);
}

INSTANTIATE_TEST_SUITE_P(Layouts, RopeTest,
                         ::testing::Values(RopeCase{2, 9, 3, 3, 8, 10000.0},   // multi-head
                                           RopeCase{2, 9, 4, 2, 8, 1e6},       // grouped-query, Mixtral's theta
                                           RopeCase{1, 7, 3, 1, 4, 500000.0}  // multi-query
                                           ));

}  // namespace
}  // namespace moe4d
