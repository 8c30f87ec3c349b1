// config/config_reader.h — internals shared by the config module's reader, validator and writer
// (config_loader.cc, config_validate.cc, config_writer.cc); not part of its interface, which is
// config/config_loader.h.
#pragma once

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <array>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "config/config.h"
#include "core/error.h"

namespace moe4d::config_detail {

// Spellings of the enum-valued keys, shared by the reader and config_to_yaml.
template <typename E, size_t N>
using NameTable = std::array<std::pair<std::string_view, E>, N>;
inline constexpr NameTable<Precision, 3> kPrecisionNames{
    {{"fp32", Precision::kFP32}, {"bf16", Precision::kBF16}, {"fp16", Precision::kFP16}}};
inline constexpr NameTable<ComputeBackend, 2> kBackendNames{
    {{"cpu", ComputeBackend::kCpu}, {"reference", ComputeBackend::kReference}}};
inline constexpr NameTable<CheckpointFormat, 2> kCheckpointFormatNames{
    {{"full", CheckpointFormat::kFull}, {"sharded", CheckpointFormat::kSharded}}};
inline constexpr NameTable<GradCompression, 3> kGradCompressionNames{
    {{"none", GradCompression::kNone}, {"bf16", GradCompression::kBF16}, {"fp16", GradCompression::kFP16}}};
inline constexpr NameTable<OptimizerKind, 2> kOptimizerNames{
    {{"adamw", OptimizerKind::kAdamW}, {"onebit_adam", OptimizerKind::kOneBitAdam}}};
inline constexpr NameTable<PipelineSchedule, 3> kScheduleNames{{{"gpipe", PipelineSchedule::kGPipe},
                                                         {"1f1b", PipelineSchedule::k1F1B},
                                                         {"interleaved", PipelineSchedule::kInterleaved}}};
inline constexpr NameTable<RouterScore, 2> kRouterScoreNames{
    {{"softmax", RouterScore::kSoftmax}, {"sigmoid", RouterScore::kSigmoid}}};
inline constexpr NameTable<RecomputeGranularity, 2> kGranularityNames{
    {{"full", RecomputeGranularity::kFull}, {"selective", RecomputeGranularity::kSelective}}};

template <typename E, size_t N>
std::string_view name_of(const NameTable<E, N>& table, E value) {
  for (const auto& [name, v] : table)
    if (v == value) return name;
  return "?";
}

template <typename E, size_t N>
std::string names_of(const NameTable<E, N>& table) {
  std::string out;
  for (const auto& entry : table) out += fmt::format("{}{}", out.empty() ? "" : ", ", entry.first);
  return out;
}

// `text` with control characters and bytes that are not part of valid UTF-8 written as \xNN, so that
// a message quoting the user's bytes stays one printable line (a raw 0xD7 from a binary file would
// otherwise reach the terminal; found by fuzzing).
inline std::string escape_controls(std::string_view text) {
  std::string out;
  for (size_t i = 0; i < text.size();) {
    const auto c = static_cast<unsigned char>(text[i]);
    size_t length = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xe ? 3 : (c >> 3) == 0x1e ? 4 : 0;
    if (length > 1 && i + length <= text.size()) {
      for (size_t k = 1; k < length; ++k)
        if ((static_cast<unsigned char>(text[i + k]) >> 6) != 0x2) length = 0;
    } else if (length > 1) {
      length = 0;
    }
    if (length == 0 || c < 0x20 || c == 0x7f) {
      out += fmt::format("\\x{:02x}", c);
      ++i;
      continue;
    }
    out.append(text.substr(i, length));
    i += length;
  }
  return out;
}

// Where a key was written: the path as the user spelled it (an alias stays an alias), the 1-based
// line, and the scalar text (empty for maps and lists).
struct KeyInfo {
  std::string written_path;
  int line = 0;
  std::string text;
};

// A `--set KEY=VALUE` override (config_overrides.cc): the key as written and the shortest path it
// created (the key itself when it replaced a value of the file).
struct OverrideSite {
  std::string key;
  std::string created;
};

// Error formatting plus the record of every key that was read, keyed by canonical path.
class ConfigReader {
 public:
  explicit ConfigReader(std::string source) : source_(std::move(source)) {}

