// launch/host_probe.h — what one host says about itself for the preflight (`moe4d launch --probe`).
//
// The launcher runs `moe4d launch --probe ...` on every host over the remote shell MPI will use; the
// probe answers with one JSON line of facts (HostFacts) and the launcher judges them (preflight.h).
// Keeping the judging on the launcher side means the remote side needs nothing but the same binary.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace moe4d {

struct ProbeRequest {
  std::string address;                  // the host's name as the hostfile gives it (finds MPI's interface)
  std::vector<std::string> interfaces;  // btl_tcp_if_include: names or IPv4 CIDRs; empty = by address
  std::vector<std::string> readable;    // files that must be readable (data, tokenizer)
  std::string disk_dir;                 // checkpoint.dir ("" = none)
};

struct HostFacts {
  std::string hostname;
  std::string version;      // "moe4d 0.1.0"
  std::string exe;          // absolute path of the running binary
  std::string exe_sha256;
  double unix_time = 0;     // seconds, when the probe ran
  double mem_available = 0; // bytes (MemAvailable)
  std::map<std::string, int> mtu;            // interface -> MTU of the interfaces MPI would use
  std::string interface_note;                // how the interfaces were chosen
  double disk_free = -1;                     // bytes free at disk_dir (or its nearest existing parent)
  std::string disk_path;                     // the directory measured
  std::map<std::string, std::string> unreadable;  // path -> reason
  std::string cpu_model;    // /proc/cpuinfo's model name
  std::string cpu_needed;   // instruction sets the binary was compiled for ("" = portable)
  std::string cpu_missing;  // of those, the ones this CPU lacks ("" = runs here)
};

// The argv that runs the probe for `request` with the binary at `exe` (appended to the remote shell).
std::vector<std::string> probe_command(const std::string& exe, const ProbeRequest& request);

// Gathers this machine's facts (the probe side). `version` is the build's version string.
HostFacts probe_this_host(const ProbeRequest& request, const std::string& version);

nlohmann::json host_facts_to_json(const HostFacts& facts);
// Throws moe4d::Error when `line` is not a probe answer.
HostFacts host_facts_from_json(const std::string& line);

}  // namespace moe4d
