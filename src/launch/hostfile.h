// launch/hostfile.h — the hosts a job runs on, read from a hostfile.
//
// Accepted lines (one host each; '#' starts a comment; blank lines are skipped):
//   192.168.1.10 slots=8              the articles' msrun/OpenMPI form
//   node07 slots=8 max_slots=16       OpenMPI (also max-slots=, and spaces around '=')
//   node07 slots = 8
//   node07                            OpenMPI: one host, slots not given
//   node07:8                          MPICH/Hydra form: host:slots
// A host listed twice is one host whose slots add up (OpenMPI's rule). Anything else — an unknown
// keyword, a count that is not a positive integer, max_slots below slots, a malformed name — is a
// moe4d::Error naming `source:line` and the offending text.
//
// parse_hostfile is a pure function of its input (no files, no environment): the fuzz target
// tests/fuzz/hostfile_fuzzer.cc feeds it arbitrary bytes. Thread-safe.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace moe4d {

struct HostEntry {
  std::string host;
  int slots = 0;        // 0: not given in the file
  int max_slots = 0;    // 0: not given
  int line = 0;         // 1-based line of the host's first mention
};

std::vector<HostEntry> parse_hostfile(std::string_view text, std::string_view source);

// Reads the file at `path` and parses it; a missing or unreadable file is a moe4d::Error.
std::vector<HostEntry> read_hostfile(const std::string& path);

}  // namespace moe4d
