// report/axis.h — numeric chart axes: "nice" tick placement, tick labels and data-to-position maps.
//
// Linear axes put ticks at multiples of 1, 2 or 5 x 10^k and widen the data range to whole ticks, so
// the plot starts and ends on a labelled gridline; log axes put ticks on decades (plus 2x and 5x
// when the range spans at most two decades). Pure value types; thread-safe.
#pragma once

#include <string>
#include <vector>

namespace moe4d {

struct NiceTicks {
  double lo = 0;              // first tick (<= the data minimum)
  double hi = 0;              // last tick (>= the data maximum)
  double step = 0;            // 1, 2 or 5 x 10^k
  std::vector<double> ticks;  // lo, lo + step, ..., hi
};

// Ticks covering [lo, hi] in about `target_count` intervals, the interval being the smallest
// 1/2/5 x 10^k not below (hi - lo) / target_count nor below `min_step` (1 keeps steps whole). An
// empty range (lo == hi) is widened around the value; non-finite bounds give [0, 1].
NiceTicks nice_ticks(double lo, double hi, int target_count = 5, double min_step = 0);

// A tick label that shows just the digits the step needs: "0.5", "12", "12.5k" (|values| >= 1e4 get
// a k/M/G suffix), "2e-4" (|values| < 1e-3 share a power of ten). `max_abs` is the largest |tick|
// on the axis, so that all labels of one axis use one notation.
std::string format_tick(double value, double step, double max_abs);

class Axis {
 public:
  // A linear axis over the data range [data_lo, data_hi]. By default the axis is widened to the
  // enclosing ticks (value axes start and end on a gridline); `tight` keeps exactly the data range
  // and only the ticks inside it (x axes of steps or time, where widening would leave empty space).
  static Axis linear(double data_lo, double data_hi, int target_count = 5, bool integer_steps = false,
                     bool tight = false);
  // A base-10 log axis; both bounds must be > 0.
  static Axis log10(double data_lo, double data_hi);

  double lo() const { return lo_; }
  double hi() const { return hi_; }
  bool is_log() const { return log_; }
  // Position of `value` along the axis: 0 at lo(), 1 at hi() (outside [0, 1] for values outside).
  double fraction(double value) const;
  const std::vector<double>& ticks() const { return ticks_; }
  const std::vector<std::string>& tick_labels() const { return labels_; }

 private:
  double lo_ = 0, hi_ = 1;
  bool log_ = false;
  std::vector<double> ticks_;
  std::vector<std::string> labels_;
};

}  // namespace moe4d
