// report/heatmap.cc — heatmaps (charts.h): a rows x columns grid of coloured cells with a colour bar.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

#include "core/check.h"
#include "report/charts.h"

namespace moe4d {

namespace {

constexpr double kBarWidth = 14.0;
constexpr double kBarGap = 14.0;
constexpr const char* kNoDataColor = "#d0d0d0";
// Ratio scales reach full colour at 4x (and 1/4x) the centre: fixed, so that one colour means the
// same factor in every picture, and not stretched by a single expert that received 2 tokens.
constexpr double kRatioHalfRange = 2.0;

// Index of the first label to draw when every `stride`-th is drawn. Integer labels with a constant
// spacing d start at a multiple of stride x d, so that a run's columns read 200, 400, 600 rather
// than 20, 220, 420; other labels start at the first.
size_t label_offset(const std::vector<std::string>& labels, size_t stride) {
  if (stride <= 1 || labels.size() < 2) return 0;
  std::vector<long long> values;
  for (const std::string& label : labels) {
    size_t used = 0;
    long long v = 0;
    try {
      v = std::stoll(label, &used);
    } catch (const std::exception&) {
      return 0;
    }
    if (used != label.size()) return 0;
    values.push_back(v);
  }
  const long long d = values[1] - values[0];
  if (d <= 0) return 0;
  for (size_t i = 2; i < values.size(); ++i) {
    if (values[i] - values[i - 1] != d) return 0;
  }
  const long long period = d * static_cast<long long>(stride);
  for (size_t o = 0; o < stride && o < values.size(); ++o) {
    if (values[o] % period == 0) return o;
  }
  return 0;
}

// Maps values to [0, 1] along the heatmap's scale. Sequential: data min..max. Diverging: symmetric
// about the centre, so that equal distances (or, for ratios, equal factors) above and below it get
// equally strong colours.
struct ValueMap {
  ColorScale scale;
  bool ratio;
  double lo, hi, center;
  double half_range = 1;  // linear: largest |v - center|; ratio: log2 of the factor drawn at full colour

