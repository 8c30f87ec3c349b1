// tests/report/svg_test.cc — the SVG builder: compact numbers, escaping, well-formed documents; and
// the XML checker itself, which must reject what a browser would refuse.
#include "report/svg.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "xml_checker.h"

namespace moe4d {
namespace {

using test::count_elements;
using test::find_all;
using test::find_groups;
using test::parse_xml;

TEST(SvgNumber, IsCompact) {
  EXPECT_EQ(svg_number(12), "12");
  EXPECT_EQ(svg_number(0.5), "0.5");
  EXPECT_EQ(svg_number(3.14159), "3.14");
  EXPECT_EQ(svg_number(100.10), "100.1");
  EXPECT_EQ(svg_number(-2.5), "-2.5");
  EXPECT_EQ(svg_number(-0.001), "0");
  EXPECT_EQ(svg_number(1234567.891), "1234567.89");
}

TEST(XmlEscape, EscapesMarkupCharacters) {
  EXPECT_EQ(xml_escape("a<b & \"c\" 'd'>"), "a&lt;b &amp; &quot;c&quot; &apos;d&apos;&gt;");
  EXPECT_EQ(xml_escape("plain"), "plain");
  EXPECT_EQ(xml_escape(std::string("bell\x07", 5)), "bell ");
}

TEST(Svg, DocumentIsStandaloneWithViewBox) {
  Svg svg(200, 100.5);
  svg.title("a & b");
  const test::XmlElement root = parse_xml(svg.str());
  EXPECT_EQ(root.tag, "svg");
  EXPECT_EQ(root.attribute("xmlns"), "http://www.w3.org/2000/svg");
  EXPECT_EQ(root.attribute("viewBox"), "0 0 200 100.5");
  EXPECT_EQ(root.attribute("width"), "200");
  EXPECT_EQ(root.attribute("height"), "100.5");
  ASSERT_FALSE(root.children.empty());
  EXPECT_EQ(root.children[0].tag, "title");
  EXPECT_EQ(root.children[0].text, "a & b");
}

TEST(Svg, ElementsGroupsAndEscapedText) {
  Svg svg(300, 200);
  svg.begin_group("outer");
  svg.rect(1, 2, 30, 40, "#ff0000", Stroke("#000000", 0.5), "tip <1>");
  svg.line(0, 0, 10, 10, Stroke("#00ff00", 2, "4 3"));
  svg.begin_group("inner");
  svg.polyline({{0, 0}, {1.234, 5.678}, {9, 9}}, Stroke("#0000ff"));
  svg.circle(5, 5, 2, "#123456");
  svg.text(10, 20, "loss < 3 & \"rising\"", TextStyle(11, TextAnchor::kEnd, "#333333", true, -90));
  svg.end_group();
  svg.end_group();
  const std::string gradient = svg.linear_gradient({{0, "#000000"}, {1, "#ffffff"}}, /*vertical=*/true);
  EXPECT_EQ(gradient, "url(#gradient1)");
  svg.rect(0, 0, 10, 10, gradient);

  const test::XmlElement root = parse_xml(svg.str());
  EXPECT_EQ(count_elements(root, "rect"), 3u);  // background + 2
  EXPECT_EQ(count_elements(root, "line"), 1u);
  EXPECT_EQ(count_elements(root, "polyline"), 1u);
  EXPECT_EQ(count_elements(root, "circle"), 1u);
  EXPECT_EQ(count_elements(root, "linearGradient"), 1u);
  EXPECT_EQ(count_elements(root, "stop"), 2u);
  ASSERT_EQ(find_groups(root, "outer").size(), 1u);
  const auto inner = find_groups(*find_groups(root, "outer")[0], "inner");
  ASSERT_EQ(inner.size(), 1u);
  EXPECT_EQ(count_elements(*inner[0], "polyline"), 1u);

  const auto texts = find_all(root, "text");
  ASSERT_EQ(texts.size(), 1u);
  EXPECT_EQ(texts[0]->text, "loss < 3 & \"rising\"");
  EXPECT_EQ(texts[0]->attribute("text-anchor"), "end");
  EXPECT_EQ(texts[0]->attribute("font-weight"), "bold");
  EXPECT_EQ(texts[0]->attribute("transform"), "rotate(-90 10 20)");
  EXPECT_EQ(find_all(root, "polyline")[0]->attribute("points"), "0,0 1.23,5.68 9,9");
  const auto lines = find_all(root, "line");
  EXPECT_EQ(lines[0]->attribute("stroke-dasharray"), "4 3");
  // The tooltip is a <title> child of the rect, escaped.
  const auto rects = find_all(root, "rect");
  ASSERT_EQ(rects[1]->children.size(), 1u);
  EXPECT_EQ(rects[1]->children[0].text, "tip <1>");
}

TEST(SvgDeathTest, NonFiniteCoordinateIsABug) {
  Svg svg(10, 10);
  EXPECT_DEATH(svg.rect(std::numeric_limits<double>::quiet_NaN(), 0, 1, 1, "#000"), "non-finite");
}

TEST(SvgDeathTest, UnclosedGroupIsABug) {
  Svg svg(10, 10);
  svg.begin_group("open");
  EXPECT_DEATH((void)svg.str(), "open_groups_");
}

TEST(XmlChecker, RejectsMalformedDocuments) {
  EXPECT_NO_THROW(parse_xml("<?xml version=\"1.0\"?>\n<a x=\"1\" y='2'><b/>t &amp; &#60; &#x3c;</a>\n"));
  EXPECT_THROW(parse_xml("<svg><g></svg>"), std::runtime_error);        // mismatched
  EXPECT_THROW(parse_xml("<svg><g>"), std::runtime_error);              // never closed
  EXPECT_THROW(parse_xml("<a>x & y</a>"), std::runtime_error);          // bare &
  EXPECT_THROW(parse_xml("<a>1 < 2</a>"), std::runtime_error);          // raw <
  EXPECT_THROW(parse_xml("<a b=c/>"), std::runtime_error);              // unquoted
  EXPECT_THROW(parse_xml("<a b=\"1\" b=\"2\"/>"), std::runtime_error);  // duplicate attribute
  EXPECT_THROW(parse_xml("<a b=\"x<y\"/>"), std::runtime_error);        // raw < in attribute
  EXPECT_THROW(parse_xml("<a/><b/>"), std::runtime_error);              // two roots
  EXPECT_THROW(parse_xml("<a>&nbsp;</a>"), std::runtime_error);         // not a predefined entity
}

}  // namespace
}  // namespace moe4d