  void set_overrides(std::vector<OverrideSite> overrides) { overrides_ = std::move(overrides); }

  // The override that wrote `path` (or a map or list above it), or nullptr.
  const OverrideSite* override_of(const std::string& path) const {
    auto under = [&](const std::string& root) {
      return path == root || (path.size() > root.size() && path.compare(0, root.size(), root) == 0 &&
                              (path[root.size()] == '.' || path[root.size()] == '['));
    };
    for (auto it = overrides_.rbegin(); it != overrides_.rend(); ++it)
      if (under(it->key) || under(it->created)) return &*it;
    return nullptr;
  }

  // The message quotes the user's text; control characters in it (yaml-cpp turns some bytes into
  // line breaks) are written as \xNN so the error stays one line (found by fuzz_config_loader).
  // A value that came from `--set KEY=...` is blamed on `--set KEY`, not on a line of the file.
  [[noreturn]] void fail_at(int line, const std::string& path, const std::string& what) const {
    if (const OverrideSite* o = override_of(path)) {
      if (path == o->key) fail("--set {}: {}", escape_controls(o->key), escape_controls(what));
      fail("--set {}: {}: {}", escape_controls(o->key), escape_controls(path), escape_controls(what));
    }
    std::string where = line > 0 ? fmt::format("{}:{}", source_, line) : source_;
    if (path.empty()) fail("{}: {}", where, escape_controls(what));
    fail("{}: {}: {}", escape_controls(where), escape_controls(path), escape_controls(what));
  }
  [[noreturn]] void fail_missing(const std::string& path) const {
    fail("{}: missing required key {}", source_, path);
  }

  void record(const std::string& path, KeyInfo info) { keys_[path] = std::move(info); }
  const KeyInfo* find(const std::string& path) const {
    auto it = keys_.find(path);
    return it == keys_.end() ? nullptr : &it->second;
  }
  int line_of(const std::string& path) const {
    const KeyInfo* info = find(path);
    return info ? info->line : 0;
  }
  std::string written(const std::string& path) const {
    const KeyInfo* info = find(path);
    return info ? info->written_path : path;
  }

  // Fails with "expected <expected>, got '<text>'" unless `ok`; a key that was not written is
  // quoted with its default value.
  void require(bool ok, const std::string& path, std::string_view expected, const std::string& value) const {
    if (ok) return;
    const KeyInfo* info = find(path);
    std::string got = info ? fmt::format("'{}'", info->text) : fmt::format("'{}' (the default)", value);
    fail_at(line_of(path), written(path), fmt::format("expected {}, got {}", expected, got));
  }

 private:
  std::string source_;
  std::map<std::string, KeyInfo> keys_;
  std::vector<OverrideSite> overrides_;
};

// How deep the YAML text nests (sections, keys, list entries, flow brackets) and the first line of
// the deepest point (config_text.cc). yaml-cpp answers very deep nesting with "bad file".
struct NestingDepth {
  int depth = 0;
  int line = 0;
};
NestingDepth deepest_nesting(const std::string& text);
inline constexpr int kMaxConfigNesting = 16;  // a config needs 4: section, key, list, map

// Applies `KEY=VALUE` overrides to the parsed YAML `root` (config_overrides.cc) and returns where
// each landed; a malformed override fails naming it.
std::vector<OverrideSite> apply_overrides(YAML::Node& root, const std::vector<std::string>& overrides);

// Pass 2 of parse_config: ranges and cross-field rules of one model, pointing at the lines `r`
// recorded (config_validate.cc).
void validate(const Config& c, const ConfigReader& r);

}  // namespace moe4d::config_detail
