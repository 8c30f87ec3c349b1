// report/rank_times.h — "which machine is slow": every rank's step-compute time against the median.
//
// From the metrics' time.rank_compute_s (one value per world rank per step) and rank_hosts: each
// rank's median compute time over the steps, the slowest rank and its host against the median rank,
// and a picture (rank_compute.svg) — a rank x step heat map of compute time / the step's median over
// ranks (1 = typical; a host running someone else's job shows as a hot row, a one-off hiccup as a
// hot cell). Used by `moe4d report` and by `moe4d launch`'s summary. Pure; thread-safe.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "report/metrics_log.h"

namespace moe4d {

struct RankTimeSummary {
  int ranks = 0;          // 0: the log has no per-rank times
  int steps = 0;          // steps with per-rank times
  int slowest_rank = -1;
  std::string slowest_host;       // "" when the log names no hosts
  double slowest_median_s = 0;    // the slowest rank's median step-compute time
  double median_s = 0;            // the median over ranks of their medians
  double ratio = 0;               // slowest / median
  int slowest_steps = 0;          // steps in which the slowest rank was the slowest of all
};

RankTimeSummary summarize_rank_times(const MetricsLog& log);
// "slowest rank 3 on host n2: median step compute 12.4 ms, 1.42x the median rank (8.7 ms); slowest
// in 18 of 20 steps".
std::string describe_rank_times(const RankTimeSummary& summary);
nlohmann::json rank_times_json(const RankTimeSummary& summary);

// rank_compute.svg; "" when the log has no per-rank times.
std::string rank_compute_picture(const MetricsLog& log);

}  // namespace moe4d
