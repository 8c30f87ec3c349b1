// config/config_loader.cc — YAML text -> Config in two passes (the second in config_validate.cc;
// Config -> YAML is config_writer.cc).
//
// Pass 1 (Section) walks the YAML maps: it rejects unknown and repeated keys, converts each scalar
// to its field's type and records where every key was written (line and text). Pass 2 (validate)
// checks ranges and cross-field rules on the typed Config, using those records to point at the
// line and quote the value exactly as the user wrote it.
#include "config/config_loader.h"

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
#include <vector>

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

// One YAML map of the config. The constructor rejects a non-map, unknown keys and repeated keys;
// read() converts one key's value into a field (an absent key leaves the field's default).
class Section {
 public:
  Section(ConfigReader& reader, const YAML::Node& node, std::string path, int line, std::vector<std::string> keys)
      : reader_(reader), path_(std::move(path)) {
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

  Section section(const std::string& key, std::vector<std::string> keys) const {
    if (!has(key)) return Section(reader_, YAML::Node(), child(key), 0, std::move(keys));
    reader_.record(child(key), KeyInfo{child(key), line(key), ""});
    return Section(reader_, node(key), child(key), line(key), std::move(keys));
  }

  void require(const std::string& key) const {
    if (!has(key)) reader_.fail_missing(child(key));
  }

  // `alias` is another spelling of `key`: reads whichever was given into `out`.
  template <typename T>
  void read_aliased(const std::string& key, const std::string& alias, T& out) {
    if (has(key) && has(alias))
      reader_.fail_at(line(alias), child(alias),
                      fmt::format("given together with {} (line {}), expected only one of {}, {}", key, line(key), key,
                                  alias));
    if (has(alias)) read_as(alias, child(key), out);
    if (has(key)) read(key, out);
  }

  template <typename T>
  void read(const std::string& key, T& out) {
    if (has(key)) read_as(key, child(key), out);
  }

  template <typename E, size_t N>
  void read_enum(const std::string& key, const NameTable<E, N>& table, E& out) {
    if (!has(key)) return;
    const std::string text = scalar(key, child(key), "one of " + names_of(table));
    for (const auto& [name, value] : table) {
      if (text == name) {
        out = value;
        return;
      }
    }
    reader_.fail_at(line(key), child(key), fmt::format("expected one of {}, got '{}'", names_of(table), text));
  }

 private:
  struct Entry {
    YAML::Node value;
    int line;
  };

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
  std::map<std::string, Entry> entries_;
};

// data.train: a path, Megatron's flat "w1 path1 w2 path2 ..." string, or a list of
// {path, weight, format} maps. Every form fills data.train_sources; data.train keeps the first path.
void read_train_sources(ConfigReader& reader, Section& data, DataConfig& d) {
  const YAML::Node& node = data.node("train");
  const int line = data.line("train");
  d.train_sources.clear();
  if (node.IsSequence()) {
    reader.record("data.train", KeyInfo{"data.train", line, ""});
    if (node.size() == 0) reader.fail_at(line, "data.train", "expected at least one source, got an empty list");
    for (size_t i = 0; i < node.size(); ++i) {
      const std::string path = fmt::format("data.train[{}]", i);
      const int element_line = node[i].Mark().line + 1;
      if (!node[i].IsMap())
        reader.fail_at(element_line, path, fmt::format("expected a map {{path, weight, format}}, got {}", describe(node[i])));
      Section source(reader, node[i], path, element_line, {"path", "weight", "format"});
      source.require("path");
      DataSourceConfig s;
      source.read("path", s.path);
      source.read("weight", s.weight);
      source.read("format", s.format);
      d.train_sources.push_back(s);
    }
  } else {
    std::string text;
    data.read("train", text);
    std::istringstream words(text);
    std::vector<std::string> parts;
    for (std::string w; words >> w;) parts.push_back(w);
    if (parts.size() <= 1) {
      d.train_sources.push_back({.path = text});
    } else {
      if (parts.size() % 2 != 0)
        reader.fail_at(line, "data.train",
                       fmt::format("expected a path or weight/path pairs like \"0.7 a 0.3 b\", got '{}' ({} words)",
                                   text, parts.size()));
      for (size_t i = 0; i < parts.size(); i += 2) {
        std::optional<double> w = parse_number(parts[i]);
        if (!w)
          reader.fail_at(line, "data.train",
                         fmt::format("expected weight/path pairs like \"0.7 a 0.3 b\", got '{}' where a weight belongs",
                                     parts[i]));
        d.train_sources.push_back({.path = parts[i + 1], .weight = *w});
      }
    }
  }
  d.train = d.train_sources.front().path;
}

void read_model(Section& s, ModelConfig& m) {
  for (const char* key : {"vocab_size", "hidden_size", "num_layers", "num_heads", "ffn_hidden_size", "seq_length"})
    s.require(key);
  s.read("vocab_size", m.vocab_size);
  s.read("hidden_size", m.hidden_size);
  s.read("num_layers", m.num_layers);
  s.read("num_heads", m.num_heads);
  s.read("ffn_hidden_size", m.ffn_hidden_size);
  s.read("seq_length", m.seq_length);
  s.read("tie_embeddings", m.tie_embeddings);
  s.read("num_kv_heads", m.num_kv_heads);
  s.read("rope_theta", m.rope_theta);
  s.read("norm_eps", m.norm_eps);
  Section moe = s.section("moe", {"num_experts", "top_k", "layer_freq", "capacity_factor", "aux_loss_coeff",
                                  "z_loss_coeff", "router_bias_update_rate", "a2a_chunks", "first_dense_layers",
                                  "expert_ffn_hidden_size", "shared_experts", "shared_expert_ffn_hidden_size",
                                  "score_function", "normalize_top_k", "redundant_experts", "rebalance_interval"});
  moe.read("num_experts", m.moe.num_experts);
  moe.read("top_k", m.moe.top_k);
  moe.read("layer_freq", m.moe.layer_freq);
  moe.read("capacity_factor", m.moe.capacity_factor);
  moe.read("aux_loss_coeff", m.moe.aux_loss_coeff);
  moe.read("z_loss_coeff", m.moe.z_loss_coeff);
  moe.read("router_bias_update_rate", m.moe.router_bias_update_rate);
  moe.read("a2a_chunks", m.moe.a2a_chunks);
  moe.read("first_dense_layers", m.moe.first_dense_layers);
  moe.read("expert_ffn_hidden_size", m.moe.expert_ffn_hidden_size);
  moe.read("shared_experts", m.moe.shared_experts);
  moe.read("shared_expert_ffn_hidden_size", m.moe.shared_expert_ffn_hidden_size);
  moe.read_enum("score_function", kRouterScoreNames, m.moe.score_function);
  moe.read("normalize_top_k", m.moe.normalize_top_k);
  moe.read("redundant_experts", m.moe.redundant_experts);
  moe.read("rebalance_interval", m.moe.rebalance_interval);
}

// Omitted widths and head counts take the value they default to, so that a config reads back
// from config_to_yaml as the same Config. Runs after validate (the defaults are then valid).
void resolve_defaults(ModelConfig& m) {
  m.num_kv_heads = m.kv_heads();
  if (m.is_moe()) {
    m.moe.expert_ffn_hidden_size = m.expert_ffn();
    if (m.moe.shared_experts > 0 && m.moe.shared_expert_ffn_hidden_size == 0)
      m.moe.shared_expert_ffn_hidden_size = m.moe.expert_ffn_hidden_size;
  }
}

// parallel_config.grad_bucket_size: an element count (40000000) or bytes of fp32 gradients with a
// unit ("160MB", "64MiB", "1GiB"); stored as elements. Giving it together with the count
// gradient_aggregation_group is refused: the two are different answers to one question.
void read_bucket_size(ConfigReader& reader, Section& s, ParallelConfig& p) {
  if (!s.has("grad_bucket_size")) return;
  if (s.has("gradient_aggregation_group"))
    reader.fail_at(s.line("grad_bucket_size"), s.child("grad_bucket_size"),
                   fmt::format("given together with gradient_aggregation_group (line {}), expected only one of "
                               "grad_bucket_size (bucket size), gradient_aggregation_group (bucket count)",
                               s.line("gradient_aggregation_group")));
  const YAML::Node& node = s.node("grad_bucket_size");
  const std::string text = node.IsScalar() ? node.Scalar() : describe(node);
  constexpr std::string_view kExpected =
      "a positive element count or bytes with a unit (B, KB, MB, GB, KiB, MiB, GiB), e.g. 40000000 or 64MiB";
  auto fail = [&] {
    reader.fail_at(s.line("grad_bucket_size"), s.child("grad_bucket_size"),
                   fmt::format("expected {}, got '{}'", kExpected, text));
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

void read_parallel(ConfigReader& reader, Section& s, ParallelConfig& p) {
  s.read("data_parallel", p.data_parallel);
  s.read("expert_parallel", p.expert_parallel);
  s.read_aliased("tensor_parallel", "model_parallel", p.tensor_parallel);
  s.read_aliased("pipeline_parallel", "pipeline_stage", p.pipeline_parallel);
  s.read("micro_batch_num", p.micro_batch_num);
  s.read("gradient_aggregation_group", p.gradient_aggregation_group);
  read_bucket_size(reader, s, p);
  s.read("zero3_prefetch_buckets", p.zero3_prefetch_buckets);
  if (s.has("recompute")) {
    if (s.node("recompute").IsMap()) {
      Section recompute = s.section("recompute", {"granularity"});
      recompute.require("granularity");
      recompute.read_enum("granularity", kGranularityNames, p.recompute);
    } else {
      const YAML::Node& node = s.node("recompute");
      if (!node.IsScalar() || !parse_bool(node.Scalar()))
        reader.fail_at(s.line("recompute"), s.child("recompute"),
                       fmt::format("expected true, false or {{granularity: full|selective}}, got {}", describe(node)));
      bool full = false;
      s.read("recompute", full);
      p.recompute = full ? RecomputeGranularity::kFull : RecomputeGranularity::kNone;
    }
  }
  if (s.has("enable_parallel_optimizer")) {
    if (s.has("zero_stage"))
      reader.fail_at(s.line("enable_parallel_optimizer"), s.child("enable_parallel_optimizer"),
                     fmt::format("given together with zero_stage (line {}), expected only one of zero_stage, "
                                 "enable_parallel_optimizer",
                                 s.line("zero_stage")));
    bool enabled = false;
    s.read("enable_parallel_optimizer", enabled);
    p.zero_stage = enabled ? 1 : 0;
  }
  s.read("zero_stage", p.zero_stage);
  s.read_enum("pipeline_schedule", kScheduleNames, p.pipeline_schedule);
  s.read("virtual_pipeline", p.virtual_pipeline);
  s.read("stage_layers", p.stage_layers);
  s.read("rank_order", p.rank_order);
  s.read("device_list", p.device_list);
  s.read("local_worker_num", p.local_worker_num);
  s.read("collective_timeout", p.collective_timeout);
  s.read("overlap_grad_reduce", p.overlap_grad_reduce);
  s.read_aliased("sequence_parallel", "use_seq_parallel", p.sequence_parallel);
}

void read_train(Section& s, TrainConfig& t) {
  s.require("global_batch_size");
  s.require("steps");
  s.read("global_batch_size", t.global_batch_size);
  s.read("steps", t.steps);
  s.read("lr", t.lr);
  s.read("min_lr", t.min_lr);
  s.read("warmup_steps", t.warmup_steps);
  s.read("weight_decay", t.weight_decay);
  s.read("grad_clip", t.grad_clip);
  s.read("beta1", t.beta1);
  s.read("beta2", t.beta2);
  s.read("eps", t.eps);
  s.read("seed", t.seed);
  s.read_enum("precision", kPrecisionNames, t.precision);
  s.read_enum("backend", kBackendNames, t.backend);
  Section loss_scale = s.section("loss_scale", {"initial", "factor", "window", "hysteresis"});
  loss_scale.read("initial", t.loss_scale.initial);
  loss_scale.read("factor", t.loss_scale.factor);
  loss_scale.read("window", t.loss_scale.window);
  loss_scale.read("hysteresis", t.loss_scale.hysteresis);
  s.read("max_nonfinite_steps", t.max_nonfinite_steps);
  s.read_enum("grad_compression", kGradCompressionNames, t.grad_compression);
  s.read_enum("optimizer", kOptimizerNames, t.optimizer);
  s.read("freeze_steps", t.freeze_steps);
  s.read("log_interval", t.log_interval);
  s.read("eval_interval", t.eval_interval);
  s.read("eval_batches", t.eval_batches);
  s.read("metrics_file", t.metrics_file);
  s.read("init_from", t.init_from);
  s.read("tensorboard_dir", t.tensorboard_dir);
  s.read("peak_tflops", t.peak_tflops);
}

// train.trace_steps: a list of steps, or a range "first-last" (or one step); stored sorted, unique.
// Each step must be in [1, steps].
void read_trace_steps(const ConfigReader& reader, Section& s, int steps, std::vector<int>& out) {
  if (!s.has("trace_steps")) return;
  if (s.node("trace_steps").IsScalar()) {
    std::string text;
    s.read("trace_steps", text);
    const size_t dash = text.find('-', 1);
    const std::optional<int> first = parse_integer<int>(text.substr(0, dash));
    const std::optional<int> last = dash == std::string::npos ? first : parse_integer<int>(text.substr(dash + 1));
    if (!first || !last || *last < *first)
      reader.fail_at(s.line("trace_steps"), "train.trace_steps",
                     fmt::format("expected a list of steps or a range 'first-last' with first <= last, got '{}'", text));
    out.clear();
    for (int step = *first; step <= *last; ++step) out.push_back(step);
  } else {
    s.read("trace_steps", out);
  }
  for (int step : out)
    if (step < 1 || step > steps)
      reader.fail_at(s.line("trace_steps"), "train.trace_steps",
                     fmt::format("expected steps in [1, train.steps = {}], got {}", steps, step));
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
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
                   fmt::format("expected a map of sections (model, parallel_config, train, data, checkpoint), got {}",
                               describe(root)));
  Section top(reader, root, "", 1, {"model", "parallel_config", "train", "data", "checkpoint"});

  Section model = top.section("model", {"vocab_size", "hidden_size", "num_layers", "num_heads", "ffn_hidden_size",
                                        "seq_length", "tie_embeddings", "num_kv_heads", "rope_theta", "norm_eps",
                                        "moe"});
  read_model(model, config.model);

  Section parallel = top.section(
      "parallel_config",
      {"data_parallel", "expert_parallel", "tensor_parallel", "pipeline_parallel", "micro_batch_num",
       "gradient_aggregation_group", "grad_bucket_size", "zero3_prefetch_buckets", "recompute", "zero_stage", "pipeline_schedule", "virtual_pipeline",
       "stage_layers", "rank_order", "device_list", "local_worker_num", "collective_timeout", "overlap_grad_reduce",
       "model_parallel", "pipeline_stage", "enable_parallel_optimizer", "sequence_parallel", "use_seq_parallel"});
  read_parallel(reader, parallel, config.parallel);

  Section train = top.section(
      "train", {"global_batch_size", "steps", "lr", "min_lr", "warmup_steps", "weight_decay", "grad_clip", "beta1",
                "beta2", "eps", "seed", "precision", "backend", "loss_scale", "max_nonfinite_steps", "grad_compression",
                "optimizer", "freeze_steps", "log_interval", "eval_interval", "eval_batches", "metrics_file",
                "init_from", "trace_steps", "tensorboard_dir", "peak_tflops"});
  read_train(train, config.train);
  read_trace_steps(reader, train, config.train.steps, config.train.trace_steps);

  Section data = top.section("data", {"train", "valid", "tokenizer", "format"});
  data.require("train");
  read_train_sources(reader, data, config.data);
  data.read("valid", config.data.valid);
  data.read("tokenizer", config.data.tokenizer);
  data.read("format", config.data.format);

  Section checkpoint = top.section("checkpoint", {"dir", "interval", "keep", "timeout", "format"});
  checkpoint.read("dir", config.checkpoint.dir);
  checkpoint.read_enum("format", kCheckpointFormatNames, config.checkpoint.format);
  checkpoint.read("interval", config.checkpoint.interval);
  checkpoint.read("keep", config.checkpoint.keep);
  checkpoint.read("timeout", config.checkpoint.timeout);

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
