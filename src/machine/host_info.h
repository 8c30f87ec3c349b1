// machine/host_info.h — what the operating system says about this machine: CPU model, cores, RAM.
//
// Read from sysconf and /proc/cpuinfo (Linux); fields the system does not report stay empty / 0.
// Used to name "this machine" in the cluster file and to split its memory between the ranks.
#pragma once

#include <string>

namespace moe4d {

struct HostInfo {
  std::string cpu_model;  // "AMD EPYC 7B13" ("" if unknown)
  std::string hostname;
  int online_cores = 0;
  double memory_bytes = 0;  // physical RAM
};

HostInfo read_host_info();

}  // namespace moe4d
