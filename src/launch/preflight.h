// launch/preflight.h — the checks `moe4d launch` runs on every host before it starts a job.
//
// One line per check and host, PASS / WARN / FAIL (the articles' list: password-less remote shell,
// synchronised clocks, jumbo frames; and what else makes a 64-rank job die minutes in): the host
// answers over the remote shell MPI will use; it runs the same moe4d build (version and binary
// SHA-256); its clock is within 1 s of this machine's (WARN beyond); the MTU of the interface MPI
// will use is >= 9000 (WARN below); its free memory holds its ranks as `moe4d plan` predicts them
// (FAIL if not); checkpoint.dir has room for two checkpoints (FAIL if not); the data and tokenizer
// files are readable (FAIL if not). Hosts are probed concurrently (host_probe.h).
#pragma once

#include <string>
#include <vector>

#include "config/config.h"
#include "launch/host_probe.h"
#include "launch/launch_plan.h"
#include "launch/subprocess.h"

namespace moe4d {

enum class CheckVerdict { kPass, kWarn, kFail };
const char* check_verdict_name(CheckVerdict verdict);  // "PASS", "WARN", "FAIL"

struct PreflightLine {
  CheckVerdict verdict = CheckVerdict::kPass;
  std::string host;
  std::string check;   // "remote shell", "build", "clock", "mtu", "memory", "disk", "files"
  std::string detail;
};

// What the preflight needs to know about the job.
struct PreflightJob {
  std::vector<std::string> remote_shell;  // agent argv (e.g. {"ssh", "-x"}); a host gets argv + host + command
  std::string exe;                         // this binary, the one mpirun starts on every host
  HostFacts reference;                     // this machine's probe facts: the build every host must match
  ProbeRequest request;                    // interfaces, files, checkpoint dir (address filled per host)
  double rank_memory_bytes = -1;           // predicted per rank; < 0: not predicted (memory_note says why)
  std::string memory_note;
  double checkpoint_bytes = 0;             // one checkpoint; 0: no checkpoints
  double timeout_s = 20;                   // per host, remote shell included
  int ranks_per_host = 1;
};

// Judges one host's probe result (pure; `seconds_before`/`seconds_after` bracket the call in Unix
// time so that the clock skew allows for the round trip). `local` hosts ran without a remote shell.
std::vector<PreflightLine> judge_host(const PreflightJob& job, const std::string& host, bool local,
                                      const CommandResult& result, double seconds_before, double seconds_after);

// Probes every host of `plan` (local hosts directly, as mpirun starts them without a remote shell)
// and judges the answers. `is_local[i]` says whether plan.hosts[i] is this machine.
std::vector<PreflightLine> run_preflight(const PreflightJob& job, const LaunchPlan& plan,
                                         const std::vector<bool>& is_local);

std::string format_preflight(const std::vector<PreflightLine>& lines);
bool preflight_failed(const std::vector<PreflightLine>& lines);

// moe4d plan's memory model for this config on `plan`'s hosts: bytes one rank needs (the peak over
// pipeline stages, without the planner's reserve). Throws moe4d::Error when the planner does not
// model the layout (explicit device lists, per-stage layer counts).
double predicted_rank_memory(const Config& config, const LaunchPlan& plan);
// Bytes of one checkpoint: fp32 parameters plus AdamW's two moments.
double predicted_checkpoint_bytes(const Config& config);

// Whether `host` names this machine: "localhost", its hostname, or an address of one of its interfaces.
bool is_this_machine(const std::string& host);

}  // namespace moe4d
