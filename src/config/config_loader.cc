// config/config_loader.cc — YAML text -> Config in two passes (the second in config_validate.cc;
// Config -> YAML is config_writer.cc).
//
// Pass 1 (Section) walks the YAML maps: it rejects unknown and repeated keys, converts each scalar
// to its field's type and records where every key was written (line and text). Pass 2 (validate)
// checks ranges and cross-field rules on the typed Config, using those records to point at the
// line and quote the value exactly as the user wrote it.
#include "config/config_loader.h"

#include <fmt/ranges.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "config/config_keys.h"
#include "config/config_reader.h"
#include "core/error.h"

namespace moe4d {
namespace {

using namespace config_detail;

std::string describe(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Null: return "null";
    case YAML::NodeType::Sequence: return "a list";
    case YAML::NodeType::Map: return "a map";
    default: return fmt::format("'{}'", node.Scalar());
  }
}

// Integers are parsed from the scalar text (not yaml-cpp's stream conversion, which would take
// "0x10" or silently truncate); an optional leading '+' is allowed as in YAML.
template <typename T>
std::optional<T> parse_integer(std::string_view text) {
  if (!text.empty() && text[0] == '+') text.remove_prefix(1);
  T value{};
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

std::optional<double> parse_number(std::string_view text) {
  if (!text.empty() && text[0] == '+') text.remove_prefix(1);
  double value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || !std::isfinite(value))
    return std::nullopt;
  return value;
}

std::optional<bool> parse_bool(std::string_view text) {
  if (text == "true" || text == "True" || text == "TRUE") return true;
  if (text == "false" || text == "False" || text == "FALSE") return false;
  return std::nullopt;
}

// The index of the first byte of `text` that is a control character or not part of valid UTF-8.
std::optional<size_t> first_unprintable(std::string_view text) {
  for (size_t i = 0; i < text.size();) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c < 0x20 || c == 0x7f) return i;
    const size_t length = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xe ? 3 : (c >> 3) == 0x1e ? 4 : 0;
    if (length == 0 || i + length > text.size()) return i;
    for (size_t k = 1; k < length; ++k)
      if ((static_cast<unsigned char>(text[i + k]) >> 6) != 0x2) return i;
    i += length;
  }
  return std::nullopt;
}

// One YAML map of the config. The constructor rejects a non-map, unknown keys and repeated keys
// (the keys of `schema` in config_keys.h: the path, with "[]" for the maps of a list); read()
// converts one key's value into a field (an absent key leaves the field's default).
class Section {
 public:
  Section(ConfigReader& reader, const YAML::Node& node, std::string path, int line, std::string schema)
      : reader_(reader), path_(std::move(path)), schema_(std::move(schema)) {
    const std::vector<std::string> keys = config_section_keys(schema_);
    if (node.IsNull()) return;  // `section:` with nothing under it: all defaults
    if (!node.IsMap()) reader_.fail_at(line, path_, fmt::format("expected a map, got {}", describe(node)));
    for (const auto& item : node) {
      const int key_line = item.first.Mark().line + 1;
      const std::string key = item.first.IsScalar() ? item.first.Scalar() : describe(item.first);
      if (std::find(keys.begin(), keys.end(), key) == keys.end()) {
        std::string expected;
        for (const auto& k : keys) expected += fmt::format("{}{}", expected.empty() ? "" : ", ", k);
        reader_.fail_at(key_line, child(key), fmt::format("unknown key (expected one of: {})", expected));
      }
      auto [it, inserted] = entries_.emplace(key, Entry{item.second, key_line});
      if (!inserted)
        reader_.fail_at(key_line, child(key),
                        fmt::format("repeated key (first given on line {}), expected each key once", it->second.line));
    }
  }

  bool has(const std::string& key) const { return entries_.count(key) > 0; }
  std::string child(const std::string& key) const { return path_.empty() ? key : path_ + "." + key; }
  int line(const std::string& key) const { return entries_.at(key).line; }
  const YAML::Node& node(const std::string& key) const { return entries_.at(key).value; }

  const std::string& schema() const { return schema_; }
  std::string schema_child(std::string_view key) const {
    return schema_.empty() ? std::string(key) : schema_ + "." + std::string(key);
  }

  Section section(const std::string& key) const {
    if (!has(key)) return Section(reader_, YAML::Node(), child(key), 0, schema_child(key));
    reader_.record(child(key), KeyInfo{child(key), line(key), ""});
    return Section(reader_, node(key), child(key), line(key), schema_child(key));
  }

