// tests/kernels/vec_math_test.cc — the SIMD helpers under every kernel: exp accuracy and special
// values, vector and scalar paths agreeing bit for bit, and the reductions (including NaN handling).
#include "kernels/vec_math.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "kernel_test_util.h"

namespace moe4d {
namespace {

std::vector<float> exp_via_map_lanes(const std::vector<float>& x) {
  std::vector<float> y(x.size());
  vec::map_lanes(static_cast<int64_t>(x.size()), [&](int64_t i, auto tag) {
    using V = decltype(tag);
    vec::put(y.data() + i, vec::exp(vec::get<V>(x.data() + i)));
  });
  return y;
}

TEST(VecMath, ExpIsAccurateAndVectorAndScalarPathsAgree) {
  std::vector<float> x;
  for (double v = -87.0; v <= 88.5; v += 0.0137) x.push_back(static_cast<float>(v));
  const auto y = exp_via_map_lanes(x);
  double worst = 0.0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double ref = std::exp(static_cast<double>(x[i]));
    worst = std::max(worst, std::fabs(y[i] - ref) / ref);
    ASSERT_EQ(y[i], vec::exp(x[i])) << "vector and scalar exp differ at " << x[i];
  }
  EXPECT_LT(worst, 2.5e-7);  // a few ulp
}

TEST(VecMath, ExpSpecialValues) {
  constexpr float kInf = std::numeric_limits<float>::infinity();
  const std::vector<float> x = {kInf, -kInf, std::numeric_limits<float>::quiet_NaN(), 89.0f, -104.0f, -1e30f, 1e30f,
                                0.0f, -95.0f, 88.7f, -87.5f, 1.0f, -1.0f, 50.0f, -50.0f, 2.0f, 3.0f};
  const auto y = exp_via_map_lanes(x);  // 16 in the vector path (even with AVX-512), 1 in the scalar tail
  for (size_t i = 0; i < x.size(); ++i) {
    const float ref = std::exp(x[i]);
    if (std::isnan(ref)) {
      EXPECT_TRUE(std::isnan(y[i])) << x[i];
    } else if (std::isinf(ref) || ref == 0.0f) {
      EXPECT_EQ(y[i], ref) << x[i];
    } else {  // includes the subnormal range (x = -95)
      EXPECT_NEAR(y[i], ref, 1e-6 * ref + 2 * std::numeric_limits<float>::denorm_min()) << x[i];
    }
  }
  EXPECT_EQ(vec::sigmoid(-200.0f), 0.0f);
  EXPECT_EQ(vec::sigmoid(200.0f), 1.0f);
}

TEST(VecMath, ReductionsMatchDoubleAndPropagateNaN) {
  for (int64_t n : {0, 1, 7, 31, 32, 33, 100, 1000}) {
    auto x = test::random_normal(n, 150), y = test::random_normal(n, 151);
    double s = 0.0, d = 0.0, se = 0.0, m = -INFINITY;
    for (int64_t i = 0; i < n; ++i) {
      s += x[i];
      d += static_cast<double>(x[i]) * y[i];
      se += std::exp(static_cast<double>(x[i]) - 0.5);
      m = std::max(m, static_cast<double>(x[i]));
    }
    EXPECT_NEAR(vec::sum(x.data(), n), s, 1e-5 * (1 + n)) << n;
    EXPECT_NEAR(vec::dot(x.data(), y.data(), n), d, 1e-5 * (1 + n)) << n;
    EXPECT_NEAR(vec::sum_exp(x.data(), 0.5f, n), se, 1e-6 * (1 + se)) << n;
    EXPECT_EQ(vec::max(x.data(), n), static_cast<float>(m)) << n;
    for (int64_t at : {int64_t{0}, n / 2, n - 1}) {
      if (n == 0) break;
      auto z = x;
      z[at] = std::numeric_limits<float>::quiet_NaN();
      EXPECT_TRUE(std::isnan(vec::max(z.data(), n))) << "NaN at " << at << " of " << n;
    }
  }
}

TEST(VecMath, SqrtVectorMatchesScalar) {
  const auto x = test::random_uniform(vec::kWidth, 160, 0.0f, 1e4f);
  const vec::Vf r = vec::sqrt(vec::load(x.data()));
  for (int l = 0; l < vec::kWidth; ++l) EXPECT_EQ(r[l], std::sqrt(x[l]));
}

}  // namespace
}  // namespace moe4d
