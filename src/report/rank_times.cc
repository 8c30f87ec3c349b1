#include "report/rank_times.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "report/charts.h"
#include "report/run_pictures.h"
#include "report/step_buckets.h"

namespace moe4d {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

double median(std::vector<double> v) {
  v.erase(std::remove_if(v.begin(), v.end(), [](double x) { return !std::isfinite(x); }), v.end());
  if (v.empty()) return kNaN;
  const size_t mid = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + mid, v.end());
  if (v.size() % 2 == 1) return v[mid];
  const double upper = v[mid];
  return 0.5 * (upper + *std::max_element(v.begin(), v.begin() + mid));
}

// The steps that carry per-rank times for the most common rank count (a resumed run on another
// world size would otherwise mix rows).
int rank_count(const MetricsLog& log) {
  size_t ranks = 0;
  for (const StepMetrics& m : log.steps) ranks = std::max(ranks, m.rank_compute_s.size());
  return static_cast<int>(ranks);
}

std::vector<std::string> hosts_of(const MetricsLog& log, int ranks) {
  for (auto it = log.steps.rbegin(); it != log.steps.rend(); ++it)
    if (int(it->rank_hosts.size()) == ranks) return it->rank_hosts;
  return {};
}

}  // namespace

RankTimeSummary summarize_rank_times(const MetricsLog& log) {
  RankTimeSummary s;
  const int ranks = rank_count(log);
  if (ranks == 0) return s;
  std::vector<std::vector<double>> per_rank(ranks);
  std::vector<int> slowest_count(ranks, 0);
  for (const StepMetrics& m : log.steps) {
    if (int(m.rank_compute_s.size()) != ranks) continue;
    ++s.steps;
    int worst = 0;
    for (int r = 0; r < ranks; ++r) {
      per_rank[r].push_back(m.rank_compute_s[r]);
      if (m.rank_compute_s[r] > m.rank_compute_s[worst]) worst = r;
    }
    ++slowest_count[worst];
  }
  std::vector<double> medians(ranks);
  for (int r = 0; r < ranks; ++r) medians[r] = median(per_rank[r]);
  s.ranks = ranks;
  s.slowest_rank = 0;
  for (int r = 1; r < ranks; ++r)
    if (medians[r] > medians[s.slowest_rank]) s.slowest_rank = r;
  s.slowest_median_s = medians[s.slowest_rank];
  s.median_s = median(medians);
  s.ratio = s.median_s > 0 ? s.slowest_median_s / s.median_s : kNaN;
  s.slowest_steps = slowest_count[s.slowest_rank];
  const std::vector<std::string> hosts = hosts_of(log, ranks);
  if (!hosts.empty()) s.slowest_host = hosts[s.slowest_rank];
  return s;
}

std::string describe_rank_times(const RankTimeSummary& s) {
  if (s.ranks == 0) return "no per-rank step times in the metrics";
  return fmt::format("slowest rank {}{}: median step compute {:.1f} ms, {:.2f}x the median rank ({:.1f} ms); slowest "
                     "in {} of {} steps",
                     s.slowest_rank, s.slowest_host.empty() ? "" : " on host " + s.slowest_host,
                     s.slowest_median_s * 1e3, s.ratio, s.median_s * 1e3, s.slowest_steps, s.steps);
}

nlohmann::json rank_times_json(const RankTimeSummary& s) {
  return {{"ranks", s.ranks},
          {"steps", s.steps},
          {"rank", s.slowest_rank},
          {"host", s.slowest_host},
          {"median_compute_s", s.slowest_median_s},
          {"median_rank_compute_s", s.median_s},
          {"ratio", s.ratio},
          {"slowest_in_steps", s.slowest_steps}};
}

std::string rank_compute_picture(const MetricsLog& log) {
  const int ranks = rank_count(log);
  if (ranks == 0) return "";
  std::vector<const StepMetrics*> steps;
  std::vector<int64_t> numbers;
  for (const StepMetrics& m : log.steps)
    if (int(m.rank_compute_s.size()) == ranks) {
      steps.push_back(&m);
      numbers.push_back(m.step);
    }
  const StepBuckets grouped = bucket_steps(numbers, kMaxColumns);
  const size_t columns = grouped.buckets.size();
  const std::vector<std::string> hosts = hosts_of(log, ranks);
  Heatmap map;
  map.title = fmt::format("Step compute time per rank / the step's median rank{}",
                          grouped.per > 1 ? fmt::format(" (mean of {} steps per column)", grouped.per) : "");
  map.x_label = "step";
  map.y_label = "rank";
  map.value_label = "compute / median (1 = typical)";
  map.scale = ColorScale::kDiverging;
  map.center = 1.0;
  map.ratio_scale = true;
  for (int r = 0; r < ranks; ++r)
    map.row_labels.push_back(hosts.empty() ? std::to_string(r) : fmt::format("{} {}", r, hosts[r]));
  for (const StepBucket& b : grouped.buckets) map.column_labels.push_back(std::to_string(b.label_step));
  map.values.assign(size_t(ranks) * columns, kNaN);
  std::vector<std::vector<double>> ratio(ranks);
  for (size_t c = 0; c < columns; ++c) {
    for (auto& v : ratio) v.clear();
    for (size_t i = grouped.buckets[c].begin; i < grouped.buckets[c].end; ++i) {
      const std::vector<double>& t = steps[i]->rank_compute_s;
      const double mid = median(t);
      for (int r = 0; r < ranks; ++r) ratio[r].push_back(mid > 0 ? t[r] / mid : kNaN);
    }
    for (int r = 0; r < ranks; ++r) map.values[size_t(r) * columns + c] = mean_finite(ratio[r]);
  }
  map.width = kPictureWidth;
  map.height = std::clamp(130.0 + 12.0 * ranks, 300.0, 900.0);
  return heatmap(map);
}

}  // namespace moe4d
