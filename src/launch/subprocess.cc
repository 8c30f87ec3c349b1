#include "launch/subprocess.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <utility>

#include <fmt/format.h>

#include "core/error.h"

namespace moe4d {

Subprocess Subprocess::spawn(const std::vector<std::string>& argv) {
  if (argv.empty()) fail("internal: empty command");
  int out[2], err[2];
  if (::pipe2(out, O_CLOEXEC) != 0) fail("pipe: {}", std::strerror(errno));
  if (::pipe2(err, O_CLOEXEC) != 0) {
    ::close(out[0]);
    ::close(out[1]);
    fail("pipe: {}", std::strerror(errno));
  }
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0) fail("fork: {}", std::strerror(errno));
  if (pid == 0) {
    // Child: only async-signal-safe calls until exec.
    ::setpgid(0, 0);
    const int null = ::open("/dev/null", O_RDONLY);
    if (null >= 0) ::dup2(null, 0);
    ::dup2(out[1], 1);
    ::dup2(err[1], 2);
    ::execvp(args[0], args.data());
    const char* why = std::strerror(errno);
    (void)!::write(2, "cannot run ", 11);
    (void)!::write(2, args[0], std::strlen(args[0]));
    (void)!::write(2, ": ", 2);
    (void)!::write(2, why, std::strlen(why));
    (void)!::write(2, "\n", 1);
    ::_exit(127);
  }
  ::setpgid(pid, pid);  // also in the parent, so that signal_group works before the child runs
  ::close(out[1]);
  ::close(err[1]);
  ::fcntl(out[0], F_SETFL, O_NONBLOCK);
  ::fcntl(err[0], F_SETFL, O_NONBLOCK);
  Subprocess p;
  p.pid_ = pid;
  p.out_fd_ = out[0];
  p.err_fd_ = err[0];
  return p;
}

Subprocess::Subprocess(Subprocess&& other) noexcept
    : pid_(std::exchange(other.pid_, -1)),
      out_fd_(std::exchange(other.out_fd_, -1)),
      err_fd_(std::exchange(other.err_fd_, -1)),
      exited_(other.exited_),
      status_(other.status_) {}

Subprocess& Subprocess::operator=(Subprocess&& other) noexcept {
  if (this != &other) {
    reap();
    close_fds();
    pid_ = std::exchange(other.pid_, -1);
    out_fd_ = std::exchange(other.out_fd_, -1);
    err_fd_ = std::exchange(other.err_fd_, -1);
    exited_ = other.exited_;
    status_ = other.status_;
  }
  return *this;
}

Subprocess::~Subprocess() {
  reap();
  close_fds();
}

void Subprocess::reap() {
  if (pid_ > 0 && !exited_) {
    signal_group(SIGKILL);
    ::waitpid(pid_, &status_, 0);
    exited_ = true;
  }
}

void Subprocess::close_fds() {
  if (out_fd_ >= 0) ::close(out_fd_);
  if (err_fd_ >= 0) ::close(err_fd_);
  out_fd_ = err_fd_ = -1;
}

bool Subprocess::read_available(int fd, std::string* sink) {
  char buf[65536];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n > 0) {
      sink->append(buf, size_t(n));
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
    if (n < 0 && errno == EINTR) continue;
    ::close(fd);  // EOF or a read error: this pipe is done
    if (fd == out_fd_) out_fd_ = -1;
    if (fd == err_fd_) err_fd_ = -1;
    return false;
  }
}

bool Subprocess::poll_exit(int* wait_status) {
  if (!exited_) {
    int status = 0;
    const pid_t r = ::waitpid(pid_, &status, WNOHANG);
    if (r == pid_) {
      exited_ = true;
      status_ = status;
    }
  }
  if (exited_ && wait_status) *wait_status = status_;
  return exited_;
}

void Subprocess::signal_group(int sig) const {
  if (pid_ > 0 && !exited_) ::kill(-pid_, sig);
}

std::string describe_wait_status(int wait_status) {
  if (WIFEXITED(wait_status)) return fmt::format("exit {}", WEXITSTATUS(wait_status));
  if (WIFSIGNALED(wait_status))
    return fmt::format("signal {} ({})", WTERMSIG(wait_status), ::strsignal(WTERMSIG(wait_status)));
  return fmt::format("wait status {}", wait_status);
}

bool CommandResult::ok() const { return !timed_out && WIFEXITED(wait_status) && WEXITSTATUS(wait_status) == 0; }

std::string CommandResult::describe() const {
  if (timed_out) return fmt::format("timed out after {:.0f} s", seconds);
  return describe_wait_status(wait_status);
}

std::vector<CommandResult> run_commands(const std::vector<std::vector<std::string>>& commands, double timeout_s) {
  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  std::vector<Subprocess> procs;
  std::vector<CommandResult> results(commands.size());
  for (const auto& argv : commands) procs.push_back(Subprocess::spawn(argv));
  std::vector<bool> done(commands.size(), false);
  size_t remaining = commands.size();
  while (remaining > 0) {
    std::vector<pollfd> fds;
    for (size_t i = 0; i < procs.size(); ++i) {
      if (procs[i].stdout_fd() >= 0) fds.push_back({procs[i].stdout_fd(), POLLIN, 0});
      if (procs[i].stderr_fd() >= 0) fds.push_back({procs[i].stderr_fd(), POLLIN, 0});
    }
    ::poll(fds.data(), fds.size(), 50);
    const double elapsed = std::chrono::duration<double>(Clock::now() - t0).count();
    for (size_t i = 0; i < procs.size(); ++i) {
      if (done[i]) continue;
      Subprocess& p = procs[i];
      if (p.stdout_fd() >= 0) p.read_available(p.stdout_fd(), &results[i].out);
      if (p.stderr_fd() >= 0) p.read_available(p.stderr_fd(), &results[i].err);
      int status = 0;
      if (p.poll_exit(&status) && p.stdout_fd() < 0 && p.stderr_fd() < 0) {
        results[i].wait_status = status;
        results[i].seconds = elapsed;
        done[i] = true;
        --remaining;
      } else if (elapsed > timeout_s) {
        // A remote shell that never answers; its output so far stays in the result.
        p.signal_group(SIGKILL);
        results[i].timed_out = true;
        results[i].seconds = elapsed;
        done[i] = true;
        --remaining;
      }
    }
  }
  return results;
}

}  // namespace moe4d
