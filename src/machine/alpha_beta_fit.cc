// machine/alpha_beta_fit.cc — weighted least squares for latency + factor * bytes / bandwidth.
#include "machine/alpha_beta_fit.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <set>

#include "core/error.h"
#include "plan/comm_model.h"

namespace moe4d {

double alpha_beta_seconds(const AlphaBetaFit& fit, Collective collective, int ranks, double bytes) {
  return fit.latency + bus_factor(collective, ranks) * bytes / fit.bus_bandwidth;
}

AlphaBetaFit fit_alpha_beta(const std::vector<TimingSample>& samples, Collective collective, int ranks) {
  std::set<double> sizes;
  for (const TimingSample& s : samples) {
    if (!(s.seconds > 0) || !(s.bytes > 0))
      fail("alpha-beta fit of {} over {} ranks: every sample needs positive bytes and seconds, got {} B in {} s",
           collective_name(collective), ranks, s.bytes, s.seconds);
    sizes.insert(s.bytes);
  }
  if (sizes.size() < 2)
    fail("alpha-beta fit of {} over {} ranks: needs samples at two or more message sizes, got {}",
         collective_name(collective), ranks, sizes.size());
  const double factor = bus_factor(collective, ranks);
  // Minimise sum ((a + b x_i) / t_i - 1)^2 with x_i = factor * bytes_i, b = 1 / bus_bandwidth:
  // a linear least-squares problem in (a, b) with rows (1/t_i, x_i/t_i) and target 1.
  double s_uu = 0, s_uv = 0, s_vv = 0, s_u = 0, s_v = 0;
  for (const TimingSample& s : samples) {
    const double u = 1.0 / s.seconds;
    const double v = factor * s.bytes / s.seconds;
    s_uu += u * u;
    s_uv += u * v;
    s_vv += v * v;
    s_u += u;
    s_v += v;
  }
  const double det = s_uu * s_vv - s_uv * s_uv;
  double a = det > 0 ? (s_u * s_vv - s_v * s_uv) / det : -1;
  double b = det > 0 ? (s_uu * s_v - s_uv * s_u) / det : -1;
  if (a < 0) {  // latency cannot be negative: best b with a = 0
    a = 0;
    b = s_v / s_vv;
  }
  if (!(b > 0)) {  // no growth with size: the largest message alone sets the bandwidth
    const auto largest = std::max_element(samples.begin(), samples.end(),
                                          [](const TimingSample& x, const TimingSample& y) { return x.bytes < y.bytes; });
    b = largest->seconds / (factor * largest->bytes);
    a = 0;
  }
  AlphaBetaFit fit;
  fit.latency = a;
  fit.bus_bandwidth = 1.0 / b;
  std::vector<double> errors;
  for (const TimingSample& s : samples)
    errors.push_back(std::fabs(alpha_beta_seconds(fit, collective, ranks, s.bytes) - s.seconds) / s.seconds);
  std::sort(errors.begin(), errors.end());
  fit.max_relative_error = errors.back();
  fit.median_relative_error = errors[errors.size() / 2];
  return fit;
}

const AlphaBetaFit& PiecewiseAlphaBeta::at(double bytes) const {
  const AlphaBetaRegime* pick = &regimes.front();
  for (const AlphaBetaRegime& r : regimes)
    if (r.min_bytes <= bytes) pick = &r;
  return pick->fit;
}

namespace {

// Errors of `fit` over every sample.
void score(PiecewiseAlphaBeta& fit, const std::vector<TimingSample>& samples, Collective collective, int ranks) {
  std::vector<double> errors;
  for (const TimingSample& s : samples)
    errors.push_back(std::fabs(alpha_beta_seconds(fit.at(s.bytes), collective, ranks, s.bytes) - s.seconds) / s.seconds);
  std::sort(errors.begin(), errors.end());
  fit.max_relative_error = errors.back();
  fit.median_relative_error = errors[errors.size() / 2];
}

// One fit per run [cuts[r], cuts[r + 1]) of the size-sorted samples, scored over all of them.
PiecewiseAlphaBeta fit_runs(const std::vector<TimingSample>& sorted, const std::vector<size_t>& cuts,
                            Collective collective, int ranks) {
  PiecewiseAlphaBeta out;
  for (size_t r = 0; r + 1 < cuts.size(); ++r) {
    const std::vector<TimingSample> run(sorted.begin() + cuts[r], sorted.begin() + cuts[r + 1]);
    const double min_bytes = r == 0 ? 0 : std::sqrt(sorted[cuts[r] - 1].bytes * sorted[cuts[r]].bytes);
    out.regimes.push_back({min_bytes, fit_alpha_beta(run, collective, ranks)});
  }
  score(out, sorted, collective, ranks);
  return out;
}

}  // namespace

PiecewiseAlphaBeta fit_alpha_beta_regimes(std::vector<TimingSample> samples, Collective collective, int ranks,
                                          int max_regimes, int min_points, double tolerance) {
  std::sort(samples.begin(), samples.end(), [](const TimingSample& a, const TimingSample& b) { return a.bytes < b.bytes; });
  const size_t n = samples.size();
  const size_t run = static_cast<size_t>(std::max(2, min_points));
  PiecewiseAlphaBeta best = fit_runs(samples, {0, n}, collective, ranks);  // validates the samples
  PiecewiseAlphaBeta best_overall = best;
  for (int regimes = 2; regimes <= max_regimes && best.max_relative_error > tolerance; ++regimes) {
    // Every placement of regimes - 1 cuts leaving runs of at least `run` sizes (17 sizes, 3 regimes:
    // about a hundred small fits).
    std::vector<size_t> cuts(regimes + 1, 0);
    cuts.back() = n;
    PiecewiseAlphaBeta best_here;
    bool found = false;
    std::function<void(int, size_t)> place = [&](int index, size_t from) {
      if (index == regimes) {
        if (n - cuts[index - 1] < run) return;
        PiecewiseAlphaBeta fit = fit_runs(samples, cuts, collective, ranks);
        if (!found || fit.max_relative_error < best_here.max_relative_error) best_here = fit;
        found = true;
        return;
      }
      for (size_t cut = from + run; cut + run <= n; ++cut) {
        cuts[index] = cut;
        place(index + 1, cut);
      }
    };
    place(1, 0);
    if (!found) break;
    best = best_here;
    if (best.max_relative_error < best_overall.max_relative_error) best_overall = best;
  }
  return best.max_relative_error <= tolerance ? best : best_overall;
}

}  // namespace moe4d
