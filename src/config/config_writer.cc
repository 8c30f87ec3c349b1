// config/config_writer.cc — Config -> YAML (config_to_yaml), which parse_config reads back to an
// equal Config: every field, enums spelled as the reader accepts them, doubles in their shortest
// round-trip form.
#include <yaml-cpp/yaml.h>

#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <variant>
#include <vector>

#include "config/config_keys.h"
#include "config/config_loader.h"
#include "config/config_reader.h"

namespace moe4d {
namespace {

using namespace config_detail;

// Writes `key: value` pairs into the YAML map being emitted.
class MapWriter {
 public:
  explicit MapWriter(YAML::Emitter& out) : out_(out) {}

  template <typename T>
  MapWriter& operator()(const char* key, const T& value) {
    out_ << YAML::Key << key << YAML::Value << value;
    return *this;
  }
  // fmt's shortest round-trip form, so that parse_config reads back the exact same double.
  MapWriter& operator()(const char* key, double value) { return (*this)(key, fmt::format("{}", value)); }
  MapWriter& operator()(const char* key, std::string_view value) { return (*this)(key, std::string(value)); }
  MapWriter& operator()(const char* key, const std::optional<double>& value) {
    if (value) return (*this)(key, *value);
    out_ << YAML::Key << key << YAML::Value << YAML::Null;
    return *this;
  }
  MapWriter& operator()(const char* key, const std::vector<int>& values) {
    out_ << YAML::Key << key << YAML::Value << YAML::Flow << values;
    return *this;
  }

 private:
  YAML::Emitter& out_;
};

// The keys written by hand; false for the others.
bool write_custom(YAML::Emitter& out, MapWriter& put, const Config& c, const ConfigKey& key) {
  const std::string leaf(config_key_leaf(key.path));
  if (key.path == "parallel_config.recompute") {
    out << YAML::Key << leaf << YAML::Value;
    if (c.parallel.recompute == RecomputeGranularity::kSelective)
      out << YAML::Flow << YAML::BeginMap << YAML::Key << "granularity" << YAML::Value
          << std::string(name_of(kGranularityNames, c.parallel.recompute)) << YAML::EndMap;
    else
      out << (c.parallel.recompute == RecomputeGranularity::kFull);
    return true;
  } else if (key.path == "data.train") {  // a plain path, or the list of sources
    const bool plain_train = c.data.train_sources.size() <= 1 &&
                             (c.data.train_sources.empty() ||
                              (c.data.train_sources[0].weight == 1.0 && c.data.train_sources[0].format.empty()));
    if (plain_train) {
      put(leaf.c_str(), c.data.train);
      return true;
    }
    out << YAML::Key << leaf << YAML::Value << YAML::BeginSeq;
    for (const DataSourceConfig& s : c.data.train_sources) {
      out << YAML::Flow << YAML::BeginMap;
      put("path", s.path)("weight", s.weight);
      if (!s.format.empty()) put("format", s.format);
      out << YAML::EndMap;
    }
    out << YAML::EndSeq;
    return true;
  }
  return false;
}

// Writes the keys of `section` in table order (config_keys.h): aliases never, MoE-only keys only for
// MoE models, kKeyOmitZero keys only when set.
void write_section(YAML::Emitter& out, MapWriter& put, Config& c, std::string_view section) {
  for (const ConfigKey& key : config_keys()) {
    if (config_key_parent(key.path) != section || !key.alias_of.empty()) continue;
    if ((key.flags & kKeyMoeOnly) && !c.model.is_moe()) continue;
    const std::string leaf(config_key_leaf(key.path));
    if (key.flags & kKeySection) {
      out << YAML::Key << leaf << YAML::Value << YAML::BeginMap;
      write_section(out, put, c, key.path);
      out << YAML::EndMap;
    } else if (!write_custom(out, put, c, key) && key.field) {
      std::visit(
          [&](auto* value) {
            using T = std::remove_pointer_t<decltype(value)>;
            if constexpr (std::is_enum_v<T>) {
              put(leaf.c_str(), name_of(names_for(value), *value));
            } else {
              if constexpr (std::is_arithmetic_v<T>)
                if ((key.flags & kKeyOmitZero) && *value == 0) return;
              put(leaf.c_str(), *value);
            }
          },
          key.field(c));
    }
  }
}

}  // namespace

std::string config_to_yaml(const Config& config) {
  Config c = config;
  resolve_defaults(c.model);  // the widths and head counts a key's 0 stands for, written out
  YAML::Emitter out;
  MapWriter put(out);
  out << YAML::BeginMap;
  write_section(out, put, c, "");
  out << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

}  // namespace moe4d
