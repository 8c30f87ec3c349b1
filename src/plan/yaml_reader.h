// plan/yaml_reader.h — strict reading of YAML mappings for the planner's cluster files
// (plan/cluster_yaml.cc). A moe4d config given as `moe4d plan`'s MODEL goes through the config
// loader instead (plan/model_source.cc, config/config_loader.h).
//
// A YamlMap is a view of one mapping that remembers which keys were read; finish() rejects every key
// that was not, so a misspelt key is an error instead of a silently ignored one. Every error is a
// moe4d::Error of one line naming the source and line: `<source>:<line>: <key.path>: expected
// <what>, got '<value>'`, `<source>:<line>: missing required key <key.path>`, `<source>:<line>:
// unknown key <key.path>`, or (parse_yaml_text) `<source>:<line>: invalid YAML: <reason>`.
#pragma once

#include <yaml-cpp/yaml.h>

#include <set>
#include <string>

namespace moe4d {

class YamlMap {
 public:
  // `node` must be a mapping (error otherwise); `path` is its key path ("" for the document root).
  YamlMap(const YAML::Node& node, std::string path, std::string source);

  bool has(const std::string& key) const;
  double number(const std::string& key);
  double number_or(const std::string& key, double fallback);
  long long integer(const std::string& key);
  std::string string(const std::string& key);
  std::string string_or(const std::string& key, const std::string& fallback);
  bool boolean(const std::string& key);  // true or false
  YamlMap map(const std::string& key);
  // The raw node of `key` (marked as read); for sequences and union types.
  YAML::Node node(const std::string& key);
  std::string key_path(const std::string& key) const { return path_.empty() ? key : path_ + "." + key; }
  // "<source>:<line>" of `key`'s value (or of the mapping when the key is absent).
  std::string where(const std::string& key) const;

  // Throws for the first key of the mapping that was never read.
  void finish() const;

  // Helpers for values that are not in a mapping (sequence elements).
  static double as_number(const YAML::Node& value, const std::string& path, const std::string& source);
  static long long as_integer(const YAML::Node& value, const std::string& path, const std::string& source);
  static std::string location(const YAML::Node& value, const std::string& source);

 private:
  YAML::Node required(const std::string& key);

  YAML::Node node_;
  std::string path_;
  std::string source_;
  std::set<std::string> read_;
};

// Parses YAML text, turning a syntax error into a moe4d::Error naming source and line.
YAML::Node parse_yaml_text(const std::string& text, const std::string& source);
// Reads a file as text; moe4d::Error if it cannot be read.
std::string read_text_file(const std::string& path, const std::string& what);

}  // namespace moe4d
