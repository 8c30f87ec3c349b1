// tests/kernels/optimizer_kernels_test.cc — AdamW vs the formula in double over several steps, and the
// reductions/updates around it.
#include "kernels/optimizer_kernels.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "kernel_test_util.h"

namespace moe4d {
namespace {

TEST(AdamW, MatchesNaiveFormulaOverSeveralSteps) {
  const int64_t n = 37;  // vector body plus a scalar tail
  auto param = test::random_normal(n, 120);
  std::vector<float> m(n, 0.0f), v(n, 0.0f);
  std::vector<double> p_ref(param.begin(), param.end()), m_ref(n, 0.0), v_ref(n, 0.0);
  AdamWStep step;
  step.lr = 1e-2f;
  step.beta1 = 0.9f;
  step.beta2 = 0.95f;
  step.eps = 1e-8f;
  step.weight_decay = 0.1f;
  for (int t = 1; t <= 6; ++t) {
    auto grad = test::random_normal(n, 121 + t, 0.1f * t);
    step.step = t;
    step.grad_scale = t % 2 ? 1.0f : 0.5f;
    adamw_update(param.data(), grad.data(), m.data(), v.data(), n, step);
    const double b1 = step.beta1, b2 = step.beta2;
    for (int64_t i = 0; i < n; ++i) {
      const double g = static_cast<double>(grad[i]) * step.grad_scale;
      m_ref[i] = b1 * m_ref[i] + (1 - b1) * g;
      v_ref[i] = b2 * v_ref[i] + (1 - b2) * g * g;
      const double mhat = m_ref[i] / (1 - std::pow(b1, t)), vhat = v_ref[i] / (1 - std::pow(b2, t));
      const double decay = static_cast<double>(step.lr) * step.weight_decay * p_ref[i];
      p_ref[i] -= step.lr * mhat / (std::sqrt(vhat) + step.eps) + decay;
    }
  }
  for (int64_t i = 0; i < n; ++i) {
    EXPECT_NEAR(param[i], p_ref[i], 1e-6 * (1.0 + std::fabs(p_ref[i]))) << i;
    EXPECT_NEAR(m[i], m_ref[i], 1e-6 * (1.0 + std::fabs(m_ref[i]))) << i;
    EXPECT_NEAR(v[i], v_ref[i], 1e-6 * (1.0 + std::fabs(v_ref[i]))) << i;
  }
}

TEST(OptimizerKernels, SumSquaresIsExactForIntegers) {
  // Integers squared and summed are exact in double: catches a float accumulator.
  std::vector<float> x(1001);
  double expected = 0.0;
  for (size_t i = 0; i < x.size(); ++i) {
    x[i] = static_cast<float>(static_cast<int>(i % 97) - 48) * 1024.0f + 1.0f;
    expected += static_cast<double>(x[i]) * x[i];
  }
  EXPECT_EQ(sum_squares(x.data(), static_cast<int64_t>(x.size())), expected);
  EXPECT_EQ(sum_squares(x.data(), 0), 0.0);
}

TEST(OptimizerKernels, AllFiniteFindsInfAndNanAnywhere) {
  std::vector<float> x = test::random_normal(67, 130, 1e30f);
  EXPECT_TRUE(all_finite(x.data(), 67));
  for (float bad : {std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                    std::numeric_limits<float>::quiet_NaN()})
    for (size_t at : {size_t{0}, size_t{31}, size_t{66}}) {
      auto y = x;
      y[at] = bad;
      EXPECT_FALSE(all_finite(y.data(), 67)) << bad << " at " << at;
      EXPECT_TRUE(all_finite(y.data(), static_cast<int64_t>(at))) << "element " << at << " is past n";
    }
  x[5] = std::numeric_limits<float>::max();
  x[6] = std::numeric_limits<float>::denorm_min();
  EXPECT_TRUE(all_finite(x.data(), 67));
}

TEST(OptimizerKernels, AxpyAndScale) {
  auto x = test::random_normal(45, 140), y = test::random_normal(45, 141);
  auto y2 = y;
  axpy(y2.data(), x.data(), -0.75f, 45);
  for (size_t i = 0; i < 45; ++i) EXPECT_FLOAT_EQ(y2[i], y[i] + -0.75f * x[i]);
  auto x2 = x;
  scale_inplace(x2.data(), 3.5f, 45);
  for (size_t i = 0; i < 45; ++i) EXPECT_FLOAT_EQ(x2[i], 3.5f * x[i]);
}

}  // namespace
}  // namespace moe4d
