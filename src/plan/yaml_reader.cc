// plan/yaml_reader.cc — strict YAML mapping reader with one-line errors.
#include "plan/yaml_reader.h"

#include <fstream>
#include <sstream>

#include "core/error.h"

namespace moe4d {
namespace {

std::string scalar_text(const YAML::Node& value) {
  if (value.IsScalar()) return value.Scalar();
  if (value.IsSequence()) return "<sequence>";
  if (value.IsMap()) return "<mapping>";
  return "null";
}

// Const lookup: yaml-cpp's non-const operator[] may insert the key into the mapping.
YAML::Node lookup(const YAML::Node& map, const std::string& key) { return map[key]; }

}  // namespace

std::string YamlMap::location(const YAML::Node& value, const std::string& source) {
  const YAML::Mark mark = value.Mark();
  if (mark.line < 0) return source;
  return fmt::format("{}:{}", source, mark.line + 1);
}

YamlMap::YamlMap(const YAML::Node& node, std::string path, std::string source)
    : node_(node), path_(std::move(path)), source_(std::move(source)) {
  if (!node_.IsMap())
    fail("{}: {}: expected a mapping, got '{}'", location(node_, source_), path_.empty() ? "document" : path_,
         scalar_text(node_));
}

bool YamlMap::has(const std::string& key) const { return static_cast<bool>(lookup(node_, key)); }

std::string YamlMap::where(const std::string& key) const {
  const YAML::Node value = lookup(node_, key);
  return location(value ? value : node_, source_);
}

YAML::Node YamlMap::required(const std::string& key) {
  const YAML::Node value = lookup(node_, key);
  if (!value) fail("{}: missing required key {}", location(node_, source_), key_path(key));
  read_.insert(key);
  return value;
}

double YamlMap::as_number(const YAML::Node& value, const std::string& path, const std::string& source) {
  double out = 0;
  if (!value.IsScalar() || !YAML::convert<double>::decode(value, out))
    fail("{}: {}: expected a number, got '{}'", location(value, source), path, scalar_text(value));
  return out;
}

long long YamlMap::as_integer(const YAML::Node& value, const std::string& path, const std::string& source) {
  long long out = 0;
  if (!value.IsScalar() || !YAML::convert<long long>::decode(value, out))
    fail("{}: {}: expected an integer, got '{}'", location(value, source), path, scalar_text(value));
  return out;
}

double YamlMap::number(const std::string& key) { return as_number(required(key), key_path(key), source_); }

double YamlMap::number_or(const std::string& key, double fallback) { return has(key) ? number(key) : fallback; }

long long YamlMap::integer(const std::string& key) { return as_integer(required(key), key_path(key), source_); }

std::string YamlMap::string(const std::string& key) {
  const YAML::Node value = required(key);
  if (!value.IsScalar())
    fail("{}: {}: expected a string, got '{}'", location(value, source_), key_path(key), scalar_text(value));
  return value.Scalar();
}

bool YamlMap::boolean(const std::string& key) {
  const YAML::Node value = required(key);
  if (value.IsScalar() && (value.Scalar() == "true" || value.Scalar() == "false")) return value.Scalar() == "true";
  fail("{}: {}: expected true or false, got '{}'", location(value, source_), key_path(key), scalar_text(value));
}

std::string YamlMap::string_or(const std::string& key, const std::string& fallback) {
  return has(key) ? string(key) : fallback;
}

YamlMap YamlMap::map(const std::string& key) { return YamlMap(required(key), key_path(key), source_); }

YAML::Node YamlMap::node(const std::string& key) { return required(key); }

void YamlMap::finish() const {
  for (const auto& entry : node_) {
    const std::string key = entry.first.Scalar();
    if (!read_.count(key)) fail("{}: unknown key {}", location(entry.first, source_), key_path(key));
  }
}

YAML::Node parse_yaml_text(const std::string& text, const std::string& source) {
  try {
    return YAML::Load(text);
  } catch (const YAML::Exception& e) {
    fail("{}:{}: invalid YAML: {}", source, e.mark.line + 1, e.msg);
  }
}

std::string read_text_file(const std::string& path, const std::string& what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("cannot read {} '{}': no such file or not readable", what, path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace moe4d
