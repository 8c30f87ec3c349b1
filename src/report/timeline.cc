// report/timeline.cc — Gantt timelines (charts.h), e.g. which pipeline stage ran which micro-batch
// when. Each row gets a light band, so that the gaps between boxes — idle time — stand out.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/check.h"
#include "report/charts.h"

namespace moe4d {

namespace {

constexpr double kRowHeight = 28.0;
constexpr double kBoxFontSize = 10.0;
constexpr TimelineKind kKinds[] = {TimelineKind::kForward, TimelineKind::kBackward, TimelineKind::kCommunication,
                                   TimelineKind::kIdle};

}  // namespace

std::string timeline_kind_color(TimelineKind kind) {
  switch (kind) {
    case TimelineKind::kForward: return "#4e79a7";
    case TimelineKind::kBackward: return "#f28e2b";
    case TimelineKind::kCommunication: return "#b07aa1";
    case TimelineKind::kIdle: return "#d9d9d9";
  }
  return "#000000";
}

std::string timeline_kind_name(TimelineKind kind) {
  switch (kind) {
    case TimelineKind::kForward: return "forward";
    case TimelineKind::kBackward: return "backward";
    case TimelineKind::kCommunication: return "communication";
    case TimelineKind::kIdle: return "idle";
  }
  return "?";
}

double timeline_auto_height(const Timeline& timeline) {
  // Title, legend and x axis take ~110 units; each row one band.
  return 110 + kRowHeight * double(std::max<size_t>(1, timeline.rows.size()));
}

void draw_timeline(Svg& svg, const Frame& panel, const Timeline& timeline) {
  const size_t rows = timeline.rows.size();
  double t_lo = std::numeric_limits<double>::infinity(), t_hi = -t_lo;
  for (const TimelineBox& box : timeline.boxes) {
    MOE4D_CHECK_MSG(box.row >= 0 && size_t(box.row) < rows, "timeline box row {} of {} rows", box.row, rows);
    if (!std::isfinite(box.start) || !std::isfinite(box.end)) continue;
    t_lo = std::min(t_lo, std::min(box.start, box.end));
    t_hi = std::max(t_hi, std::max(box.start, box.end));
  }
  if (!(t_lo <= t_hi)) {
    t_lo = 0;
    t_hi = 1;
  }
  const Axis x_axis = Axis::linear(t_lo, t_hi, 8, /*integer_steps=*/false, /*tight=*/true);

  PanelLayout layout;
  layout.title = timeline.title;
  layout.x_label = timeline.x_label;
  for (TimelineKind kind : kKinds) {
    const bool present = std::any_of(timeline.boxes.begin(), timeline.boxes.end(),
                                     [kind](const TimelineBox& b) { return b.kind == kind; });
    if (present) layout.legend.push_back({timeline_kind_name(kind), timeline_kind_color(kind), SwatchKind::kBox});
  }
  for (const std::string& row : timeline.rows) {
    layout.left_labels_width = std::max(layout.left_labels_width, text_width(row, kTickFontSize));
  }
  const Frame plot = draw_panel(svg, panel, layout);
  const double row_h = rows ? plot.h / double(rows) : plot.h;

  svg.begin_group("rows");
  for (size_t r = 0; r < rows; ++r) {
    svg.rect(plot.x, plot.y + r * row_h, plot.w, row_h, r % 2 ? "#f4f4f4" : "#fafafa");
    svg.text(plot.x - 6, plot.y + (r + 0.5) * row_h + 4, timeline.rows[r],
             TextStyle(kTickFontSize, TextAnchor::kEnd, "#444444"));
  }
  svg.end_group();
  draw_x_axis(svg, plot, x_axis);

  svg.begin_group("boxes");
  const double pad = std::min(3.0, row_h * 0.1);
  for (const TimelineBox& box : timeline.boxes) {
    if (!std::isfinite(box.start) || !std::isfinite(box.end)) continue;
    const double left = x_position(plot, x_axis, std::min(box.start, box.end));
    const double right = x_position(plot, x_axis, std::max(box.start, box.end));
    const double top = plot.y + box.row * row_h + pad;
    const std::string kind = timeline_kind_name(box.kind);
    const std::string tip = fmt::format("{}: {} {} from {:.4g} to {:.4g} ({:.3g} ms)", timeline.rows[box.row], kind,
                                        box.label, box.start, box.end, (std::abs(box.end - box.start)) * 1e3);
    svg.rect(left, top, std::max(0.5, right - left), row_h - 2 * pad, timeline_kind_color(box.kind),
             Stroke("#ffffff", 0.5), tip);
  }
  svg.end_group();

  svg.begin_group("box-labels");
  for (const TimelineBox& box : timeline.boxes) {
    if (box.label.empty() || !std::isfinite(box.start) || !std::isfinite(box.end)) continue;
    const double left = x_position(plot, x_axis, std::min(box.start, box.end));
    const double right = x_position(plot, x_axis, std::max(box.start, box.end));
    if (text_width(box.label, kBoxFontSize) + 4 > right - left || row_h < kBoxFontSize + 4) continue;
    svg.text((left + right) / 2, plot.y + (box.row + 0.5) * row_h + kBoxFontSize * 0.35, box.label,
             TextStyle(kBoxFontSize, TextAnchor::kMiddle, box.kind == TimelineKind::kIdle ? "#333333" : "#ffffff"));
  }
  svg.end_group();
  draw_plot_border(svg, plot);
}

std::string timeline(const Timeline& timeline) {
  const double height = timeline.height > 0 ? timeline.height : timeline_auto_height(timeline);
  Svg svg(timeline.width, height);
  svg.title(timeline.title);
  draw_timeline(svg, {0, 0, timeline.width, height}, timeline);
  return svg.str();
}

}  // namespace moe4d
