// tests/report/xml_checker.cc — the strict XML reader of xml_checker.h.
#include "xml_checker.h"

#include <cctype>
#include <stdexcept>

namespace moe4d::test {

namespace {

class Parser {
 public:
  explicit Parser(const std::string& text) : s_(text) {}

  XmlElement document() {
    skip_space();
    if (s_.compare(pos_, 5, "<?xml") == 0) {
      const size_t end = s_.find("?>", pos_);
      if (end == std::string::npos) error("unterminated XML declaration");
      pos_ = end + 2;
    }
    skip_misc();
    if (pos_ >= s_.size() || s_[pos_] != '<') error("expected the root element");
    XmlElement root = element();
    skip_misc();
    if (pos_ != s_.size()) error("content after the root element");
    return root;
  }

 private:
  [[noreturn]] void error(const std::string& what) const {
    throw std::runtime_error("XML error at byte " + std::to_string(pos_) + ": " + what);
  }

  void skip_space() {
    while (pos_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[pos_]))) ++pos_;
  }

  // Whitespace and comments between top-level constructs.
  void skip_misc() {
    for (;;) {
      skip_space();
      if (s_.compare(pos_, 4, "<!--") != 0) return;
      comment();
    }
  }

  void comment() {
    const size_t end = s_.find("-->", pos_ + 4);
    if (end == std::string::npos) error("unterminated comment");
    pos_ = end + 3;
  }

  std::string name() {
    const size_t start = pos_;
    while (pos_ < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[pos_])) || s_[pos_] == '-' ||
                                s_[pos_] == '_' || s_[pos_] == ':' || s_[pos_] == '.')) {
      ++pos_;
    }
    if (pos_ == start || std::isdigit(static_cast<unsigned char>(s_[start]))) error("expected a name");
    return s_.substr(start, pos_ - start);
  }

  // Decodes an entity starting at '&'; appends it to `out`.
  void entity(std::string& out) {
    const size_t end = s_.find(';', pos_);
    if (end == std::string::npos || end - pos_ > 10) error("bare '&' (must be escaped as &amp;)");
    const std::string body = s_.substr(pos_ + 1, end - pos_ - 1);
    if (body == "amp")
      out += '&';
    else if (body == "lt")
      out += '<';
    else if (body == "gt")
      out += '>';
    else if (body == "quot")
      out += '"';
    else if (body == "apos")
      out += '\'';
    else if (body.size() > 1 && body[0] == '#') {
      const bool hex = body[1] == 'x';
      const std::string digits = body.substr(hex ? 2 : 1);
      if (digits.empty()) error("empty character reference");
      for (char c : digits) {
        if (!(hex ? std::isxdigit(static_cast<unsigned char>(c)) : std::isdigit(static_cast<unsigned char>(c)))) {
          error("bad character reference &" + body + ";");
        }
      }
      const unsigned long code = std::stoul(digits, nullptr, hex ? 16 : 10);
      if (code < 0x80)
        out += static_cast<char>(code);
      else
        out += '?';  // the checker only needs to know the reference is well-formed
    } else {
      error("unknown entity &" + body + ";");
    }
    pos_ = end + 1;
  }

  XmlElement element() {
    ++pos_;  // '<'
    XmlElement e;
    e.tag = name();
    for (;;) {
      const size_t before = pos_;
      skip_space();
      if (pos_ >= s_.size()) error("unterminated start tag <" + e.tag);
      if (s_.compare(pos_, 2, "/>") == 0) {
        pos_ += 2;
        return e;
      }
      if (s_[pos_] == '>') {
        ++pos_;
        break;
      }
      if (pos_ == before) error("attributes must be separated by whitespace");
      std::string key = name();
      if (e.has_attribute(key)) error("duplicate attribute " + key);
      skip_space();
      if (pos_ >= s_.size() || s_[pos_] != '=') error("expected '=' after attribute " + key);
      ++pos_;
      skip_space();
      if (pos_ >= s_.size() || (s_[pos_] != '"' && s_[pos_] != '\'')) error("unquoted value of attribute " + key);
      const char quote = s_[pos_++];
      std::string value;
      while (pos_ < s_.size() && s_[pos_] != quote) {
        if (s_[pos_] == '<') error("raw '<' in attribute " + key);
        if (s_[pos_] == '&') {
          entity(value);
        } else {
          value += s_[pos_++];
        }
      }
      if (pos_ >= s_.size()) error("unterminated value of attribute " + key);
      ++pos_;
      e.attributes.emplace_back(std::move(key), std::move(value));
    }
    for (;;) {  // content
      if (pos_ >= s_.size()) error("element <" + e.tag + "> is never closed");
      if (s_.compare(pos_, 2, "</") == 0) {
        pos_ += 2;
        const std::string closing = name();
        if (closing != e.tag) error("</" + closing + "> closes <" + e.tag + ">");
        skip_space();
        if (pos_ >= s_.size() || s_[pos_] != '>') error("expected '>' after </" + closing);
        ++pos_;
        return e;
      }
      if (s_.compare(pos_, 4, "<!--") == 0) {
        comment();
      } else if (s_[pos_] == '<') {
        e.children.push_back(element());
      } else if (s_[pos_] == '&') {
        entity(e.text);
      } else {
        e.text += s_[pos_++];
      }
    }
  }

  const std::string& s_;
  size_t pos_ = 0;
};

void collect(const XmlElement& e, const std::string& tag, std::vector<const XmlElement*>& out) {
  if (e.tag == tag) out.push_back(&e);
  for (const XmlElement& child : e.children) collect(child, tag, out);
}

}  // namespace

std::string XmlElement::attribute(const std::string& name) const {
  for (const auto& [k, v] : attributes) {
    if (k == name) return v;
  }
  return "";
}

bool XmlElement::has_attribute(const std::string& name) const {
  for (const auto& [k, v] : attributes) {
    if (k == name) return true;
  }
  return false;
}

XmlElement parse_xml(const std::string& xml) { return Parser(xml).document(); }

std::vector<const XmlElement*> find_all(const XmlElement& root, const std::string& tag) {
  std::vector<const XmlElement*> out;
  collect(root, tag, out);
  return out;
}

std::vector<const XmlElement*> find_groups(const XmlElement& root, const std::string& css_class) {
  std::vector<const XmlElement*> out;
  for (const XmlElement* g : find_all(root, "g")) {
    if (g->attribute("class") == css_class) out.push_back(g);
  }
  return out;
}

size_t count_elements(const XmlElement& root, const std::string& tag) { return find_all(root, tag).size(); }

}  // namespace moe4d::test
