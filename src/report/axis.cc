// report/axis.cc — nice ticks, tick labels and the linear/log axis maps.
#include "report/axis.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "core/check.h"

namespace moe4d {

namespace {

// floor(log10(v)) with a little slack, so that 1000 is exponent 3 even if log10 rounds below.
int exponent_of(double v) { return static_cast<int>(std::floor(std::log10(v) + 1e-9)); }

std::string format_log_tick(double value) {
  const int k = exponent_of(value);
  if (k >= -3 && k <= 4) return fmt::format("{:.{}f}", value, std::max(0, -k));
  const double mantissa = std::round(value / std::pow(10.0, k));
  return mantissa == 1.0 ? fmt::format("1e{}", k) : fmt::format("{:.0f}e{}", mantissa, k);
}

}  // namespace

NiceTicks nice_ticks(double lo, double hi, int target_count, double min_step) {
  MOE4D_CHECK_GT(target_count, 0);
  if (!std::isfinite(lo) || !std::isfinite(hi)) {
    lo = 0;
    hi = 1;
  }
  if (lo > hi) std::swap(lo, hi);
  if (hi == lo) {
    // A constant series still deserves a readable axis: a few percent either side of the value.
    const double pad = lo == 0 ? 1.0 : std::abs(lo) * 0.05;
    lo -= pad;
    hi += pad;
  }
  const double rough = std::max((hi - lo) / target_count, min_step);
  const double magnitude = std::pow(10.0, exponent_of(rough));
  double step = 10 * magnitude;
  for (double m : {1.0, 2.0, 5.0}) {
    if (m * magnitude >= rough * (1 - 1e-9)) {
      step = m * magnitude;
      break;
    }
  }
  // Whole multiples of the step; the slack keeps a bound that is already a tick from moving out.
  const double first = std::floor(lo / step + 1e-9);
  const double last = std::ceil(hi / step - 1e-9);
  NiceTicks out;
  out.step = step;
  for (double k = first; k <= last + 0.5; k += 1) out.ticks.push_back(k * step);
  out.lo = out.ticks.front();
  out.hi = out.ticks.back();
  return out;
}

std::string format_tick(double value, double step, double max_abs) {
  MOE4D_CHECK_GT(step, 0.0);
  if (std::abs(value) < step * 1e-6) return "0";  // no "-0" or 1e-17 from accumulated rounding
  const int step_exp = exponent_of(step);
  if (max_abs >= 1e4) {
    static constexpr const char* kSuffix[] = {"", "k", "M", "G", "T"};
    const int group = std::min(4, exponent_of(max_abs) / 3);
    const int decimals = std::max(0, group * 3 - step_exp);
    return fmt::format("{:.{}f}{}", value / std::pow(1000.0, group), decimals, kSuffix[group]);
  }
  if (max_abs < 1e-3) {
    const int e = exponent_of(max_abs);
    const int decimals = std::max(0, e - step_exp);
    return fmt::format("{:.{}f}e{}", value / std::pow(10.0, e), decimals, e);
  }
  return fmt::format("{:.{}f}", value, std::max(0, -step_exp));
}

Axis Axis::linear(double data_lo, double data_hi, int target_count, bool integer_steps, bool tight) {
  const NiceTicks nice = nice_ticks(data_lo, data_hi, target_count, integer_steps ? 1.0 : 0.0);
  Axis axis;
  axis.lo_ = nice.lo;
  axis.hi_ = nice.hi;
  axis.ticks_ = nice.ticks;
  if (tight && std::isfinite(data_lo) && std::isfinite(data_hi) && data_lo < data_hi) {
    axis.lo_ = data_lo;
    axis.hi_ = data_hi;
    const double slack = 1e-9 * nice.step;
    std::erase_if(axis.ticks_, [&](double t) { return t < data_lo - slack || t > data_hi + slack; });
  }
  double max_abs = 0;
  for (double t : axis.ticks_) max_abs = std::max(max_abs, std::abs(t));
  for (double t : axis.ticks_) axis.labels_.push_back(format_tick(t, nice.step, max_abs));
  return axis;
}

Axis Axis::log10(double data_lo, double data_hi) {
  MOE4D_CHECK_MSG(data_lo > 0 && data_hi > 0, "log axis over [{}, {}]", data_lo, data_hi);
  if (data_lo > data_hi) std::swap(data_lo, data_hi);
  const int k_lo = exponent_of(data_lo);
  int k_hi = static_cast<int>(std::ceil(std::log10(data_hi) - 1e-9));
  if (k_hi <= k_lo) k_hi = k_lo + 1;
  Axis axis;
  axis.log_ = true;
  axis.lo_ = std::pow(10.0, k_lo);
  axis.hi_ = std::pow(10.0, k_hi);
  // Over a short range decades alone would give two or three ticks; 2x and 5x fill in.
  const bool fill = k_hi - k_lo <= 2;
  for (int k = k_lo; k <= k_hi; ++k) {
    const double decade = std::pow(10.0, k);
    axis.ticks_.push_back(decade);
    if (fill && k < k_hi) {
      axis.ticks_.push_back(2 * decade);
      axis.ticks_.push_back(5 * decade);
    }
  }
  for (double t : axis.ticks_) axis.labels_.push_back(format_log_tick(t));
  return axis;
}

double Axis::fraction(double value) const {
  if (log_) return (std::log10(value) - std::log10(lo_)) / (std::log10(hi_) - std::log10(lo_));
  return (value - lo_) / (hi_ - lo_);
}

}  // namespace moe4d
