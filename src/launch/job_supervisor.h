// launch/job_supervisor.h — runs mpirun, writes per-rank logs, and restarts a failed job.
//
// One attempt is one mpirun. Its rank-tagged output (mpirun_output.h) goes to LOG_DIR/rank_<r>.log
// (every line, both streams), rank 0's lines are echoed to this terminal as they come (progress),
// other ranks' error lines are echoed with their rank and host, and mpirun's own lines go to the
// terminal and LOG_DIR/launcher.log with everything the launcher says. When a rank dies or reports
// an error (a collective deadline, say), mpirun normally ends the job itself; if it is still running
// `kill_grace_s` later the supervisor sends it SIGTERM, then SIGKILL to its process group. A failed
// attempt is logged with the rank, its host and why (signal, exit code, the rank's error line), and,
// while restarts remain (torchrun's elastic agent: at most max_restarts), the job is started again
// with `restart_command`, which resumes from the latest checkpoint. `*stop` counts the launcher's
// stop requests (SIGINT/SIGTERM): the first is forwarded to the ranks as SIGUSR1 through mpirun
// (each finishes its step, checkpoints and exits 0; the attempt then counts as ok), the second sends
// mpirun SIGTERM (then SIGKILL after kill_grace_s); either way there is no restart.
#pragma once

#include <csignal>
#include <cstdio>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "launch/launch_plan.h"

namespace moe4d {

// The launcher's own log: each line to stderr and LOG_DIR/launcher.log, prefixed "moe4d launch: ".
class LaunchLog {
 public:
  explicit LaunchLog(const std::string& path);  // "" = terminal only
  ~LaunchLog();
  LaunchLog(const LaunchLog&) = delete;
  LaunchLog& operator=(const LaunchLog&) = delete;
  void line(const std::string& text);         // to both
  void file_only(const std::string& text);    // mpirun's raw lines, already shown on the terminal
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::FILE* file_ = nullptr;
};

struct SupervisorOptions {
  std::vector<std::string> command;          // mpirun argv of the first attempt
  std::vector<std::string> restart_command;  // mpirun argv of attempts after a failure
  int max_restarts = 0;
  std::string log_dir;                       // per-rank logs ("" = none)
  double kill_grace_s = 15;
};

struct AttemptRecord {
  int attempt = 1;
  double start_unix = 0, end_unix = 0;
  double first_step_unix = -1;   // rank 0's first progress line; -1 if none
  int first_step = -1, last_step = -1;
  bool ok = false;
  std::string exit;              // "exit 0", "signal 9 (Killed)"
  double failure_unix = -1;      // first evidence of a failure (a notice, an error line, or the exit)
  int failed_rank = -1;
  std::string failed_host;
  std::string failure;           // one line: which rank, which host, why
};

struct SupervisorResult {
  std::vector<AttemptRecord> attempts;
  bool ok = false;
  bool interrupted = false;  // a stop was requested (ok: the job then stopped cleanly)
  int exit_code = 1;  // 0 on success, else the last mpirun's exit code (128 + signal when killed)
};

SupervisorResult supervise(const LaunchPlan& plan, const SupervisorOptions& options, LaunchLog& log,
                           const volatile std::sig_atomic_t* stop);

nlohmann::json attempts_json(const SupervisorResult& result);

}  // namespace moe4d
