// tests/report/axis_test.cc — nice ticks and tick labels against hand-computed cases.
#include "report/axis.h"

#include <gtest/gtest.h>

#include <cmath>

namespace moe4d {
namespace {

void expect_ticks(const NiceTicks& t, double step, const std::vector<double>& ticks) {
  EXPECT_DOUBLE_EQ(t.step, step);
  ASSERT_EQ(t.ticks.size(), ticks.size());
  for (size_t i = 0; i < ticks.size(); ++i) EXPECT_NEAR(t.ticks[i], ticks[i], 1e-12 * (1 + std::abs(ticks[i]))) << i;
  EXPECT_DOUBLE_EQ(t.lo, t.ticks.front());
  EXPECT_DOUBLE_EQ(t.hi, t.ticks.back());
}

TEST(NiceTicks, HandComputedCases) {
  // range 100 / 5 = 20 = 2 x 10^1
  expect_ticks(nice_ticks(0, 100, 5), 20, {0, 20, 40, 60, 80, 100});
  // 0.74 / 5 = 0.148 -> 0.2; widened to [0, 1]
  expect_ticks(nice_ticks(0.13, 0.87, 5), 0.2, {0, 0.2, 0.4, 0.6, 0.8, 1.0});
  // 2.2 / 5 = 0.44 -> 0.5; [6, 8.5]
  expect_ticks(nice_ticks(6.2, 8.4, 5), 0.5, {6, 6.5, 7, 7.5, 8, 8.5});
  // 10 / 4 = 2.5 -> 5; [-5, 10]
  expect_ticks(nice_ticks(-3, 7, 4), 5, {-5, 0, 5, 10});
  // 1e-3 / 5 = 2e-4
  expect_ticks(nice_ticks(0, 1e-3, 5), 2e-4, {0, 2e-4, 4e-4, 6e-4, 8e-4, 1e-3});
  // 9950 / 6 = 1658 -> 2000; [0, 10000]
  expect_ticks(nice_ticks(50, 10000, 6), 2000, {0, 2000, 4000, 6000, 8000, 10000});
}

TEST(NiceTicks, MinimumStepKeepsStepsWhole) {
  // 2 / 5 = 0.4 would be 0.5; steps of an optimizer are whole.
  expect_ticks(nice_ticks(1, 3, 5, /*min_step=*/1), 1, {1, 2, 3});
}

TEST(NiceTicks, DegenerateRanges) {
  // A constant 5 is padded by 5% either side: 0.5 / 5 = 0.1 -> [4.7, 5.3].
  expect_ticks(nice_ticks(5, 5, 5), 0.1, {4.7, 4.8, 4.9, 5.0, 5.1, 5.2, 5.3});
  expect_ticks(nice_ticks(0, 0, 5), 0.5, {-1, -0.5, 0, 0.5, 1});
  expect_ticks(nice_ticks(std::nan(""), 3, 5), 0.2, {0, 0.2, 0.4, 0.6, 0.8, 1.0});
  expect_ticks(nice_ticks(10, 0, 5), 2, {0, 2, 4, 6, 8, 10});  // reversed bounds
}

TEST(FormatTick, ShowsTheDigitsTheStepNeeds) {
  EXPECT_EQ(format_tick(0.5, 0.5, 2), "0.5");
  EXPECT_EQ(format_tick(1.0, 0.2, 1.0), "1.0");
  EXPECT_EQ(format_tick(12, 2, 20), "12");
  EXPECT_EQ(format_tick(6.25, 0.05, 7), "6.25");
  EXPECT_EQ(format_tick(12500, 500, 15000), "12.5k");
  EXPECT_EQ(format_tick(4000, 2000, 10000), "4k");
  EXPECT_EQ(format_tick(1500000, 500000, 2000000), "1.5M");
  EXPECT_EQ(format_tick(2e-4, 2e-4, 8e-4), "2e-4");
  EXPECT_EQ(format_tick(2.5e-5, 5e-6, 4e-5), "2.5e-5");
  EXPECT_EQ(format_tick(1e-17, 0.2, 1), "0");  // accumulated rounding is zero
  EXPECT_EQ(format_tick(-0.4, 0.2, 1), "-0.4");
}

TEST(Axis, LinearLabelsAndFractions) {
  const Axis axis = Axis::linear(0, 9.3, 5);
  EXPECT_DOUBLE_EQ(axis.lo(), 0);
  EXPECT_DOUBLE_EQ(axis.hi(), 10);
  EXPECT_EQ(axis.tick_labels(), (std::vector<std::string>{"0", "2", "4", "6", "8", "10"}));
  EXPECT_DOUBLE_EQ(axis.fraction(2.5), 0.25);
  EXPECT_FALSE(axis.is_log());
}

TEST(Axis, TightAxisKeepsTheDataRange) {
  // Steps 1..50: ticks every 10 inside the range, no empty space before step 1.
  const Axis axis = Axis::linear(1, 50, 6, /*integer_steps=*/true, /*tight=*/true);
  EXPECT_DOUBLE_EQ(axis.lo(), 1);
  EXPECT_DOUBLE_EQ(axis.hi(), 50);
  EXPECT_EQ(axis.tick_labels(), (std::vector<std::string>{"10", "20", "30", "40", "50"}));
  EXPECT_DOUBLE_EQ(axis.fraction(1), 0);
  // One point cannot be tight: it is widened as usual.
  const Axis single = Axis::linear(7, 7, 6, true, true);
  EXPECT_LT(single.lo(), 7);
  EXPECT_GT(single.hi(), 7);
}

TEST(Axis, LogDecadesWithFillOnShortRanges) {
  const Axis wide = Axis::log10(0.3, 40);  // three decades: decades only
  EXPECT_EQ(wide.tick_labels(), (std::vector<std::string>{"0.1", "1", "10", "100"}));
  EXPECT_DOUBLE_EQ(wide.fraction(1), 1.0 / 3);
  const Axis narrow = Axis::log10(2, 30);  // two decades: 1, 2, 5 per decade
  EXPECT_EQ(narrow.tick_labels(), (std::vector<std::string>{"1", "2", "5", "10", "20", "50", "100"}));
  EXPECT_DOUBLE_EQ(narrow.fraction(10), 0.5);
  const Axis tiny = Axis::log10(1e-5, 1e-4);
  EXPECT_EQ(tiny.tick_labels(), (std::vector<std::string>{"1e-5", "2e-5", "5e-5", "1e-4"}));
  const Axis one = Axis::log10(3, 3);  // a single value still spans a decade
  EXPECT_DOUBLE_EQ(one.lo(), 1);
  EXPECT_DOUBLE_EQ(one.hi(), 10);
}

}  // namespace
}  // namespace moe4d