  // `other` (another key of this map) and `key` must not both be given.
  void refuse_together(const std::string& key, const std::string& other) const {
    if (has(key) && has(other))
      reader_.fail_at(line(key), child(key),
                      fmt::format("given together with {} (line {}), expected only one of {}, {}", other, line(other),
                                  other, key));
  }

  void require(const std::string& key) const {
    if (!has(key)) reader_.fail_missing(child(key));
  }
  // Every key of this map's schema marked kKeyRequired.
  void require_all() const {
    for (const ConfigKey& key : config_keys())
      if ((key.flags & kKeyRequired) && config_key_parent(key.path) == schema_)
        require(std::string(config_key_leaf(key.path)));
  }

  template <typename T>
  void read(const std::string& key, T& out) {
    if (has(key)) read_as(key, child(key), out);
  }

  // Reads `key` (written under this spelling) into the field of the key `canonical` names.
  void read_field(const std::string& key, const std::string& canonical, const ConfigField& field) {
    if (!has(key)) return;
    std::visit(
        [&](auto* out) {
          if constexpr (std::is_enum_v<std::remove_pointer_t<decltype(out)>>)
            read_enum(key, canonical, names_for(out), *out);
          else
            read_as(key, canonical, *out);
        },
        field);
  }

 private:
  struct Entry {
    YAML::Node value;
    int line;
  };

  template <typename E, size_t N>
  void read_enum(const std::string& key, const std::string& canonical, const NameTable<E, N>& table, E& out) {
    const std::string text = scalar(key, canonical, "one of " + names_of(table));
    for (const auto& [name, value] : table) {
      if (text == name) {
        out = value;
        return;
      }
    }
    reader_.fail_at(line(key), child(key), fmt::format("expected one of {}, got '{}'", names_of(table), text));
  }

  // The scalar text of `key`, recorded under `canonical`; fails naming `expected` for maps, lists, null.
  std::string scalar(const std::string& key, const std::string& canonical, std::string_view expected) {
    const YAML::Node& value = node(key);
    if (!value.IsScalar())
      reader_.fail_at(line(key), child(key), fmt::format("expected {}, got {}", expected, describe(value)));
    reader_.record(canonical, KeyInfo{child(key), line(key), value.Scalar()});
    return value.Scalar();
  }

  [[noreturn]] void fail_type(const std::string& key, std::string_view expected, const std::string& text) {
    reader_.fail_at(line(key), child(key), fmt::format("expected {}, got '{}'", expected, text));
  }

  // int, int64_t and uint64_t fields; the message names the range the field's type can hold.
  template <typename T>
    requires std::is_integral_v<T> && (!std::is_same_v<T, bool>)
  void read_as(const std::string& key, const std::string& canonical, T& out) {
    constexpr std::string_view expected = std::is_same_v<T, int>        ? "a 32-bit integer"
                                          : std::is_unsigned_v<T> ? "a non-negative 64-bit integer"
                                                                  : "a 64-bit integer";
    std::string text = scalar(key, canonical, expected);
    auto value = parse_integer<T>(text);
    if (!value) fail_type(key, expected, text);
    out = *value;
  }
  void read_as(const std::string& key, const std::string& canonical, double& out) {
    std::string text = scalar(key, canonical, "a number");
    auto value = parse_number(text);
    if (!value) fail_type(key, "a finite number", text);
    out = *value;
  }
  void read_as(const std::string& key, const std::string& canonical, bool& out) {
    std::string text = scalar(key, canonical, "true or false");
    auto value = parse_bool(text);
    if (!value) fail_type(key, "true or false", text);
    out = *value;
  }
  // Strings are paths and names: control characters and invalid UTF-8 are refused (they would not
  // survive config_to_yaml, which echoes the config into checkpoints; found by fuzz_config_loader).
  void read_as(const std::string& key, const std::string& canonical, std::string& out) {
    out = scalar(key, canonical, "a string");
    if (const auto bad = first_unprintable(out))
      reader_.fail_at(line(key), child(key),
                      fmt::format("byte {} (0x{:02x}) is a control character or not UTF-8, expected printable UTF-8 "
                                  "text",
                                  *bad, static_cast<unsigned char>(out[*bad])));
  }
  void read_as(const std::string& key, const std::string& canonical, std::optional<double>& out) {
    if (node(key).IsNull()) {
      reader_.record(canonical, KeyInfo{child(key), line(key), "null"});
      out.reset();
      return;
    }
    double value = 0;
    read_as(key, canonical, value);
    out = value;
  }
  // A list of integers; element i is recorded as `<path>[i]` with its own line.
  void read_as(const std::string& key, const std::string& canonical, std::vector<int>& out) {
    const YAML::Node& value = node(key);
    if (!value.IsSequence())
      reader_.fail_at(line(key), child(key), fmt::format("expected a list of integers, got {}", describe(value)));
    reader_.record(canonical, KeyInfo{child(key), line(key), ""});
    out.clear();
    for (size_t i = 0; i < value.size(); ++i) {
      const YAML::Node& element = value[i];
      const std::string path = fmt::format("{}[{}]", child(key), i);
      const int element_line = element.Mark().line + 1;
      std::optional<int> parsed;
      if (element.IsScalar()) parsed = parse_integer<int>(element.Scalar());
      if (!parsed) reader_.fail_at(element_line, path, fmt::format("expected an integer, got {}", describe(element)));
      reader_.record(fmt::format("{}[{}]", canonical, i), KeyInfo{path, element_line, element.Scalar()});
      out.push_back(*parsed);
    }
  }

