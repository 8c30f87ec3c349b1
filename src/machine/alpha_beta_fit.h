// machine/alpha_beta_fit.h — fits measured collective timings to the planner's alpha-beta form.
//
// The planner (plan/comm_model.h) times a measured collective over n ranks moving `bytes` as
//   time = latency + bus_factor(n) * bytes / bus_bandwidth
// with nccl-tests' bus factor (all-reduce 2(n-1)/n; reduce-scatter, all-gather, all-to-all (n-1)/n;
// send/recv 1). fit_alpha_beta finds latency >= 0 and bus_bandwidth > 0 from (bytes, seconds)
// samples of one collective and group size by least squares on the *relative* error
// (sum ((model - t) / t)^2): timings span five orders of magnitude from 1 KiB to 64 MiB, and an
// absolute fit would let the largest messages decide alone, leaving the latency (what TP's small
// all-reduces pay) to chance. Pure functions; used by machine/collective_survey.h.
#pragma once

#include <vector>

#include "plan/cluster_spec.h"

namespace moe4d {

struct TimingSample {
  double bytes = 0;    // the collective's full buffer, as plan/cluster_spec.h CollectiveSample defines it
  double seconds = 0;  // measured time of one call
};

struct AlphaBetaFit {
  double latency = 0;          // seconds, >= 0
  double bus_bandwidth = 0;    // bytes/s, > 0
  double max_relative_error = 0;     // over the samples, |model - t| / t
  double median_relative_error = 0;
};

// Model time of a fitted collective (the planner's formula).
double alpha_beta_seconds(const AlphaBetaFit& fit, Collective collective, int ranks, double bytes);

// One size regime of a piecewise fit: the fit holds from min_bytes up to the next regime's.
struct AlphaBetaRegime {
  double min_bytes = 0;
  AlphaBetaFit fit;
};

// A collective's timings rarely follow one line from 1 KiB to 64 MiB: small messages go through
// eager copies, large ones through rendezvous / single-copy transfers, and on CPUs messages past
// the last-level cache run at DRAM speed. fit_alpha_beta_regimes splits the samples (sorted by
// size) into at most `max_regimes` contiguous runs of at least `min_points` sizes, fits each with
// fit_alpha_beta, and keeps the fewest regimes whose worst relative error is within `tolerance`
// (else the split with the smallest worst error). A regime starts at the geometric mean of its first
// size and the previous regime's last size (the first regime at 0). Errors are over all samples.
struct PiecewiseAlphaBeta {
  std::vector<AlphaBetaRegime> regimes;  // by min_bytes
  double max_relative_error = 0;
  double median_relative_error = 0;
  const AlphaBetaFit& at(double bytes) const;  // the regime holding for `bytes`
};

PiecewiseAlphaBeta fit_alpha_beta_regimes(std::vector<TimingSample> samples, Collective collective, int ranks,
                                          int max_regimes = 3, int min_points = 3, double tolerance = 0.10);

// Fits `samples` (at least two distinct sizes, all seconds > 0) of `collective` over `ranks` ranks.
// A negative unconstrained latency is clamped to 0 and the bandwidth refitted; if the timings do not
// grow with size at all (pure noise), the bandwidth is taken from the largest sample alone.
// Throws moe4d::Error for fewer than two distinct sizes or a non-positive time.
AlphaBetaFit fit_alpha_beta(const std::vector<TimingSample>& samples, Collective collective, int ranks);

}  // namespace moe4d
