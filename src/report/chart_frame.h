// report/chart_frame.h — what every chart panel shares: the plot area, title, legend, axis labels,
// gridlines and tick labels.
//
// A picture is one or more panels (Frame) stacked in an Svg. draw_panel lays out a panel's title,
// legend (one row, wrapping when long) and axis titles, and returns the rectangle left for the
// data; the chart then maps its data into that rectangle and calls draw_x_axis / draw_y_axis for
// the gridlines and tick labels. Text sizes are estimated (no font metrics available), generously,
// so that labels do not collide. Pure drawing helpers; thread-safe on distinct Svg objects.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "report/axis.h"
#include "report/svg.h"

namespace moe4d {

// A rectangle of a picture, in user units.
struct Frame {
  double x = 0, y = 0, w = 0, h = 0;
  double right() const { return x + w; }
  double bottom() const { return y + h; }
};

enum class SwatchKind { kLine, kBox };

struct LegendItem {
  std::string name;
  std::string color;
  SwatchKind swatch = SwatchKind::kLine;
};

struct PanelLayout {
  std::string title;
  std::string x_label;             // under the x axis; empty = none
  std::string y_label;             // rotated, left of the y tick labels; empty = none
  std::vector<LegendItem> legend;  // empty = no legend
  double left_labels_width = 0;    // widest label drawn left of the plot (y ticks, row names)
  double right_extra = 0;          // room to keep right of the plot (e.g. a colour bar)
};

// Approximate width of `text` at `font_size` (DejaVu Sans averages ~0.6 em per character).
double text_width(std::string_view text, double font_size);

// Width of the widest tick label of `axis` at the tick font size.
double tick_labels_width(const Axis& axis);

// Draws title, legend and axis titles of `panel`; returns the plot area.
Frame draw_panel(Svg& svg, const Frame& panel, const PanelLayout& layout);

// Gridlines and tick labels of a numeric x axis (below the plot) or y axis (left of it). Labels
// that would overlap their neighbours are thinned out (every 2nd, 5th, ... tick is labelled).
void draw_x_axis(Svg& svg, const Frame& plot, const Axis& axis);
void draw_y_axis(Svg& svg, const Frame& plot, const Axis& axis);

// Label every stride-th of a row of labels `spacing` pixels apart so that `needed` pixels separate
// them; the stride is the smallest of 1, 2, 5, 10, 20, ...
size_t label_stride(double spacing, double needed);

// The plot's outline; drawn after the data so that bars do not cover it.
void draw_plot_border(Svg& svg, const Frame& plot);

// Pixel position of a data value inside the plot.
double x_position(const Frame& plot, const Axis& axis, double value);
double y_position(const Frame& plot, const Axis& axis, double value);

// The tick font size shared by every chart (labels of heatmap rows/columns use it too).
inline constexpr double kTickFontSize = 11.0;

}  // namespace moe4d
