// Fuzzes the YAML config loader (config/config_loader.h) and the size limits that `train` applies
// next (config/size_limits.h). Contract: any input either parses or throws moe4d::Error with one
// line; a config that parses survives config_to_yaml -> parse_config unchanged. Anything else (a
// crash, another exception, a sanitizer report, a round trip that changes the config) is a bug.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "config/config_loader.h"
#include "config/size_limits.h"
#include "core/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  moe4d::Config config;
  try {
    config = moe4d::parse_config(text, "fuzz.yaml");
  } catch (const moe4d::Error& e) {
    if (std::string(e.what()).find('\n') != std::string::npos && text.find('\n') == std::string::npos) std::abort();
    return 0;
  }
  const moe4d::Config again = moe4d::parse_config(moe4d::config_to_yaml(config), "fuzz.yaml");
  if (!(again == config)) std::abort();
  try {
    moe4d::check_size_limits(config);
  } catch (const moe4d::Error&) {
  }
  return 0;
}
