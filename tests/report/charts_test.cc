// tests/report/charts_test.cc — every chart type yields well-formed SVG with the expected elements:
// one polyline per unbroken series, one rect per heatmap cell / bar segment / timeline box, colours
// that follow the scale, and escaped labels.
#include "report/charts.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "xml_checker.h"

namespace moe4d {
namespace {

using test::count_elements;
using test::find_all;
using test::find_groups;
using test::parse_xml;
using test::XmlElement;
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

LineSeries ramp(const std::string& name, int n, double slope) {
  LineSeries s;
  s.name = name;
  for (int i = 0; i < n; ++i) {
    s.x.push_back(i);
    s.y.push_back(1 + slope * i);
  }
  return s;
}

std::vector<std::string> texts_of(const XmlElement& root) {
  std::vector<std::string> out;
  for (const XmlElement* t : find_all(root, "text")) out.push_back(t->text);
  return out;
}

bool contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

TEST(LineChart, OnePolylinePerSeriesAndALegend) {
  LineChart chart;
  chart.title = "Loss <train> & val";
  chart.x_label = "step";
  chart.y_label = "loss";
  chart.series = {ramp("a", 100, 0.5), ramp("b & c", 100, -0.001), ramp("d", 100, 2)};
  const XmlElement root = parse_xml(line_chart(chart));
  EXPECT_EQ(root.attribute("viewBox"), "0 0 820 420");
  const auto series = find_groups(root, "series");
  ASSERT_EQ(series.size(), 3u);
  for (const XmlElement* g : series) {
    EXPECT_EQ(count_elements(*g, "polyline"), 1u);
    EXPECT_EQ(count_elements(*g, "circle"), 0u);  // 300 points: no markers
  }
  EXPECT_EQ(find_all(*series[1], "polyline")[0]->attribute("stroke"), "#f28e2b");  // palette colour 1
  const auto legend = find_groups(root, "legend");
  ASSERT_EQ(legend.size(), 1u);
  EXPECT_EQ(texts_of(*legend[0]), (std::vector<std::string>{"a", "b & c", "d"}));
  const auto texts = texts_of(root);
  EXPECT_TRUE(contains(texts, "Loss <train> & val"));
  EXPECT_TRUE(contains(texts, "step"));
  EXPECT_TRUE(contains(texts, "loss"));
  // Each polyline has one vertex per point.
  const std::string points = find_all(*series[0], "polyline")[0]->attribute("points");
  EXPECT_EQ(std::count(points.begin(), points.end(), ','), 100);
}

TEST(LineChart, GapsBreakTheLineAndSparseSeriesGetMarkers) {
  LineSeries s;
  s.name = "val";
  s.x = {0, 1, 2, 3, 4, 5, 6};
  s.y = {3, 2.5, kNaN, 2.2, 2.1, kNaN, 2.0};  // runs of 2, 2 and 1 points
  LineChart chart;
  chart.title = "gaps";
  chart.series = {s};
  const XmlElement root = parse_xml(line_chart(chart));
  const auto series = find_groups(root, "series");
  ASSERT_EQ(series.size(), 1u);
  EXPECT_EQ(count_elements(*series[0], "polyline"), 2u);
  // One dot for the isolated last point, and a marker (with a tooltip) on each of the 5 points.
  EXPECT_EQ(count_elements(*series[0], "circle"), 6u);
  EXPECT_TRUE(find_groups(root, "legend").empty());  // a single series is named by the title
}

TEST(LineChart, LogAxisSkipsNonPositiveValues) {
  LineSeries s;
  s.name = "grad";
  s.x = {1, 2, 3, 4};
  s.y = {100, 0, 1, 0.01};
  LineChart chart;
  chart.series = {s};
  chart.log_y = true;
  const XmlElement root = parse_xml(line_chart(chart));
  const auto series = find_groups(root, "series");
  EXPECT_EQ(count_elements(*series[0], "polyline"), 1u);  // the 0 splits off the 100
  const auto y_labels = texts_of(*find_groups(root, "y-axis")[0]);
  EXPECT_EQ(y_labels, (std::vector<std::string>{"0.01", "0.1", "1", "10", "100"}));
}

TEST(LineChart, EmptyChartSaysNoData) {
  LineChart chart;
  chart.title = "nothing";
  const XmlElement root = parse_xml(line_chart(chart));
  EXPECT_TRUE(contains(texts_of(root), "no data"));
  EXPECT_EQ(count_elements(root, "polyline"), 0u);
}

TEST(Heatmap, OneRectPerCellColouredByTheScale) {
  Heatmap map;
  map.title = "load";
  map.x_label = "step";
  map.y_label = "expert";
  map.value_label = "tokens / mean";
  map.row_labels = {"0", "1", "2", "3"};
  map.column_labels = {"1", "2", "3", "4", "5", "6"};
  map.values.assign(24, 1.0);
  map.values[0] = 0.5;    // lowest: full blue
  map.values[7] = 1.5;    // highest: full red
  map.values[11] = kNaN;  // no data: grey
  map.scale = ColorScale::kDiverging;
  const XmlElement root = parse_xml(heatmap(map));
  const auto cells = find_groups(root, "cells");
  ASSERT_EQ(cells.size(), 1u);
  const auto rects = find_all(*cells[0], "rect");
  ASSERT_EQ(rects.size(), 24u);
  EXPECT_EQ(rects[0]->attribute("fill"), "#2166ac");
  EXPECT_EQ(rects[7]->attribute("fill"), "#b2182b");
  EXPECT_EQ(rects[1]->attribute("fill"), "#f7f7f7");  // 1.0 = the centre = white
  EXPECT_EQ(rects[11]->attribute("fill"), "#d0d0d0");
  // Tooltips name the cell.
  ASSERT_EQ(rects[7]->children.size(), 1u);
  EXPECT_EQ(rects[7]->children[0].text, "step 2, expert 1: 1.5");
  // Colour bar: a gradient rect with min, centre and max labels, and the value label.
  const auto bar = find_groups(root, "color-bar");
  ASSERT_EQ(bar.size(), 1u);
  EXPECT_EQ(find_all(*bar[0], "rect")[0]->attribute("fill"), "url(#gradient1)");
  EXPECT_EQ(texts_of(*bar[0]), (std::vector<std::string>{"1.5", "0.5", "1", "tokens / mean"}));
  // All 4 row labels and 6 column labels fit.
  EXPECT_EQ(count_elements(*find_groups(root, "labels")[0], "text"), 10u);
}

TEST(Heatmap, SequentialScaleRunsMinToMax) {
  Heatmap map;
  map.row_labels = {"a"};
  map.column_labels = {"x", "y", "z"};
  map.values = {2, 7, 12};
  const XmlElement root = parse_xml(heatmap(map));
  const auto rects = find_all(*find_groups(root, "cells")[0], "rect");
  ASSERT_EQ(rects.size(), 3u);
  EXPECT_EQ(rects[0]->attribute("fill"), "#440154");
  EXPECT_EQ(rects[2]->attribute("fill"), "#fde725");
}

TEST(Heatmap, RatioScaleTreatsHalfAndDoubleAlike) {
  Heatmap map;
  map.row_labels = {"0", "1"};
  map.column_labels = {"a", "b", "c"};
  map.values = {0.25, 1.0, 8.0,   // 1/4x: full blue; the centre: white; beyond 4x: full red
                0.0,  0.5, 2.0};  // zero tokens: the low end; half and double: equally far out
  map.scale = ColorScale::kDiverging;
  map.ratio_scale = true;
  const XmlElement root = parse_xml(heatmap(map));
  const auto rects = find_all(*find_groups(root, "cells")[0], "rect");
  ASSERT_EQ(rects.size(), 6u);
  EXPECT_EQ(rects[0]->attribute("fill"), "#2166ac");
  EXPECT_EQ(rects[1]->attribute("fill"), "#f7f7f7");
  EXPECT_EQ(rects[2]->attribute("fill"), "#b2182b");
  EXPECT_EQ(rects[3]->attribute("fill"), "#2166ac");
  EXPECT_EQ(rects[4]->attribute("fill"), scale_color(ColorScale::kDiverging, 0.25));
  EXPECT_EQ(rects[5]->attribute("fill"), scale_color(ColorScale::kDiverging, 0.75));
  // On the linear scale (half-range 7, from 1 to 8) 0.5 is barely off white.
  map.ratio_scale = false;
  const XmlElement linear = parse_xml(heatmap(map));
  EXPECT_EQ(find_all(*find_groups(linear, "cells")[0], "rect")[4]->attribute("fill"),
            scale_color(ColorScale::kDiverging, 0.5 - 0.5 / 14));
}

TEST(Heatmap, ManyColumnsThinTheLabels) {
  Heatmap map;
  map.row_labels.resize(64);
  for (int r = 0; r < 64; ++r) map.row_labels[r] = std::to_string(r);
  for (int c = 0; c < 150; ++c) map.column_labels.push_back(std::to_string(1000 + c * 10));
  map.values.assign(64 * 150, 1.0);
  const XmlElement root = parse_xml(heatmap(map));
  EXPECT_EQ(count_elements(*find_groups(root, "cells")[0], "rect"), 64u * 150u);
  const size_t labels = count_elements(*find_groups(root, "labels")[0], "text");
  EXPECT_LT(labels, 64u + 150u);
  EXPECT_GT(labels, 10u);
}

TEST(StackedBars, OneRectPerPositiveSegmentStackedInProportion) {
  StackedBars bars;
  bars.title = "step time";
  bars.x_label = "step";
  bars.x = {1, 2, 3, 4, 5};
  bars.components = {{"compute", {1, 1, 1, 1, 1}, ""}, {"tp", {2, 2, 2, 2, 2}, ""}, {"ep", {3, 3, 0, 3, kNaN}, ""}};
  const XmlElement root = parse_xml(stacked_bars(bars));
  const auto groups = find_groups(root, "bars");
  ASSERT_EQ(groups.size(), 1u);
  const auto rects = find_all(*groups[0], "rect");
  ASSERT_EQ(rects.size(), 13u);  // 15 minus the zero and the NaN
  // Bar 1: heights 1:2:3, each segment sitting on the previous one.
  const double h0 = std::stod(rects[0]->attribute("height"));
  const double h1 = std::stod(rects[1]->attribute("height"));
  const double h2 = std::stod(rects[2]->attribute("height"));
  EXPECT_NEAR(h1 / h0, 2.0, 0.02);
  EXPECT_NEAR(h2 / h0, 3.0, 0.02);
  EXPECT_NEAR(std::stod(rects[1]->attribute("y")) + h1, std::stod(rects[0]->attribute("y")), 0.02);
  EXPECT_EQ(texts_of(*find_groups(root, "legend")[0]), (std::vector<std::string>{"compute", "tp", "ep"}));
}

TEST(Timeline, BoxesColouredByKindWithLabelsWhereTheyFit) {
  Timeline t;
  t.title = "pipeline";
  t.x_label = "time (s)";
  t.rows = {"stage 0", "stage 1"};
  t.boxes = {{0, 0.0, 0.2, "0", TimelineKind::kForward},
             {0, 0.2, 0.4, "1", TimelineKind::kForward},
             {1, 0.2, 0.4, "0", TimelineKind::kForward},
             {1, 0.4, 0.8, "0", TimelineKind::kBackward},
             {1, 0.8, 0.8001, "x", TimelineKind::kCommunication}};  // too thin for its label
  const XmlElement root = parse_xml(timeline(t));
  EXPECT_EQ(root.attribute("height"), "166");  // 110 + 2 rows x 28
  const auto boxes = find_all(*find_groups(root, "boxes")[0], "rect");
  ASSERT_EQ(boxes.size(), 5u);
  EXPECT_EQ(boxes[0]->attribute("fill"), timeline_kind_color(TimelineKind::kForward));
  EXPECT_EQ(boxes[3]->attribute("fill"), timeline_kind_color(TimelineKind::kBackward));
  EXPECT_EQ(boxes[4]->attribute("fill"), timeline_kind_color(TimelineKind::kCommunication));
  EXPECT_EQ(count_elements(*find_groups(root, "box-labels")[0], "text"), 4u);
  EXPECT_EQ(texts_of(*find_groups(root, "legend")[0]),
            (std::vector<std::string>{"forward", "backward", "communication"}));
  const auto rows = texts_of(*find_groups(root, "rows")[0]);
  EXPECT_EQ(rows, (std::vector<std::string>{"stage 0", "stage 1"}));
}

}  // namespace
}  // namespace moe4d
