// config/config_keys.h — the one table of every config key: its YAML path, the Config field it
// fills, its range and the one-line doc (config_keys.cc). The loader (unknown keys, types, aliases,
// required keys), the validator (each key's own range), the writer (config_to_yaml, the config that
// checkpoints and exports record) and `--set` overrides all walk this table; a test checks that
// docs/config.md lists exactly its keys. The type is the field's C++ type and the default is the
// field's initializer in config/config.h, so neither is written twice.
//
// Adding a key: add the field (with its default) to config/config.h, one ConfigKey line at the
// place the key should appear in its section of config_keys.cc (the order is the order of the
// "expected one of" list and of config_to_yaml), and a row to docs/config.md. A plain scalar, list
// or enum key needs nothing else; rules that involve other keys go into config_validate.cc.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "config/config.h"

namespace moe4d {

// The field a key fills; its type decides how the text is converted and written back.
using ConfigField = std::variant<int*, int64_t*, uint64_t*, double*, bool*, std::string*, std::optional<double>*,
                                 std::vector<int>*, RouterScore*, LoadBalancing*, MoeDispatcher*, PipelineSchedule*, Precision*, GradCompression*,
                                 OptimizerKind*, CheckpointFormat*, RecomputeGranularity*, ComputeBackend*>;

// Bits of ConfigKey::flags.
enum ConfigKeyFlag : unsigned {
  kKeyRequired = 1u << 0,    // missing -> "missing required key"
  kKeyMoeOnly = 1u << 1,     // refused on a dense model (num_experts 0), written only for MoE models
  kKeyMoeRange = 1u << 2,    // its range is checked only on MoE models
  kKeyIfGiven = 1u << 3,     // its range is checked only when written (0: derived from another key)
  kKeyOmitZero = 1u << 4,    // config_to_yaml writes it only when non-zero (0 = unset)
  kKeyCustom = 1u << 5,      // read and written by hand in config_loader.cc / config_writer.cc
  kKeySection = 1u << 6,     // a map of further keys
  kKeyListEntry = 1u << 7,   // a key of the maps of a list (data.train[i].path)
};

// A closed or open interval a numeric value (each element of a list) must lie in.
struct ValueRange {
  double lo = -std::numeric_limits<double>::infinity();
  double hi = std::numeric_limits<double>::infinity();
  bool lo_open = false;
  bool hi_open = false;
  bool contains(double v) const { return (lo_open ? v > lo : v >= lo) && (hi_open ? v < hi : v <= hi); }
  bool bounded() const { return lo > -std::numeric_limits<double>::infinity() || hi < std::numeric_limits<double>::infinity(); }
};

struct ConfigKey {
  std::string_view path;             // "model.moe.top_k"; list-entry keys "data.train[].path"
  ConfigField (*field)(Config&);     // nullptr: a section, or a key read by hand (kKeyCustom)
  unsigned flags = 0;
  ValueRange range;                  // checked by validate() (unbounded: no check of its own)
  std::string_view expected;         // the range as error messages say it, e.g. "a positive integer"
  std::string_view excludes;         // a key of the same map it cannot be given with
  std::string_view alias_of;         // the key of the same map this one spells another way: read at
                                     // that key's place into its field (by hand if kKeyCustom), never written
  std::string_view doc;              // one line; docs/config.md has the full text
};

// Every key, section by section, in the order of the "expected one of" lists.
std::span<const ConfigKey> config_keys();
// The key at `path` ("train.lr"), or nullptr.
const ConfigKey* find_config_key(std::string_view path);
// The path of the key whose field is `field`, a member of `config`: rules name a key by its field,
// key(c.train.lr), instead of spelling "train.lr" again. Throws for a field no key has.
std::string_view config_key_path(const Config& config, const void* field);
// The last component of a path ("top_k"), and the section above it ("model.moe"; "" at the top).
std::string_view config_key_leaf(std::string_view path);
std::string_view config_key_parent(std::string_view path);
// The names of the keys directly under `section` ("" for the top level), in table order.
std::vector<std::string> config_section_keys(std::string_view section);
// The type as docs/config.md names it ("int", "number", "bool", "string", "list of int", "a|b|c",
// "section") and the default as text (from a default-constructed Config).
std::string config_key_type(const ConfigKey& key);
std::string config_key_default(const ConfigKey& key);

}  // namespace moe4d
