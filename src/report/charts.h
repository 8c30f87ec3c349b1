// report/charts.h — the chart types of `moe4d report`, each a pure function from data to SVG.
//
// Every chart has two forms: `draw_X(svg, panel, spec)` draws into a region of an existing picture
// (so that several panels can share one file, e.g. a heatmap above its imbalance curve), and
// `X(spec)` returns a standalone SVG document of spec.width x spec.height. Data may contain NaN
// where there is nothing to show: line charts break the line there, heatmaps draw a grey cell,
// bars leave that component out. The functions never fail on odd data (empty series, one point,
// constant values); structurally inconsistent specs (a series whose x and y differ in length, a
// heatmap whose value count is not rows x columns) are caller bugs and abort. Thread-safe.
#pragma once

#include <string>
#include <vector>

#include "report/chart_frame.h"
#include "report/color_scale.h"
#include "report/svg.h"

namespace moe4d {

struct LineSeries {
  std::string name;
  std::vector<double> x;
  std::vector<double> y;  // same length as x; NaN (or <= 0 on a log axis) = a gap
  std::string color;      // empty = the palette colour of the series' index
};

struct LineChart {
  std::string title, x_label, y_label;
  std::vector<LineSeries> series;  // one <polyline> per unbroken run of points; markers when sparse
  bool log_y = false;
  bool integer_x = false;    // x ticks on whole numbers only (steps)
  bool y_from_zero = false;  // a linear y axis that includes 0 (rates, throughput)
  double width = 820, height = 420;
};

struct Heatmap {
  std::string title, x_label, y_label;
  std::string value_label;                 // what a colour means, shown by the colour bar
  std::vector<std::string> row_labels;     // top to bottom
  std::vector<std::string> column_labels;  // left to right
  std::vector<double> values;              // row-major, rows x columns; NaN = no data
  ColorScale scale = ColorScale::kSequential;
  double center = 1.0;  // kDiverging: the value drawn white
  // kDiverging only: colour by log2(value / center) instead of (value - center), so that 0.5x and 2x
  // are equally strong; full colour at 4x and 1/4x the centre and beyond (a fixed scale, so that
  // pictures compare), values <= 0 at the low end. For ratios such as tokens / mean tokens; center
  // must be > 0.
  bool ratio_scale = false;
  double width = 820, height = 420;
};

struct BarComponent {
  std::string name;
  std::vector<double> values;  // one per bar; NaN or <= 0 = nothing of this component
  std::string color;           // empty = palette colour of the component's index
};

struct StackedBars {
  std::string title, x_label, y_label;
  std::vector<double> x;                 // bar centres, increasing
  std::vector<BarComponent> components;  // stacked bottom-up in this order
  double bar_width = 0;                  // in x units; 0 = 80% of the closest spacing
  bool integer_x = false;
  std::string note;                      // a warning line drawn at the top of the plot ("" = none)
  double width = 820, height = 420;
};

enum class TimelineKind { kForward, kBackward, kCommunication, kIdle };

struct TimelineBox {
  int row = 0;  // index into Timeline::rows
  double start = 0, end = 0;
  std::string label;  // drawn inside the box when it fits (e.g. the micro-batch id)
  TimelineKind kind = TimelineKind::kForward;
};

struct Timeline {
  std::string title, x_label;
  std::vector<std::string> rows;  // top to bottom, e.g. "stage 0"
  std::vector<TimelineBox> boxes;
  double width = 820, height = 0;  // height 0 = sized to the number of rows
};

void draw_line_chart(Svg& svg, const Frame& panel, const LineChart& chart);
std::string line_chart(const LineChart& chart);

void draw_heatmap(Svg& svg, const Frame& panel, const Heatmap& map);
std::string heatmap(const Heatmap& map);

void draw_stacked_bars(Svg& svg, const Frame& panel, const StackedBars& bars);
std::string stacked_bars(const StackedBars& bars);

void draw_timeline(Svg& svg, const Frame& panel, const Timeline& timeline);
std::string timeline(const Timeline& timeline);
// The height timeline() uses when Timeline::height is 0.
double timeline_auto_height(const Timeline& timeline);

// The colour and legend name of a timeline kind.
std::string timeline_kind_color(TimelineKind kind);
std::string timeline_kind_name(TimelineKind kind);

}  // namespace moe4d
