// report/health_pictures.cc — what people who tune a job watch besides the loss: memory per rank,
// the MoE auxiliary losses and dropped tokens, and the communication share of the step per group
// against the articles' guideline (communication under 15% of the step).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "report/run_pictures.h"

namespace moe4d {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// The unit that keeps the largest value between 1 and 1024.
std::pair<double, const char*> bytes_unit(double largest) {
  if (largest >= 1024.0 * 1024 * 1024) return {1024.0 * 1024 * 1024, "GiB"};
  if (largest >= 1024.0 * 1024) return {1024.0 * 1024, "MiB"};
  return {1024.0, "KiB"};
}
constexpr double kCommGuideline = 15.0;  // percent of the step (the articles' msprof rule of thumb)

const std::vector<std::pair<std::string, std::string>>& group_names() {
  static const std::vector<std::pair<std::string, std::string>> names = {
      {"tp", "TP"}, {"ep", "EP"}, {"dp", "DP"}, {"pp", "PP"}, {"other", "other"}};
  return names;
}

}  // namespace

std::string memory_picture(const MetricsLog& log) {
  const StepMetrics* last = nullptr;
  for (const StepMetrics& m : log.steps)
    if (!m.memory.empty()) last = &m;
  if (!last) return {};
  const size_t ranks = last->memory.size();
  double largest = 0;
  for (const StepMetrics& m : log.steps)
    for (const RankMemoryRecord& x : m.memory)
      largest = std::max({largest, x.params + x.grads + x.optimizer + x.activations, x.device});
  const auto [kGiB, unit] = bytes_unit(largest);
  const double panel_h = 320;
  Svg svg(kPictureWidth, 2 * panel_h);
  svg.title("Memory per rank");
  // Top: what each rank holds at the last step, stacked by kind.
  StackedBars bars;
  bars.title = fmt::format("Memory per rank at step {} (peak activations; {})", last->step, unit);
  bars.x_label = "rank";
  bars.y_label = unit;
  bars.integer_x = true;
  std::vector<double> params, grads, optimizer, activations;
  double device = 0;
  for (size_t r = 0; r < ranks; ++r) {
    const RankMemoryRecord& m = last->memory[r];
    bars.x.push_back(double(r));
    params.push_back(m.params / kGiB);
    grads.push_back(m.grads / kGiB);
    optimizer.push_back(m.optimizer / kGiB);
    activations.push_back(m.activations / kGiB);
    device = std::max(device, m.device);
  }
  bars.components = {{"parameters", params, palette_color(0)},
                     {"gradients", grads, palette_color(1)},
                     {"optimizer state", optimizer, palette_color(2)},
                     {"activations (peak)", activations, palette_color(3)}};
  if (device > 0) bars.title += fmt::format(", device memory {:.1f} {}", device / kGiB, unit);
  draw_stacked_bars(svg, {0, 0, kPictureWidth, panel_h}, bars);
  // Bottom: each rank's total over the steps (against the device memory when known).
  LineChart over_time = step_chart("Memory per rank over steps (params + grads + optimizer + peak activations)", unit);
  over_time.y_from_zero = true;
  for (size_t r = 0; r < ranks && r < 16; ++r) {
    LineSeries s;
    s.name = fmt::format("rank {}", r);
    for (const StepMetrics& m : log.steps) {
      if (m.memory.size() <= r) continue;
      const RankMemoryRecord& x = m.memory[r];
      s.x.push_back(double(m.step));
      s.y.push_back((x.params + x.grads + x.optimizer + x.activations) / kGiB);
    }
    over_time.series.push_back(std::move(s));
  }
  if (device > 0) {
    LineSeries d;
    d.name = "device memory";
    d.color = "#d62728";
    for (const StepMetrics& m : log.steps) {
      d.x.push_back(double(m.step));
      d.y.push_back(device / kGiB);
    }
    over_time.series.push_back(std::move(d));
  }
  draw_line_chart(svg, {0, panel_h, kPictureWidth, panel_h}, over_time);
  return svg.str();
}

std::string moe_losses_picture(const MetricsLog& log) {
  LineSeries aux = series_of(log, "aux loss", &StepMetrics::aux_loss, true);
  LineSeries z = series_of(log, "z loss", &StepMetrics::z_loss, true);
  LineSeries dropped = series_of(log, "dropped fraction", &StepMetrics::dropped_fraction, true);
  if (!has_data(aux) && !has_data(z) && !has_data(dropped)) return {};
  for (double& v : dropped.y) v *= 100;
  const double panel_h = 300;
  Svg svg(kPictureWidth, 2 * panel_h);
  svg.title("MoE auxiliary losses and dropped tokens");
  LineChart losses = step_chart("Router losses (unscaled, sum over MoE layers)", "loss");
  if (has_data(aux)) losses.series.push_back(std::move(aux));
  if (has_data(z)) losses.series.push_back(std::move(z));
  draw_line_chart(svg, {0, 0, kPictureWidth, panel_h}, losses);
  LineChart drop = step_chart("Routed token slots dropped by the capacity limit", "% of routed slots");
  drop.y_from_zero = true;
  drop.series.push_back(std::move(dropped));
  draw_line_chart(svg, {0, panel_h, kPictureWidth, panel_h}, drop);
  return svg.str();
}

std::string comm_share_picture(const MetricsLog& log) {
  LineChart chart = step_chart(fmt::format("Exposed communication per group, % of the step (guideline: under {:.0f}%)",
                                           kCommGuideline),
                               "% of step time");
  chart.y_from_zero = true;
  if (const std::string note = oversubscription_note(log); !note.empty()) chart.title += " — " + note;
  size_t k = 0;
  for (const auto& [group, name] : group_names()) {
    ++k;
    LineSeries s;
    s.name = name;
    s.color = palette_color(k);
    bool any = false;
    for (const StepMetrics& m : log.steps) {
      const auto it = m.comm_exposed_by_group.find(group);
      const bool ok = it != m.comm_exposed_by_group.end() && std::isfinite(m.step_s) && m.step_s > 0;
      s.x.push_back(double(m.step));
      s.y.push_back(ok ? 100 * it->second / m.step_s : kNaN);
      any = any || (ok && it->second > 0);
    }
    if (any) chart.series.push_back(std::move(s));
  }
  if (chart.series.empty()) return {};
  LineSeries guide;
  guide.name = fmt::format("{:.0f}% guideline", kCommGuideline);
  guide.color = "#7f7f7f";
  guide.x = {double(log.steps.front().step), double(log.steps.back().step)};
  guide.y = {kCommGuideline, kCommGuideline};
  chart.series.push_back(std::move(guide));
  return line_chart(chart);
}

}  // namespace moe4d
