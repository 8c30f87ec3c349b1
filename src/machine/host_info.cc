// machine/host_info.cc — sysconf and /proc/cpuinfo.
#include "machine/host_info.h"

#include <unistd.h>

#include <fstream>

namespace moe4d {

HostInfo read_host_info() {
  HostInfo info;
  info.online_cores = static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
  const long pages = sysconf(_SC_PHYS_PAGES), page_size = sysconf(_SC_PAGESIZE);
  if (pages > 0 && page_size > 0) info.memory_bytes = double(pages) * double(page_size);
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) == 0) info.hostname = name;
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);) {
    if (line.rfind("model name", 0) != 0) continue;
    const size_t colon = line.find(':');
    if (colon != std::string::npos) info.cpu_model = line.substr(line.find_first_not_of(" \t", colon + 1));
    break;
  }
  return info;
}

}  // namespace moe4d