  ConfigReader& reader_;
  std::string path_;
  std::string schema_;
  std::map<std::string, Entry> entries_;
};

// data.train: a path, Megatron's flat "w1 path1 w2 path2 ..." string, or a list of
// {path, weight, format} maps. Every form fills data.train_sources; data.train keeps the first path.
void read_train_sources(ConfigReader& reader, Section& data, const std::string& key, DataConfig& d) {
  const std::string at = data.child(key);  // data.train
  const YAML::Node& node = data.node(key);
  const int line = data.line(key);
  d.train_sources.clear();
  if (node.IsSequence()) {
    reader.record(at, KeyInfo{at, line, ""});
    if (node.size() == 0) reader.fail_at(line, at, "expected at least one source, got an empty list");
    for (size_t i = 0; i < node.size(); ++i) {
      const std::string path = fmt::format("{}[{}]", at, i);
      const int element_line = node[i].Mark().line + 1;
      if (!node[i].IsMap())
        reader.fail_at(element_line, path, fmt::format("expected a map {{path, weight, format}}, got {}", describe(node[i])));
      Section source(reader, node[i], path, element_line, at + "[]");
      source.require_all();
      DataSourceConfig s;
      source.read("path", s.path);
      source.read("weight", s.weight);
      source.read("format", s.format);
      d.train_sources.push_back(s);
    }
  } else {
    std::string text;
    data.read(key, text);
    std::istringstream words(text);
    std::vector<std::string> parts;
    for (std::string w; words >> w;) parts.push_back(w);
    if (parts.size() <= 1) {
      d.train_sources.push_back({.path = text});
    } else {
      if (parts.size() % 2 != 0)
        reader.fail_at(line, at,
                       fmt::format("expected a path or weight/path pairs like \"0.7 a 0.3 b\", got '{}' ({} words)",
                                   text, parts.size()));
      for (size_t i = 0; i < parts.size(); i += 2) {
        std::optional<double> w = parse_number(parts[i]);
        if (!w)
          reader.fail_at(line, at,
                         fmt::format("expected weight/path pairs like \"0.7 a 0.3 b\", got '{}' where a weight belongs",
                                     parts[i]));
        d.train_sources.push_back({.path = parts[i + 1], .weight = *w});
      }
    }
  }
  d.train = d.train_sources.front().path;
}

// parallel_config.grad_bucket_size: an element count (40000000) or bytes of fp32 gradients with a
// unit ("160MB", "64MiB", "1GiB"); stored as elements. Giving it together with the count
// gradient_aggregation_group is refused: the two are different answers to one question.
void read_bucket_size(ConfigReader& reader, Section& s, const std::string& key, const std::string& count_key,
                      ParallelConfig& p) {
  if (!s.has(key)) return;
  if (s.has(count_key))
    reader.fail_at(s.line(key), s.child(key),
                   fmt::format("given together with {} (line {}), expected only one of {} (bucket size), {} (bucket "
                               "count)",
                               count_key, s.line(count_key), key, count_key));
  const YAML::Node& node = s.node(key);
  const std::string text = node.IsScalar() ? node.Scalar() : describe(node);
  constexpr std::string_view kExpected =
      "a positive element count or bytes with a unit (B, KB, MB, GB, KiB, MiB, GiB), e.g. 40000000 or 64MiB";
  auto fail = [&] {
    reader.fail_at(s.line(key), s.child(key), fmt::format("expected {}, got '{}'", kExpected, text));
  };
  if (!node.IsScalar()) fail();
  if (auto elements = parse_integer<int64_t>(text)) {
    p.grad_bucket_size = *elements;
    if (*elements <= 0) fail();
    return;
  }
  size_t digits = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') ++digits;
  const int64_t number = digits > 0 ? parse_integer<int64_t>(text.substr(0, digits)).value_or(-1) : -1;
  static const std::pair<const char*, int64_t> kUnits[] = {{"B", 1},           {"KB", 1000},       {"MB", 1000000},
                                                           {"GB", 1000000000}, {"KiB", 1 << 10},   {"MiB", 1 << 20},
                                                           {"GiB", int64_t(1) << 30}};
  std::string unit = text.substr(digits);
  while (!unit.empty() && unit.front() == ' ') unit.erase(unit.begin());
  for (const auto& [name, scale] : kUnits) {
    if (number < 0 || unit != name) continue;
    if (number > INT64_MAX / scale) fail();
    const int64_t bytes = number * scale;
    if (bytes < int64_t(sizeof(float))) fail();
    p.grad_bucket_size = bytes / int64_t(sizeof(float));
    return;
  }
  fail();
}

