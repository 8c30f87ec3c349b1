// bench/common/process_memory.h — the resident set of this process and its high-water mark.
#pragma once

#include <cstring>
#include <fstream>
#include <string>

namespace moe4d::bench {

// VmRSS / VmHWM of this process in bytes (/proc/self/status).
inline double status_bytes(const char* key) {
  std::ifstream in("/proc/self/status");
  std::string line;
  const size_t n = std::strlen(key);
  while (std::getline(in, line))
    if (line.compare(0, n, key) == 0) return std::stod(line.substr(n + 1)) * 1024.0;
  return 0;
}

// Resets the high-water mark of the resident set to the current resident set (Linux >= 4.0).
inline bool reset_peak_rss() {
  std::ofstream out("/proc/self/clear_refs");
  out << "5";
  return bool(out);
}

}  // namespace moe4d::bench
