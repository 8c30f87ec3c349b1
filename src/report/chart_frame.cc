// report/chart_frame.cc — panel layout, legends and axis drawing shared by all charts.
#include "report/chart_frame.h"

#include <algorithm>
#include <cmath>

namespace moe4d {

namespace {

constexpr double kTitleFontSize = 15.0;
constexpr double kLabelFontSize = 12.0;
constexpr double kLegendFontSize = 12.0;
constexpr double kLegendRowHeight = 18.0;
constexpr double kSwatchWidth = 18.0;
const char* const kGridColor = "#e3e3e3";
const char* const kTickColor = "#444444";

// Pixels between the two closest neighbouring ticks of `axis` drawn over `length` pixels (log
// axes are uneven: 5 -> 10 is closer than 1 -> 2).
double closest_ticks(const Axis& axis, double length) {
  const auto& ticks = axis.ticks();
  double closest = length;
  for (size_t i = 1; i < ticks.size(); ++i) {
    closest = std::min(closest, std::abs(axis.fraction(ticks[i]) - axis.fraction(ticks[i - 1])) * length);
  }
  return closest;
}

}  // namespace

size_t label_stride(double spacing, double needed) {
  if (spacing <= 0) return 1;
  for (size_t base = 1;; base *= 10) {
    for (size_t m : {size_t{1}, size_t{2}, size_t{5}}) {
      if (spacing * double(m * base) >= needed) return m * base;
    }
  }
}

double text_width(std::string_view text, double font_size) {
  // Count code points, not bytes, so that "μs" or "×" are one character wide.
  size_t chars = 0;
  for (char c : text) chars += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return 0.6 * font_size * double(chars);
}

double tick_labels_width(const Axis& axis) {
  double w = 0;
  for (const std::string& label : axis.tick_labels()) w = std::max(w, text_width(label, kTickFontSize));
  return w;
}

double x_position(const Frame& plot, const Axis& axis, double value) { return plot.x + axis.fraction(value) * plot.w; }

double y_position(const Frame& plot, const Axis& axis, double value) {
  return plot.bottom() - axis.fraction(value) * plot.h;
}

Frame draw_panel(Svg& svg, const Frame& panel, const PanelLayout& layout) {
  Frame plot;
  plot.x = panel.x + 10 + (layout.y_label.empty() ? 0 : 22) + layout.left_labels_width + 8;
  const double plot_right = panel.right() - 24 - layout.right_extra;
  plot.w = std::max(10.0, plot_right - plot.x);

  double top = panel.y + 8;
  if (!layout.title.empty()) {
    // Long titles shrink (bold glyphs run ~10% wider than text_width's average) rather than clip.
    const double natural = 1.1 * text_width(layout.title, kTitleFontSize);
    const double size =
        natural > panel.w - 20 ? std::max(9.0, kTitleFontSize * (panel.w - 20) / natural) : kTitleFontSize;
    svg.text(panel.x + panel.w / 2, panel.y + 22, layout.title,
             TextStyle(size, TextAnchor::kMiddle, "#111111", /*bold=*/true));
    top = panel.y + 34;
  }

  if (!layout.legend.empty()) {
    svg.begin_group("legend");
    double x = plot.x;
    double baseline = top + 12;
    for (const LegendItem& item : layout.legend) {
      const double item_w = kSwatchWidth + 5 + text_width(item.name, kLegendFontSize) + 16;
      if (x > plot.x && x + item_w > plot_right) {  // wrap onto a new row
        x = plot.x;
        baseline += kLegendRowHeight;
      }
      if (item.swatch == SwatchKind::kLine) {
        svg.line(x, baseline - 4, x + kSwatchWidth, baseline - 4, Stroke(item.color, 2.5));
      } else {
        svg.rect(x + 3, baseline - 10, 12, 12, item.color);
      }
      svg.text(x + kSwatchWidth + 5, baseline, item.name, TextStyle(kLegendFontSize, TextAnchor::kStart, "#333333"));
      x += item_w;
    }
    svg.end_group();
    top = baseline + 12;
  }
  plot.y = top + 8;
  const double plot_bottom = panel.bottom() - (layout.x_label.empty() ? 24 : 42);
  plot.h = std::max(10.0, plot_bottom - plot.y);

  if (!layout.x_label.empty()) {
    svg.text(plot.x + plot.w / 2, panel.bottom() - 8, layout.x_label,
             TextStyle(kLabelFontSize, TextAnchor::kMiddle, "#333333"));
  }
  if (!layout.y_label.empty()) {
    const double x = panel.x + 22, y = plot.y + plot.h / 2;
    svg.text(x, y, layout.y_label,
             TextStyle(kLabelFontSize, TextAnchor::kMiddle, "#333333", /*bold=*/false, /*rotate_deg=*/-90));
  }
  return plot;
}

void draw_x_axis(Svg& svg, const Frame& plot, const Axis& axis) {
  svg.begin_group("x-axis");
  const auto& ticks = axis.ticks();
  const size_t stride = label_stride(closest_ticks(axis, plot.w), tick_labels_width(axis) + 10);
  for (size_t i = 0; i < ticks.size(); ++i) {
    const double x = x_position(plot, axis, ticks[i]);
    svg.line(x, plot.y, x, plot.bottom(), Stroke(kGridColor));
    svg.line(x, plot.bottom(), x, plot.bottom() + 4, Stroke(kTickColor));
    if (i % stride == 0) {
      svg.text(x, plot.bottom() + 16, axis.tick_labels()[i], TextStyle(kTickFontSize, TextAnchor::kMiddle, kTickColor));
    }
  }
  svg.end_group();
}

void draw_y_axis(Svg& svg, const Frame& plot, const Axis& axis) {
  svg.begin_group("y-axis");
  const auto& ticks = axis.ticks();
  const size_t stride = label_stride(closest_ticks(axis, plot.h), kTickFontSize + 4);
  for (size_t i = 0; i < ticks.size(); ++i) {
    const double y = y_position(plot, axis, ticks[i]);
    svg.line(plot.x, y, plot.right(), y, Stroke(kGridColor));
    svg.line(plot.x - 4, y, plot.x, y, Stroke(kTickColor));
    if (i % stride == 0) {
      svg.text(plot.x - 7, y + 4, axis.tick_labels()[i], TextStyle(kTickFontSize, TextAnchor::kEnd, kTickColor));
    }
  }
  svg.end_group();
}

void draw_plot_border(Svg& svg, const Frame& plot) {
  svg.rect(plot.x, plot.y, plot.w, plot.h, "none", Stroke("#888888"));
}

}  // namespace moe4d
