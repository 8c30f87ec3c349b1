// tests/report/xml_checker.h — a tiny strict XML reader for checking the SVG that src/report writes.
//
// Accepts an optional <?xml ...?> declaration, one root element, attributes in double or single
// quotes, text, comments and the five predefined entities plus numeric character references; rejects
// anything else with std::runtime_error naming the byte offset: unbalanced or mismatched tags, a
// duplicate or unquoted attribute, a raw '<' or a bare '&' in text or attribute values, content
// after the root. Entities are decoded, so element text compares equal to what the caller drew.
#pragma once

#include <string>
#include <vector>

namespace moe4d::test {

struct XmlElement {
  std::string tag;
  std::vector<std::pair<std::string, std::string>> attributes;
  std::string text;  // concatenated character data directly inside this element
  std::vector<XmlElement> children;

  // The attribute's value, or "" when absent.
  std::string attribute(const std::string& name) const;
  bool has_attribute(const std::string& name) const;
};

// Parses a whole document and returns its root element.
XmlElement parse_xml(const std::string& xml);

// Elements named `tag` anywhere below `root` (root included), in document order.
std::vector<const XmlElement*> find_all(const XmlElement& root, const std::string& tag);
// <g> elements whose class is `css_class`, in document order.
std::vector<const XmlElement*> find_groups(const XmlElement& root, const std::string& css_class);
// Number of elements named `tag` below `root` (root included).
size_t count_elements(const XmlElement& root, const std::string& tag);

}  // namespace moe4d::test
