// report/line_chart.cc — line charts (charts.h): named (x, y) series with gaps, optional log-y.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/check.h"
#include "report/charts.h"

namespace moe4d {

namespace {

// A series of at most this many points also gets a marker on every point: sparse series (a
// validation loss measured every few hundred steps) then read as measurements, not just a line.
constexpr size_t kMarkerLimit = 40;

bool usable(const LineChart& chart, double x, double y) {
  return std::isfinite(x) && std::isfinite(y) && (!chart.log_y || y > 0);
}

}  // namespace

void draw_line_chart(Svg& svg, const Frame& panel, const LineChart& chart) {
  double x_lo = std::numeric_limits<double>::infinity(), x_hi = -x_lo, y_lo = x_lo, y_hi = -x_lo;
  size_t points = 0;
  for (const LineSeries& s : chart.series) {
    MOE4D_CHECK_EQ(s.x.size(), s.y.size());
    for (size_t i = 0; i < s.x.size(); ++i) {
      if (!usable(chart, s.x[i], s.y[i])) continue;
      x_lo = std::min(x_lo, s.x[i]);
      x_hi = std::max(x_hi, s.x[i]);
      y_lo = std::min(y_lo, s.y[i]);
      y_hi = std::max(y_hi, s.y[i]);
      ++points;
    }
  }
  if (points == 0) {
    x_lo = 0;
    x_hi = 1;
    y_lo = chart.log_y ? 1 : 0;
    y_hi = chart.log_y ? 10 : 1;
  }
  if (chart.y_from_zero && !chart.log_y) {
    y_lo = std::min(y_lo, 0.0);
    y_hi = std::max(y_hi, 0.0);
  }
  const Axis x_axis = Axis::linear(x_lo, x_hi, 6, chart.integer_x, /*tight=*/true);
  const Axis y_axis = chart.log_y ? Axis::log10(y_lo, y_hi) : Axis::linear(y_lo, y_hi, 5);

  PanelLayout layout;
  layout.title = chart.title;
  layout.x_label = chart.x_label;
  layout.y_label = chart.y_label;
  // One series is named by the title already; a legend pays off from two on.
  if (chart.series.size() > 1) {
    for (size_t i = 0; i < chart.series.size(); ++i) {
      const LineSeries& s = chart.series[i];
      layout.legend.push_back({s.name, s.color.empty() ? palette_color(i) : s.color, SwatchKind::kLine});
    }
  }
  layout.left_labels_width = tick_labels_width(y_axis);
  const Frame plot = draw_panel(svg, panel, layout);
  draw_y_axis(svg, plot, y_axis);
  draw_x_axis(svg, plot, x_axis);

  for (size_t i = 0; i < chart.series.size(); ++i) {
    const LineSeries& s = chart.series[i];
    const std::string color = s.color.empty() ? palette_color(i) : s.color;
    svg.begin_group("series");
    std::vector<SvgPoint> run;
    size_t series_points = 0;
    auto flush = [&] {
      if (run.size() >= 2) svg.polyline(run, Stroke(color, 2));
      if (run.size() == 1) svg.circle(run[0].first, run[0].second, 2.5, color);  // an isolated point
      run.clear();
    };
    for (size_t j = 0; j < s.x.size(); ++j) {
      if (!usable(chart, s.x[j], s.y[j])) {
        flush();
        continue;
      }
      run.emplace_back(x_position(plot, x_axis, s.x[j]), y_position(plot, y_axis, s.y[j]));
      ++series_points;
    }
    flush();
    if (series_points <= kMarkerLimit) {
      for (size_t j = 0; j < s.x.size(); ++j) {
        if (!usable(chart, s.x[j], s.y[j])) continue;
        svg.circle(x_position(plot, x_axis, s.x[j]), y_position(plot, y_axis, s.y[j]), 3, color,
                   fmt::format("{}: {:.6g} at {} {:.6g}", s.name, s.y[j], chart.x_label, s.x[j]));
      }
    }
    svg.end_group();
  }
  if (points == 0) {
    svg.text(plot.x + plot.w / 2, plot.y + plot.h / 2, "no data", TextStyle(13, TextAnchor::kMiddle, "#888888"));
  }
  draw_plot_border(svg, plot);
}

std::string line_chart(const LineChart& chart) {
  Svg svg(chart.width, chart.height);
  svg.title(chart.title);
  draw_line_chart(svg, {0, 0, chart.width, chart.height}, chart);
  return svg.str();
}

}  // namespace moe4d
