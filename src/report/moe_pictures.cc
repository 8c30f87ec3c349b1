// report/moe_pictures.cc — expert load per MoE layer: tokens / mean per expert and step as a
// heatmap, with the max/mean and min/mean ratios vs step below it.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "report/run_pictures.h"
#include "report/step_buckets.h"

namespace moe4d {

namespace {
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
}  // namespace

std::vector<int> moe_layers(const MetricsLog& log) {
  std::vector<int> layers;
  for (const StepMetrics& m : log.steps) {
    for (const ExpertLoad& l : m.expert_loads) {
      if (!l.tokens_per_expert.empty() && std::find(layers.begin(), layers.end(), l.layer) == layers.end()) {
        layers.push_back(l.layer);
      }
    }
  }
  std::sort(layers.begin(), layers.end());
  return layers;
}

std::string expert_load_picture(const MetricsLog& log, int layer) {
  std::vector<std::pair<int64_t, const ExpertLoad*>> loads;
  for (const StepMetrics& m : log.steps) {
    for (const ExpertLoad& l : m.expert_loads)
      if (l.layer == layer) loads.emplace_back(m.step, &l);
  }
  const size_t experts = loads.front().second->tokens_per_expert.size();
  std::vector<int64_t> step_numbers;
  for (const auto& [step, load] : loads) step_numbers.push_back(step);
  const StepBuckets grouped = bucket_steps(step_numbers, kMaxColumns);
  const int64_t per = grouped.per;
  const size_t columns = grouped.buckets.size();

  Heatmap map;
  map.title = fmt::format("MoE layer {}: tokens per expert / mean{}", layer,
                          per > 1 ? fmt::format(" (mean of {} steps per column)", per) : "");
  map.x_label = "step";
  map.y_label = "expert";
  map.value_label = "tokens / mean (1 = balanced)";
  map.scale = ColorScale::kDiverging;
  map.center = 1.0;
  map.ratio_scale = true;  // an expert with half the mean load is as far off as one with twice
  for (size_t e = 0; e < experts; ++e) map.row_labels.push_back(std::to_string(e));
  for (const StepBucket& bucket : grouped.buckets) map.column_labels.push_back(std::to_string(bucket.label_step));
  map.values.assign(experts * columns, kNaN);
  LineSeries max_ratio, min_ratio;
  max_ratio.name = "max / mean (imbalance)";
  min_ratio.name = "min / mean";
  std::vector<std::vector<double>> ratio(experts);
  for (size_t c = 0; c < columns; ++c) {
    for (auto& r : ratio) r.clear();
    for (size_t i = grouped.buckets[c].begin; i < grouped.buckets[c].end; ++i) {
      const auto& t = loads[i].second->tokens_per_expert;
      double sum = 0;
      for (double v : t) sum += v;
      const double mean = sum / double(experts);
      for (size_t e = 0; e < experts; ++e) ratio[e].push_back(mean > 0 ? t[e] / mean : kNaN);
      max_ratio.x.push_back(double(loads[i].first));
      max_ratio.y.push_back(loads[i].second->imbalance);
      min_ratio.x.push_back(double(loads[i].first));
      min_ratio.y.push_back(mean > 0 ? *std::min_element(t.begin(), t.end()) / mean : kNaN);
    }
    for (size_t e = 0; e < experts; ++e) map.values[e * columns + c] = mean_finite(ratio[e]);
  }
  // Rows of at least ~8 units up to 64 experts; the line panel below keeps a fixed height.
  const double map_h = std::clamp(130.0 + 9.0 * double(experts), 300.0, 720.0), line_h = 280;
  Svg svg(kPictureWidth, map_h + line_h);
  svg.title(fmt::format("Expert load, MoE layer {}", layer));
  draw_heatmap(svg, {0, 0, kPictureWidth, map_h}, map);
  LineChart lines = step_chart(fmt::format("MoE layer {}: load imbalance", layer), "tokens / mean tokens");
  lines.y_from_zero = true;
  lines.series = {std::move(max_ratio), std::move(min_ratio)};
  draw_line_chart(svg, {0, map_h, kPictureWidth, line_h}, lines);
  return svg.str();
}

// Fraction of [t0, t1] in which none of `spans` is running (their union, subtracted).

}  // namespace moe4d
