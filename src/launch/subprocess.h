// launch/subprocess.h — child processes with piped output, for mpirun and the preflight probes.
//
// A Subprocess owns one child started by fork/exec in its own process group (so that a signal to
// the group reaches mpirun and the local daemons it forks, and a Ctrl-C at the terminal reaches the
// launcher only, which decides what to forward). stdout and stderr are pipes the owner reads; stdin
// is /dev/null. The destructor kills and reaps a child that is still running. Move-only; not
// thread-safe.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace moe4d {

class Subprocess {
 public:
  // Starts argv[0] (searched in PATH) with argv. Throws moe4d::Error when fork or pipe fail; an
  // exec failure shows as exit status 127 with the reason on the child's stderr.
  static Subprocess spawn(const std::vector<std::string>& argv);

  Subprocess(Subprocess&& other) noexcept;
  Subprocess& operator=(Subprocess&& other) noexcept;
  Subprocess(const Subprocess&) = delete;
  Subprocess& operator=(const Subprocess&) = delete;
  ~Subprocess();

  pid_t pid() const { return pid_; }
  int stdout_fd() const { return out_fd_; }  // -1 once closed (EOF read)
  int stderr_fd() const { return err_fd_; }
  // Reads what is available from the pipe `fd` (one of the two above) into `sink`; false at EOF
  // (the pipe is then closed and its fd reads -1).
  bool read_available(int fd, std::string* sink);

  // Non-blocking: true once the child has exited; *wait_status is waitpid's status.
  bool poll_exit(int* wait_status);
  bool exited() const { return exited_; }
  int wait_status() const { return status_; }
  // Sends `sig` to the child's process group.
  void signal_group(int sig) const;

 private:
  Subprocess() = default;
  void reap();  // kills a child that still runs and waits for it
  void close_fds();

  pid_t pid_ = -1;
  int out_fd_ = -1, err_fd_ = -1;
  bool exited_ = false;
  int status_ = 0;
};

// What a finished command did.
struct CommandResult {
  bool timed_out = false;
  int wait_status = 0;  // waitpid status (when not timed out)
  std::string out, err;
  double seconds = 0;

  bool ok() const;             // exited with status 0
  std::string describe() const;  // "exit 255", "signal 9 (Killed)", "timed out after 20 s"
};

// Runs the commands concurrently and collects their output; a command still running after
// `timeout_s` is killed (SIGKILL to its group) and reported as timed out.
std::vector<CommandResult> run_commands(const std::vector<std::vector<std::string>>& commands, double timeout_s);

// "exit 2", "signal 9 (Killed)".
std::string describe_wait_status(int wait_status);

}  // namespace moe4d