  double position(double v) const {
    if (scale == ColorScale::kSequential) return hi > lo ? (v - lo) / (hi - lo) : 0.5;
    if (ratio) return v > 0 ? 0.5 + std::log2(v / center) / (2 * half_range) : 0.0;
    return 0.5 + (v - center) / (2 * half_range);
  }
  std::string color(double v) const { return std::isfinite(v) ? scale_color(scale, position(v)) : kNoDataColor; }
};

std::string value_text(double v) { return fmt::format("{:.3g}", v); }

}  // namespace

void draw_heatmap(Svg& svg, const Frame& panel, const Heatmap& map) {
  const size_t rows = map.row_labels.size(), cols = map.column_labels.size();
  MOE4D_CHECK_EQ(map.values.size(), rows * cols);

  double lo = std::numeric_limits<double>::infinity(), hi = -lo;
  for (double v : map.values) {
    if (!std::isfinite(v)) continue;
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  const bool any = lo <= hi;
  if (!any) lo = hi = 0;
  ValueMap value_map{map.scale, map.ratio_scale, lo, hi, map.center};
  if (map.ratio_scale) {
    MOE4D_CHECK_GT(map.center, 0.0);
    value_map.half_range = kRatioHalfRange;
  } else {
    value_map.half_range = std::max(std::abs(lo - map.center), std::abs(hi - map.center));
    if (value_map.half_range == 0) value_map.half_range = 1;
  }

  const std::string lo_text = value_text(lo), hi_text = value_text(hi);
  double row_label_width = 0;
  for (const std::string& label : map.row_labels)
    row_label_width = std::max(row_label_width, text_width(label, kTickFontSize));
  PanelLayout layout;
  layout.title = map.title;
  layout.x_label = map.x_label;
  layout.y_label = map.y_label;
  layout.left_labels_width = row_label_width;
  const double bar_labels = std::max(text_width(lo_text, kTickFontSize), text_width(hi_text, kTickFontSize));
  layout.right_extra = kBarGap + kBarWidth + 6 + bar_labels + (map.value_label.empty() ? 0 : 22);
  const Frame plot = draw_panel(svg, panel, layout);

  const double cell_w = cols ? plot.w / double(cols) : plot.w;
  const double cell_h = rows ? plot.h / double(rows) : plot.h;
  // Cells overlap by half a pixel: abutting anti-aliased edges would otherwise show hairline seams.
  const double seam = 0.5;
  svg.begin_group("cells");
  for (size_t r = 0; r < rows; ++r) {
    for (size_t c = 0; c < cols; ++c) {
      const double v = map.values[r * cols + c];
      const std::string tip = fmt::format("{} {}, {} {}: {}", map.x_label, map.column_labels[c], map.y_label,
                                          map.row_labels[r], std::isfinite(v) ? value_text(v) : "no data");
      svg.rect(plot.x + c * cell_w, plot.y + r * cell_h, cell_w + (c + 1 < cols ? seam : 0),
               cell_h + (r + 1 < rows ? seam : 0), value_map.color(v), {}, tip);
    }
  }
  svg.end_group();
  draw_plot_border(svg, plot);

  svg.begin_group("labels");
  const TextStyle tick(kTickFontSize, TextAnchor::kEnd, "#444444");
  const size_t row_stride = label_stride(cell_h, kTickFontSize + 3);
  for (size_t r = label_offset(map.row_labels, row_stride); r < rows; r += row_stride) {
    svg.text(plot.x - 6, plot.y + (r + 0.5) * cell_h + 4, map.row_labels[r], tick);
  }
  double col_label_width = 0;
  for (const std::string& label : map.column_labels)
    col_label_width = std::max(col_label_width, text_width(label, kTickFontSize));
  const size_t col_stride = label_stride(cell_w, col_label_width + 10);
  for (size_t c = label_offset(map.column_labels, col_stride); c < cols; c += col_stride) {
    svg.text(plot.x + (c + 0.5) * cell_w, plot.bottom() + 16, map.column_labels[c],
             TextStyle(kTickFontSize, TextAnchor::kMiddle, "#444444"));
  }
  svg.end_group();

  if (!any) {
    svg.text(plot.x + plot.w / 2, plot.y + plot.h / 2, "no data", TextStyle(13, TextAnchor::kMiddle, "#555555"));
    return;
  }
  // Colour bar spanning the data's min (bottom) to max (top), coloured exactly as the cells are.
  svg.begin_group("color-bar");
  const double bar_x = plot.right() + kBarGap;
  std::vector<std::pair<double, std::string>> stops;
  constexpr int kStops = 16;
  for (int i = 0; i <= kStops; ++i) {
    const double f = double(i) / kStops;  // 0 at the top of the bar
    stops.emplace_back(f, value_map.color(hi - f * (hi - lo)));
  }
  svg.rect(bar_x, plot.y, kBarWidth, plot.h, svg.linear_gradient(stops, /*vertical=*/true), Stroke("#888888"));
  const TextStyle bar_text(kTickFontSize, TextAnchor::kStart, "#444444");
  svg.text(bar_x + kBarWidth + 5, plot.y + 9, hi_text, bar_text);
  svg.text(bar_x + kBarWidth + 5, plot.bottom(), lo_text, bar_text);
  if (map.scale == ColorScale::kDiverging && hi > lo && map.center > lo && map.center < hi) {
    const double y = plot.y + (hi - map.center) / (hi - lo) * plot.h;
    svg.line(bar_x - 3, y, bar_x + kBarWidth + 3, y, Stroke("#222222"));
    if (y - plot.y > 18 && plot.bottom() - y > 18)
      svg.text(bar_x + kBarWidth + 5, y + 4, value_text(map.center), bar_text);
  }
  if (!map.value_label.empty()) {
    const double x = bar_x + kBarWidth + 6 + bar_labels + 14;
    svg.text(x, plot.y + plot.h / 2, map.value_label,
             TextStyle(12, TextAnchor::kMiddle, "#333333", /*bold=*/false, /*rotate_deg=*/90));
  }
  svg.end_group();
}

std::string heatmap(const Heatmap& map) {
  Svg svg(map.width, map.height);
  svg.title(map.title);
  draw_heatmap(svg, {0, 0, map.width, map.height}, map);
  return svg.str();
}

}  // namespace moe4d
