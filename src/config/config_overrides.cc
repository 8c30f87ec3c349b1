// config/config_overrides.cc — `--set KEY=VALUE` on the command line (torchtitan's and Hydra's
// overrides): each is written into the parsed YAML before the config is read, so an overridden value
// is checked exactly like one in the file (type, range, unknown key with its path), and what was
// trained (the Config, echoed into every checkpoint) includes it.
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "config/config_keys.h"
#include "config/config_reader.h"
#include "core/error.h"

namespace moe4d::config_detail {
namespace {

bool valid_component(const std::string& part) {
  return !part.empty() && std::all_of(part.begin(), part.end(), [](unsigned char c) {
    return std::isalnum(c) || c == '_';
  });
}

// The value as YAML would read it after `key: `: a flow list or map is parsed, null/~/nothing is
// null, anything else is the scalar text exactly as written (no '#' comment, no quoting needed).
YAML::Node parse_value(const std::string& key, const std::string& text) {
  if (text.empty() || text == "null" || text == "~") return YAML::Node(YAML::NodeType::Null);
  if (text.front() == '[' || text.front() == '{') {
    try {
      return YAML::Load(text);
    } catch (const YAML::ParserException& e) {
      fail("--set {}: the value '{}' is not a valid YAML list or map: {}", key, escape_controls(text), e.msg);
    }
  }
  return YAML::Node(text);
}

}  // namespace

std::vector<OverrideSite> apply_overrides(YAML::Node& root, const std::vector<std::string>& overrides) {
  std::vector<OverrideSite> sites;
  for (const std::string& item : overrides) {
    const size_t eq = item.find('=');
    if (eq == std::string::npos)
      fail("--set '{}': expected KEY=VALUE with a dotted key, e.g. --set train.lr=3e-4", escape_controls(item));
    const std::string key = item.substr(0, eq);
    std::vector<std::string> parts;
    for (size_t start = 0;;) {
      const size_t dot = key.find('.', start);
      parts.push_back(key.substr(start, dot == std::string::npos ? std::string::npos : dot - start));
      if (dot == std::string::npos) break;
      start = dot + 1;
    }
    for (const std::string& part : parts)
      if (!valid_component(part))
        fail("--set '{}': expected KEY=VALUE with a dotted key of letters, digits and '_' (e.g. "
             "parallel_config.tensor_parallel=2), got the key '{}'",
             escape_controls(item), escape_controls(key));
    if (!root.IsNull() && !root.IsMap())
      fail("--set {}: the config file is not a map of sections, so no key can be set in it", key);
    OverrideSite site{.key = key, .created = ""};
    YAML::Node node = root;
    std::string path;
    for (size_t i = 0; i < parts.size(); ++i) {
      path += (i ? "." : "") + parts[i];
      if (i + 1 == parts.size()) break;
      if (site.created.empty() && !node[parts[i]]) site.created = path;
      YAML::Node next = node[parts[i]];
      if (next.IsDefined() && !next.IsNull() && !next.IsMap())
        fail("--set {}: {} is not a map in the config file (it holds a {}), so it has no key {}", key, path,
             next.IsSequence() ? "list" : "value", parts[i + 1]);
      node.reset(next);
    }
    const std::string& leaf = parts.back();
    if (site.created.empty() && !node[leaf]) site.created = key;
    if (site.created.empty()) site.created = key;
    // Two spellings of one setting, or two answers to one question (ConfigKey::excludes): setting
    // one replaces the other in the file instead of colliding with it.
    for (const ConfigKey& k : config_keys()) {
      if (k.excludes.empty() || config_key_parent(k.path) != config_key_parent(key))
        continue;
      const std::string_view other = leaf == config_key_leaf(k.path) ? k.excludes
                                     : leaf == k.excludes             ? config_key_leaf(k.path)
                                                                      : std::string_view();
      if (!other.empty() && node.IsMap() && node[std::string(other)]) node.remove(std::string(other));
    }
    node[leaf] = parse_value(key, item.substr(eq + 1));
    sites.push_back(site);
  }
  return sites;
}

}  // namespace moe4d::config_detail