// train.trace_steps: a list of steps, or a range "first-last" (or one step); stored sorted, unique.
// Each step must be in [1, steps].
void read_trace_steps(const ConfigReader& reader, Section& s, const std::string& key, int steps,
                      std::vector<int>& out) {
  if (!s.has(key)) return;
  if (s.node(key).IsScalar()) {
    std::string text;
    s.read(key, text);
    const size_t dash = text.find('-', 1);
    const std::optional<int> first = parse_integer<int>(text.substr(0, dash));
    const std::optional<int> last = dash == std::string::npos ? first : parse_integer<int>(text.substr(dash + 1));
    if (!first || !last || *last < *first)
      reader.fail_at(s.line(key), s.child(key),
                     fmt::format("expected a list of steps or a range 'first-last' with first <= last, got '{}'", text));
    out.clear();
    for (int step = *first; step <= *last; ++step) out.push_back(step);
  } else {
    s.read(key, out);
  }
  for (int step : out)
    if (step < 1 || step > steps)
      reader.fail_at(s.line(key), s.child(key),
                     fmt::format("expected steps in [1, train.steps = {}], got {}", steps, step));
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
}

void read_section(ConfigReader& reader, Section& s, Config& config);

// The keys read by hand (kKeyCustom in config_keys.cc).
void read_custom(ConfigReader& reader, Section& s, const ConfigKey& key, Config& config) {
  const std::string leaf(config_key_leaf(key.path));
  ParallelConfig& p = config.parallel;
  if (key.path == "parallel_config.grad_bucket_size") {
    read_bucket_size(reader, s, leaf, std::string(key.excludes), p);
  } else if (key.path == "parallel_config.enable_parallel_optimizer") {  // true = zero_stage 1
    bool enabled = false;
    s.read(leaf, enabled);
    if (s.has(leaf)) p.zero_stage = enabled ? 1 : 0;
  } else if (key.path == "parallel_config.recompute") {  // true / false, or {granularity: full|selective}
    if (!s.has(leaf)) return;
    if (s.node(leaf).IsMap()) {
      Section recompute = s.section(leaf);
      read_section(reader, recompute, config);
      return;
    }
    const YAML::Node& node = s.node(leaf);
    if (!node.IsScalar() || !parse_bool(node.Scalar()))
      reader.fail_at(s.line(leaf), s.child(leaf),
                     fmt::format("expected true, false or {{granularity: full|selective}}, got {}", describe(node)));
    bool full = false;
    s.read(leaf, full);
    p.recompute = full ? RecomputeGranularity::kFull : RecomputeGranularity::kNone;
  } else if (key.path == "train.trace_steps") {
    read_trace_steps(reader, s, leaf, config.train.steps, config.train.trace_steps);
  } else if (key.path == "data.train") {
    read_train_sources(reader, s, leaf, config.data);
  } else {
    fail("internal error: config key {} is marked custom but has no reader", key.path);
  }
}

// Reads every key of the table under `s` (config_keys.h) into its field, in table order: required
// keys first, an alias at the place of the key it spells, sections recursively.
void read_section(ConfigReader& reader, Section& s, Config& config) {
  std::vector<const ConfigKey*> keys;
  for (const ConfigKey& key : config_keys())
    if (config_key_parent(key.path) == s.schema()) keys.push_back(&key);
  s.require_all();
  for (const ConfigKey* key : keys) {
    if (!key->alias_of.empty()) continue;
    const std::string leaf(config_key_leaf(key->path));
    for (const ConfigKey* alias : keys) {
      if (alias->alias_of != leaf) continue;
      const std::string alias_leaf(config_key_leaf(alias->path));
      s.refuse_together(alias_leaf, leaf);
      if (alias->flags & kKeyCustom)
        read_custom(reader, s, *alias, config);
      else
        s.read_field(alias_leaf, s.child(leaf), key->field(config));
    }
    if (key->flags & kKeySection) {
      Section section = s.section(leaf);
      read_section(reader, section, config);
    } else if (key->flags & kKeyCustom) {
      read_custom(reader, s, *key, config);
    } else {
      s.read_field(leaf, s.child(leaf), key->field(config));
    }
  }
}

