// report/stacked_bars.cc — stacked bar charts (charts.h), e.g. where each step's time went.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "core/check.h"
#include "report/charts.h"

namespace moe4d {

namespace {

bool drawn(double v) { return std::isfinite(v) && v > 0; }

}  // namespace

void draw_stacked_bars(Svg& svg, const Frame& panel, const StackedBars& bars) {
  const size_t n = bars.x.size();
  for (const BarComponent& c : bars.components) MOE4D_CHECK_EQ(c.values.size(), n);

  double width = bars.bar_width;
  if (width <= 0) {
    double spacing = 0;
    for (size_t i = 1; i < n; ++i) {
      const double d = bars.x[i] - bars.x[i - 1];
      if (d > 0 && (spacing == 0 || d < spacing)) spacing = d;
    }
    width = 0.8 * (spacing > 0 ? spacing : 1.0);
  }
  double x_lo = 0, x_hi = 1, total_max = 0;
  if (n > 0) {
    x_lo = *std::min_element(bars.x.begin(), bars.x.end()) - width / 2;
    x_hi = *std::max_element(bars.x.begin(), bars.x.end()) + width / 2;
  }
  for (size_t i = 0; i < n; ++i) {
    double total = 0;
    for (const BarComponent& c : bars.components) total += drawn(c.values[i]) ? c.values[i] : 0;
    total_max = std::max(total_max, total);
  }
  const Axis x_axis = Axis::linear(x_lo, x_hi, 6, bars.integer_x, /*tight=*/true);
  const Axis y_axis = Axis::linear(0, total_max, 5);

  PanelLayout layout;
  layout.title = bars.title;
  layout.x_label = bars.x_label;
  layout.y_label = bars.y_label;
  for (size_t k = 0; k < bars.components.size(); ++k) {
    const BarComponent& c = bars.components[k];
    layout.legend.push_back({c.name, c.color.empty() ? palette_color(k) : c.color, SwatchKind::kBox});
  }
  layout.left_labels_width = tick_labels_width(y_axis);
  const Frame plot = draw_panel(svg, panel, layout);
  draw_y_axis(svg, plot, y_axis);
  draw_x_axis(svg, plot, x_axis);

  svg.begin_group("bars");
  for (size_t i = 0; i < n; ++i) {
    const double left = x_position(plot, x_axis, bars.x[i] - width / 2);
    const double right = x_position(plot, x_axis, bars.x[i] + width / 2);
    const double px = std::max(1.0, right - left);
    double stacked = 0;
    for (size_t k = 0; k < bars.components.size(); ++k) {
      const BarComponent& c = bars.components[k];
      const double v = c.values[i];
      if (!drawn(v)) continue;
      const double top = y_position(plot, y_axis, stacked + v);
      const double bottom = y_position(plot, y_axis, stacked);
      svg.rect(left, top, px, bottom - top, c.color.empty() ? palette_color(k) : c.color, {},
               fmt::format("{} {:.6g}: {} {:.4g}", bars.x_label, bars.x[i], c.name, v));
      stacked += v;
    }
  }
  svg.end_group();
  if (n == 0) {
    svg.text(plot.x + plot.w / 2, plot.y + plot.h / 2, "no data", TextStyle(13, TextAnchor::kMiddle, "#888888"));
  }
  if (!bars.note.empty())
    svg.text(plot.x + 6, plot.y + 14, bars.note, TextStyle(11, TextAnchor::kStart, "#b00020"));
  draw_plot_border(svg, plot);
}

std::string stacked_bars(const StackedBars& bars) {
  Svg svg(bars.width, bars.height);
  svg.title(bars.title);
  draw_stacked_bars(svg, {0, 0, bars.width, bars.height}, bars);
  return svg.str();
}

}  // namespace moe4d
