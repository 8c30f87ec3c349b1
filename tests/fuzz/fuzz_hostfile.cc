// tests/fuzz/fuzz_hostfile.cc — libFuzzer target for the hostfile parser (launch/hostfile.h).
//
// Any input either parses into hosts that satisfy the parser's contract or is rejected with one
// moe4d::Error line that names the source; nothing else (a crash, another exception, a host with a
// bad name or count) is acceptable. Build with clang++ -fsanitize=fuzzer,address and link
// moe4d_launch.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "core/error.h"
#include "launch/hostfile.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    const auto hosts = moe4d::parse_hostfile(text, "fuzz");
    if (hosts.empty()) std::abort();
    for (const moe4d::HostEntry& h : hosts) {
      if (h.host.empty() || h.slots < 0 || h.max_slots < 0 || h.line < 1) std::abort();
      if (h.max_slots > 0 && h.slots > h.max_slots) std::abort();
      for (char c : h.host)
        if (c == ' ' || c == '\t' || c == '\n' || c == '#' || c == '=' || c == ':') std::abort();
    }
  } catch (const moe4d::Error& e) {
    if (std::string_view(e.what()).substr(0, 4) != "fuzz") std::abort();
  }
  return 0;
}
