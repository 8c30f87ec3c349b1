// report/svg.h — a tiny builder for standalone SVG documents (the pictures of `moe4d report`).
//
// An Svg collects elements in drawing order and str() renders a complete document with xmlns and
// viewBox, so the text opens directly in a browser or converts with rsvg-convert. Coordinates are
// user units (pixels at 100%), origin top-left, y down. Numbers are written compactly (at most two
// decimals, no trailing zeros) and every piece of text and attribute value is XML-escaped here, so
// callers pass plain strings. Coordinates must be finite: a NaN reaching the builder is a bug in the
// chart code and aborts (MOE4D_CHECK). Not thread-safe; one Svg per picture.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace moe4d {

// How a line or outline is drawn. color "none" means no stroke.
struct Stroke {
  Stroke(std::string line_color = "none", double line_width = 1.0, std::string line_dash = {})
      : color(std::move(line_color)), width(line_width), dash(std::move(line_dash)) {}
  std::string color;
  double width;
  std::string dash;  // SVG stroke-dasharray, e.g. "4 3"; empty = solid
};

enum class TextAnchor { kStart, kMiddle, kEnd };

struct TextStyle {
  TextStyle(double font_size = 12.0, TextAnchor text_anchor = TextAnchor::kStart, std::string fill = "#222222",
            bool is_bold = false, double degrees = 0.0)
      : size(font_size), anchor(text_anchor), color(std::move(fill)), bold(is_bold), rotate_deg(degrees) {}
  double size;
  TextAnchor anchor;
  std::string color;
  bool bold;
  double rotate_deg;  // rotation about the anchor point (x, y); -90 reads bottom-to-top
};

using SvgPoint = std::pair<double, double>;

class Svg {
 public:
  // A white canvas of width x height user units (both > 0).
  Svg(double width, double height);

  double width() const { return width_; }
  double height() const { return height_; }

  // The document's <title> (shown by browsers as the tab name; read by screen readers).
  void title(std::string_view text);

  // A rectangle; `tooltip` (optional) becomes a <title> child that browsers show on hover.
  void rect(double x, double y, double w, double h, std::string_view fill, const Stroke& stroke = {},
            std::string_view tooltip = {});
  void line(double x1, double y1, double x2, double y2, const Stroke& stroke);
  // An open polyline through `points` (at least two).
  void polyline(const std::vector<SvgPoint>& points, const Stroke& stroke);
  void circle(double cx, double cy, double r, std::string_view fill, std::string_view tooltip = {});
  // Text whose baseline starts (or is centred / ends, per anchor) at (x, y).
  void text(double x, double y, std::string_view content, const TextStyle& style = {});

  // A linear gradient definition; returns the paint to use as a fill, e.g. "url(#gradient1)".
  // `stops` are (offset in [0, 1], colour). Vertical gradients run from the top (offset 0) down.
  std::string linear_gradient(const std::vector<std::pair<double, std::string>>& stops, bool vertical);

  // Groups nest; `css_class` (optional) names the group so that tests and users can find parts of a
  // picture ("cells", "legend", "series"). Every begin_group needs its end_group before str().
  void begin_group(std::string_view css_class = {});
  void end_group();

  // The complete document.
  std::string str() const;

 private:
  double width_;
  double height_;
  std::string title_;
  std::string defs_;
  std::string body_;
  int open_groups_ = 0;
  int gradient_count_ = 0;
};

// "12", "0.5", "-3.25": at most two decimals, no trailing zeros, no "-0".
std::string svg_number(double value);
// Escapes & < > " ' for use in text and attribute values.
std::string xml_escape(std::string_view text);

}  // namespace moe4d
