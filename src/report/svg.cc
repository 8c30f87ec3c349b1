// report/svg.cc — rendering of the SVG builder's elements to text.
#include "report/svg.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "core/check.h"

namespace moe4d {

std::string svg_number(double value) {
  MOE4D_CHECK_MSG(std::isfinite(value), "non-finite coordinate {} reached the SVG builder", value);
  // Two decimals are sub-pixel at any zoom a chart is looked at, and keep big polylines small.
  const double rounded = std::round(value * 100.0) / 100.0;
  std::string s = fmt::format("{:.2f}", rounded == 0.0 ? 0.0 : rounded);
  while (s.back() == '0') s.pop_back();
  if (s.back() == '.') s.pop_back();
  return s;
}

std::string xml_escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default:
        // Control characters other than tab/newline are not allowed in XML 1.0 at all.
        if (static_cast<unsigned char>(c) < 0x20 && c != '\t' && c != '\n') {
          out += ' ';
        } else {
          out += c;
        }
    }
  }
  return out;
}

namespace {

std::string stroke_attributes(const Stroke& stroke) {
  if (stroke.color == "none") return " stroke=\"none\"";
  std::string s = fmt::format(" stroke=\"{}\" stroke-width=\"{}\"", xml_escape(stroke.color), svg_number(stroke.width));
  if (!stroke.dash.empty()) s += fmt::format(" stroke-dasharray=\"{}\"", xml_escape(stroke.dash));
  return s;
}

// Closes an element either as <x .../> or, with a tooltip, as <x ...><title>..</title></x>.
std::string close_element(std::string_view tag, std::string_view tooltip) {
  if (tooltip.empty()) return "/>\n";
  return fmt::format("><title>{}</title></{}>\n", xml_escape(tooltip), tag);
}

}  // namespace

Svg::Svg(double width, double height) : width_(width), height_(height) {
  MOE4D_CHECK_MSG(width > 0 && height > 0, "SVG canvas {} x {}", width, height);
}

void Svg::title(std::string_view text) { title_ = std::string(text); }

void Svg::rect(double x, double y, double w, double h, std::string_view fill, const Stroke& stroke,
               std::string_view tooltip) {
  body_ += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{}\"{}", svg_number(x), svg_number(y),
                       svg_number(std::max(0.0, w)), svg_number(std::max(0.0, h)), xml_escape(fill),
                       stroke_attributes(stroke));
  body_ += close_element("rect", tooltip);
}

void Svg::line(double x1, double y1, double x2, double y2, const Stroke& stroke) {
  body_ += fmt::format("<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\"{}/>\n", svg_number(x1), svg_number(y1),
                       svg_number(x2), svg_number(y2), stroke_attributes(stroke));
}

void Svg::polyline(const std::vector<SvgPoint>& points, const Stroke& stroke) {
  MOE4D_CHECK_GE(points.size(), size_t{2});
  std::string coords;
  coords.reserve(points.size() * 12);
  for (const auto& [x, y] : points) {
    if (!coords.empty()) coords += ' ';
    coords += svg_number(x);
    coords += ',';
    coords += svg_number(y);
  }
  body_ += fmt::format("<polyline points=\"{}\" fill=\"none\"{} stroke-linejoin=\"round\"/>\n", coords,
                       stroke_attributes(stroke));
}

void Svg::circle(double cx, double cy, double r, std::string_view fill, std::string_view tooltip) {
  body_ += fmt::format("<circle cx=\"{}\" cy=\"{}\" r=\"{}\" fill=\"{}\"", svg_number(cx), svg_number(cy),
                       svg_number(r), xml_escape(fill));
  body_ += close_element("circle", tooltip);
}

void Svg::text(double x, double y, std::string_view content, const TextStyle& style) {
  static constexpr const char* kAnchors[] = {"start", "middle", "end"};
  std::string attrs =
      fmt::format("x=\"{}\" y=\"{}\" font-size=\"{}\" fill=\"{}\" text-anchor=\"{}\"", svg_number(x), svg_number(y),
                  svg_number(style.size), xml_escape(style.color), kAnchors[static_cast<int>(style.anchor)]);
  if (style.bold) attrs += " font-weight=\"bold\"";
  if (style.rotate_deg != 0.0) {
    attrs += fmt::format(" transform=\"rotate({} {} {})\"", svg_number(style.rotate_deg), svg_number(x), svg_number(y));
  }
  body_ += fmt::format("<text {}>{}</text>\n", attrs, xml_escape(content));
}

std::string Svg::linear_gradient(const std::vector<std::pair<double, std::string>>& stops, bool vertical) {
  MOE4D_CHECK_GE(stops.size(), size_t{2});
  const std::string id = fmt::format("gradient{}", ++gradient_count_);
  defs_ += fmt::format("<linearGradient id=\"{}\" x1=\"0\" y1=\"0\" x2=\"{}\" y2=\"{}\">\n", id, vertical ? 0 : 1,
                       vertical ? 1 : 0);
  for (const auto& [offset, color] : stops) {
    defs_ += fmt::format("<stop offset=\"{}\" stop-color=\"{}\"/>\n", svg_number(offset), xml_escape(color));
  }
  defs_ += "</linearGradient>\n";
  return fmt::format("url(#{})", id);
}

void Svg::begin_group(std::string_view css_class) {
  if (css_class.empty()) {
    body_ += "<g>\n";
  } else {
    body_ += fmt::format("<g class=\"{}\">\n", xml_escape(css_class));
  }
  ++open_groups_;
}

void Svg::end_group() {
  MOE4D_CHECK_GT(open_groups_, 0);
  body_ += "</g>\n";
  --open_groups_;
}

std::string Svg::str() const {
  MOE4D_CHECK_EQ(open_groups_, 0);
  const std::string w = svg_number(width_), h = svg_number(height_);
  std::string out = fmt::format(
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} {1}\" "
      "font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\">\n",
      w, h);
  if (!title_.empty()) out += fmt::format("<title>{}</title>\n", xml_escape(title_));
  if (!defs_.empty()) out += "<defs>\n" + defs_ + "</defs>\n";
  // An opaque background: viewers with dark themes would otherwise show dark text on black.
  out += fmt::format("<rect x=\"0\" y=\"0\" width=\"{}\" height=\"{}\" fill=\"#ffffff\"/>\n", w, h);
  out += body_;
  out += "</svg>\n";
  return out;
}

}  // namespace moe4d