// The 1-based line of a document marker that ends the first document, or 0. A marker is '---' or
// '...' at the start of a line, alone or followed by a space (YAML forbids both inside scalars of a
// document, so a text scan finds exactly them); before any content it only opens the first document,
// and a '...' with nothing but comments after it only closes it. The text is scanned rather than
// asking yaml-cpp's LoadAll, which loops without end on some malformed input.
int second_document_line(const std::string& text) {
  std::istringstream in(text);
  std::string line;
  bool content = false;
  int end_marker = 0;
  for (int number = 1; std::getline(in, line); ++number) {
    const bool marker = (line.rfind("---", 0) == 0 || line.rfind("...", 0) == 0) &&
                        (line.size() == 3 || line[3] == ' ' || line[3] == '\t' || line[3] == '\r');
    const size_t first = line.find_first_not_of(" \t\r");
    const bool has_content = first != std::string::npos && line[first] != '#' && line[first] != '%';
    if (marker) {
      if (content && line[0] == '-') return number;
      if (content && end_marker == 0) end_marker = number;
      continue;
    }
    if (has_content && end_marker > 0) return end_marker;
    if (has_content) content = true;
  }
  return 0;
}

}  // namespace

Config parse_config(const std::string& yaml_text, const std::string& source_name,
                    const std::vector<std::string>& overrides) {
  const NestingDepth nesting = deepest_nesting(yaml_text);
  if (nesting.depth > kMaxConfigNesting)
    fail("{}:{}: the YAML nests {} levels deep here, expected at most {} (a config needs 4: section, key, list "
         "entry, map)",
         escape_controls(source_name), nesting.line, nesting.depth, kMaxConfigNesting);
  YAML::Node root;
  try {
    root = YAML::Load(yaml_text);
  } catch (const YAML::ParserException& e) {
    // yaml-cpp's "bad file" is its recursion limit or bytes it cannot read as text.
    const std::string why = e.msg == YAML::ErrorMsg::BAD_FILE
                                ? "yaml-cpp gave up on it (nested too deep, or not text), expected a YAML map of sections"
                                : escape_controls(e.msg);
    fail("{}:{}:{}: invalid YAML: {}", escape_controls(source_name), e.mark.line + 1, e.mark.column + 1, why);
  }
  // yaml-cpp's Load keeps the first document only and would silently drop the rest of the file.
  if (const int line = second_document_line(yaml_text))
    fail("{}:{}: a second YAML document starts here, expected one document (remove the '---' or '...' line; "
         "everything after it would be ignored)",
         source_name, line);
  ConfigReader reader(source_name);
  reader.set_overrides(apply_overrides(root, overrides));
  Config config;
  config.source = source_name;
  if (!root.IsNull() && !root.IsMap())
    reader.fail_at(root.Mark().line + 1, "",
                   fmt::format("expected a map of sections ({}), got {}",
                               fmt::join(config_section_keys(""), ", "), describe(root)));
  Section top(reader, root, "", 1, "");
  read_section(reader, top, config);

  validate(config, reader);
  resolve_defaults(config.model);
  return config;
}

Config load_config(const std::string& path, const std::vector<std::string>& overrides) {
  std::ifstream file(path, std::ios::binary);
  if (!file) fail("cannot read config '{}': {}", path, std::strerror(errno));
  std::stringstream text;
  text << file.rdbuf();
  if (file.bad()) fail("cannot read config '{}': read error", path);
  return parse_config(text.str(), path, overrides);
}

}  // namespace moe4d

namespace moe4d::config_detail {

void resolve_defaults(ModelConfig& m) {
  m.num_kv_heads = m.kv_heads();
  if (m.is_moe()) {
    m.moe.expert_ffn_hidden_size = m.expert_ffn();
    if (m.moe.shared_experts > 0 && m.moe.shared_expert_ffn_hidden_size == 0)
      m.moe.shared_expert_ffn_hidden_size = m.moe.expert_ffn_hidden_size;
  }
}

}  // namespace moe4d::config_detail
