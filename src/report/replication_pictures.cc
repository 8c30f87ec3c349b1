// report/replication_pictures.cc — expert replication per MoE layer (docs/expert_replication.md):
// the busiest EP rank's rows over the mean with and without the replicas, step by step, and the
// replica map of the last recorded step (which EP rank holds a copy of which expert).
#include <fmt/format.h>

#include <algorithm>
#include <limits>

#include "report/run_pictures.h"

namespace moe4d {

std::vector<int> replicated_layers(const MetricsLog& log) {
  std::vector<int> layers;
  for (const StepMetrics& m : log.steps)
    for (const ReplicaLoad& r : m.replica_loads)
      if (std::find(layers.begin(), layers.end(), r.layer) == layers.end()) layers.push_back(r.layer);
  std::sort(layers.begin(), layers.end());
  return layers;
}

std::string replication_picture(const MetricsLog& log, int layer) {
  LineSeries with, without;
  with.name = "busiest EP rank / mean, with replicas";
  without.name = "busiest EP rank / mean, without (same routing)";
  const ReplicaLoad* last = nullptr;
  for (const StepMetrics& m : log.steps)
    for (const ReplicaLoad& r : m.replica_loads) {
      if (r.layer != layer) continue;
      with.x.push_back(double(m.step));
      with.y.push_back(r.max_mean);
      without.x.push_back(double(m.step));
      without.y.push_back(r.max_mean_without);
      last = &r;
    }
  if (!last) return {};
  const double line_h = 300;
  const size_t ranks = last->placement.size();
  int experts = 0;
  for (const auto& slots : last->placement)
    for (int e : slots) experts = std::max(experts, e + 1);
  const double map_h = ranks > 0 ? std::clamp(130.0 + 9.0 * experts, 260.0, 720.0) : 0;
  Svg svg(kPictureWidth, line_h + map_h);
  svg.title(fmt::format("Expert replication, MoE layer {}", layer));
  LineChart lines = step_chart(fmt::format("MoE layer {}: EP-rank load with and without replicas", layer),
                               "rows of the busiest EP rank / mean");
  lines.y_from_zero = true;
  lines.series = {std::move(without), std::move(with)};
  draw_line_chart(svg, {0, 0, kPictureWidth, line_h}, lines);
  if (ranks > 0) {
    // Copies per (expert, EP rank): 1 = the home or one replica; the home slot is not marked apart.
    Heatmap map;
    map.title = fmt::format("replica map after the last step (copies of each expert on each EP rank)");
    map.x_label = "EP rank";
    map.y_label = "expert";
    map.value_label = "copies";
    map.scale = ColorScale::kSequential;
    for (int e = 0; e < experts; ++e) map.row_labels.push_back(std::to_string(e));
    for (size_t r = 0; r < ranks; ++r) map.column_labels.push_back(std::to_string(r));
    map.values.assign(size_t(experts) * ranks, 0.0);
    for (size_t r = 0; r < ranks; ++r)
      for (int e : last->placement[r]) map.values[size_t(e) * ranks + r] += 1.0;
    draw_heatmap(svg, {0, line_h, kPictureWidth, map_h}, map);
  }
  return svg.str();
}

}  // namespace moe4d
