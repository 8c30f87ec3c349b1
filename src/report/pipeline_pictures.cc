// report/pipeline_pictures.cc — pipeline parallelism: the schedule of one step as a Gantt chart per
// stage, and the measured pipeline bubble against the schedule's formula over the run.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "report/run_pictures.h"

namespace moe4d {

namespace {

// Fraction of [t0, t1] in which none of `spans` is running (their union, subtracted).
double idle_fraction(std::vector<std::pair<double, double>> spans, double t0, double t1) {
  if (t1 <= t0) return 0;
  std::sort(spans.begin(), spans.end());
  double busy = 0, cursor = t0;
  for (auto [s, e] : spans) {
    s = std::max(s, cursor);
    if (e > s) {
      busy += e - s;
      cursor = e;
    }
  }
  return 1 - busy / (t1 - t0);
}

TimelineKind kind_of(const std::string& kind) {
  if (kind == "forward") return TimelineKind::kForward;
  if (kind == "backward") return TimelineKind::kBackward;
  if (kind == "idle") return TimelineKind::kIdle;
  return TimelineKind::kCommunication;  // send, recv (metrics_log.cc accepts no other kind)
}

// "Pipeline schedule at step 200: 1f1b, 4 stages x 8 micro-batches, bubble 27% (formula 27%)".
std::string timeline_title(const StepMetrics& m) {
  std::string title = fmt::format("Pipeline schedule at step {}", m.step);
  std::vector<std::string> facts;
  if (!m.pipeline_schedule.empty()) facts.push_back(m.pipeline_schedule);
  if (m.pipeline_stages > 0 && m.pipeline_micro_batches > 0) {
    std::string shape = fmt::format("{} stages x {} micro-batches", m.pipeline_stages, m.pipeline_micro_batches);
    if (m.pipeline_chunks > 1) shape += fmt::format(" x {} chunks", m.pipeline_chunks);
    facts.push_back(shape);
  }
  if (std::isfinite(m.bubble_measured)) {
    std::string bubble = fmt::format("bubble {:.0f}%", 100 * m.bubble_measured);
    if (std::isfinite(m.bubble_formula)) bubble += fmt::format(" (formula {:.0f}%)", 100 * m.bubble_formula);
    facts.push_back(bubble);
  }
  for (size_t i = 0; i < facts.size(); ++i) title += (i == 0 ? ": " : ", ") + facts[i];
  return title;
}

}  // namespace

std::string pipeline_timeline_picture(const MetricsLog& log) {
  const StepMetrics* last = nullptr;  // the last recorded schedule: past warm-up, most representative
  for (const StepMetrics& m : log.steps) {
    if (!m.pipeline_timeline.empty()) last = &m;
  }
  if (!last) return {};
  int stages = 0;
  bool chunked = false;
  double t0 = std::numeric_limits<double>::infinity(), t1 = -t0;
  for (const PipelineEvent& e : last->pipeline_timeline) {
    stages = std::max(stages, e.stage + 1);
    chunked = chunked || e.chunk > 0;
    t0 = std::min(t0, std::min(e.start_s, e.end_s));
    t1 = std::max(t1, std::max(e.start_s, e.end_s));
  }
  Timeline chart;
  chart.title = timeline_title(*last);
  chart.x_label = "time since the step started (s)";
  std::vector<std::vector<std::pair<double, double>>> busy(stages);
  for (const PipelineEvent& e : last->pipeline_timeline) {
    const TimelineKind kind = kind_of(e.kind);
    if (kind != TimelineKind::kIdle)
      busy[e.stage].emplace_back(std::min(e.start_s, e.end_s), std::max(e.start_s, e.end_s));
    // Interleaved schedules run each micro-batch once per chunk: "3c1" is micro-batch 3, chunk 1.
    std::string label;
    if (e.micro_batch >= 0)
      label = chunked ? fmt::format("{}c{}", e.micro_batch, std::max(0, e.chunk)) : std::to_string(e.micro_batch);
    chart.boxes.push_back({.row = e.stage, .start = e.start_s, .end = e.end_s, .label = label, .kind = kind});
  }
  for (int s = 0; s < stages; ++s) {
    chart.rows.push_back(fmt::format("stage {} (idle {:.0f}%)", s, 100 * idle_fraction(busy[s], t0, t1)));
  }
  return timeline(chart);
}

std::string pipeline_bubble_picture(const MetricsLog& log) {
  // One stage has no bubble to speak of (its "idle" is only the last receive); not worth a picture.
  const bool pipelined = std::any_of(log.steps.begin(), log.steps.end(), [](const StepMetrics& m) {
    return m.pipeline_stages > 1 || (m.pipeline_stages == 0 && std::isfinite(m.bubble_measured));
  });
  if (!pipelined) return {};
  LineSeries measured = series_of(log, "measured", &StepMetrics::bubble_measured, /*only_present=*/true);
  if (!has_data(measured)) return {};
  LineChart chart = step_chart("Pipeline bubble: idle share of the stages", "idle fraction of the step");
  chart.y_from_zero = true;
  chart.series.push_back(std::move(measured));
  LineSeries formula = series_of(log, "schedule formula", &StepMetrics::bubble_formula, /*only_present=*/true);
  formula.color = "#bab0ac";
  if (has_data(formula)) chart.series.push_back(std::move(formula));
  return line_chart(chart);
}

}  // namespace moe4d
