#include "launch/job_supervisor.h"

#include <poll.h>
#include <sys/wait.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <map>
#include <memory>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/error.h"
#include "launch/mpirun_command.h"
#include "launch/mpirun_output.h"
#include "launch/subprocess.h"

namespace moe4d {
namespace {

double unix_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string utc_stamp(double unix_seconds) {
  const std::time_t t = static_cast<std::time_t>(unix_seconds);
  std::tm tm{};
  gmtime_r(&t, &tm);
  return fmt::format("{:04}-{:02}-{:02} {:02}:{:02}:{:02}Z", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
                     tm.tm_min, tm.tm_sec);
}

struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};
using File = std::unique_ptr<std::FILE, FileCloser>;

// One attempt: mpirun running, its output being sorted into logs.
class Attempt {
 public:
  Attempt(const LaunchPlan& plan, const SupervisorOptions& options, LaunchLog& log, std::vector<File>& rank_logs,
          AttemptRecord& record)
      : plan_(plan), options_(options), log_(log), rank_logs_(rank_logs), record_(record) {}

  void run(const std::vector<std::string>& argv, const volatile std::sig_atomic_t* stop, bool* interrupted) {
    record_.start_unix = unix_now();
    for (size_t r = 0; r < rank_logs_.size(); ++r)
      if (rank_logs_[r])
        std::fprintf(rank_logs_[r].get(), "==== moe4d launch: attempt %d, rank %zu on %s, %s ====\n",
                     record_.attempt, r, plan_.host_of(int(r)).c_str(), utc_stamp(record_.start_unix).c_str());
    Subprocess mpirun = Subprocess::spawn(argv);
    double term_at = -1, kill_at = -1;
    bool stopping = false;
    for (;;) {
      pollfd fds[2];
      int n = 0;
      if (mpirun.stdout_fd() >= 0) fds[n++] = {mpirun.stdout_fd(), POLLIN, 0};
      if (mpirun.stderr_fd() >= 0) fds[n++] = {mpirun.stderr_fd(), POLLIN, 0};
      if (n > 0) ::poll(fds, n, 100);
      if (mpirun.stdout_fd() >= 0 && !mpirun.read_available(mpirun.stdout_fd(), &out_buf_)) flush_partial(&out_buf_);
      consume(&out_buf_);
      if (mpirun.stderr_fd() >= 0 && !mpirun.read_available(mpirun.stderr_fd(), &err_buf_)) flush_partial(&err_buf_);
      consume(&err_buf_);
      int status = 0;
      const bool exited = mpirun.poll_exit(&status);
      if (exited && mpirun.stdout_fd() < 0 && mpirun.stderr_fd() < 0) break;
      if (exited && n == 0) break;
      if (exited) continue;  // drain the pipes
      const double now = unix_now();
      // The first request becomes SIGUSR1 to mpirun, which forwards it to every rank and lets the
      // job end by itself (a SIGTERM or SIGINT to mpirun would end the ranks a second later, exit 1);
      // a second request ends the job.
      if (stop && *stop >= 1 && !stopping) {
        stopping = true;
        *interrupted = true;
        log_.line("stop requested: every rank finishes its step and writes a checkpoint (SIGUSR1 through mpirun); "
                  "send the signal again to end the job at once");
        ::kill(mpirun.pid(), SIGUSR1);
      }
      if (stop && *stop >= 2 && kill_at < 0) {
        log_.line("second stop request: sending SIGTERM to mpirun");
        ::kill(mpirun.pid(), SIGTERM);
        kill_at = now + options_.kill_grace_s;
      }
      if (parser_.failing() && record_.failure_unix < 0) {
        record_.failure_unix = now;
        term_at = now + options_.kill_grace_s;
      }
      if (term_at > 0 && now > term_at && kill_at < 0) {
        log_.line(fmt::format("a rank failed and mpirun is still running {:.0f} s later: sending it SIGTERM",
                              options_.kill_grace_s));
        ::kill(mpirun.pid(), SIGTERM);
        kill_at = now + options_.kill_grace_s;
      }
      if (kill_at > 0 && now > kill_at) {
        log_.line("mpirun did not end: sending SIGKILL to its process group");
        mpirun.signal_group(SIGKILL);
        kill_at = now + 3600;
      }
    }
    record_.end_unix = unix_now();
    const int status = mpirun.wait_status();
    record_.exit = describe_wait_status(status);
    record_.ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    for (File& f : rank_logs_)
      if (f) std::fflush(f.get());
    if (!record_.ok) describe_failure();
  }

  int exit_code() const { return exit_code_; }

 private:
  void flush_partial(std::string* buf) {
    if (!buf->empty() && buf->back() != '\n') buf->push_back('\n');
  }

  void consume(std::string* buf) {
    size_t start = 0;
    for (size_t nl; (nl = buf->find('\n', start)) != std::string::npos; start = nl + 1)
      handle(std::string_view(*buf).substr(start, nl - start));
    buf->erase(0, start);
  }

  void handle(std::string_view raw) {
    const OutputLine line = parse_output_line(raw);
    parser_.feed(line);
    if (line.rank < 0) {  // mpirun's own words
      if (line.text.rfind("mpirun: Forwarding signal", 0) == 0) {  // the stop request, announced above
        log_.file_only(line.text);
        return;
      }
      std::fprintf(stderr, "%s\n", line.text.c_str());
      log_.file_only(line.text);
      return;
    }
    if (line.rank < int(rank_logs_.size()) && rank_logs_[line.rank]) {
      std::FILE* f = rank_logs_[line.rank].get();
      std::fprintf(f, "%s\n", line.text.c_str());
      if (line.stderr_stream) std::fflush(f);
    }
    if (line.rank == 0) {
      std::FILE* term = line.stderr_stream ? stderr : stdout;
      std::fprintf(term, "%s\n", line.text.c_str());
      std::fflush(term);
      if (!line.stderr_stream) {
        const int step = progress_step(line.text);
        if (step >= 0) {
          if (record_.first_step < 0) {
            record_.first_step = step;
            record_.first_step_unix = unix_now();
          }
          record_.last_step = step;
        }
      }
    } else if (line.stderr_stream && line.rank < plan_.worker_num && is_rank_error(line.text)) {
      std::fprintf(stderr, "[rank %d %s] %s\n", line.rank, plan_.host_of(line.rank).c_str(), line.text.c_str());
    }
  }

  std::string rank_phrase(int rank) const {
    if (rank < 0 || rank >= plan_.worker_num) return fmt::format("rank {}", rank);
    return fmt::format("rank {} on host {} (local rank {})", rank, plan_.host_of(rank), plan_.ranks[rank].local_rank);
  }

  void describe_failure() {
    const RankFailure& f = parser_.failure();
    if (record_.failure_unix < 0) record_.failure_unix = record_.end_unix;
    std::string text;
    if (f.rank >= 0) {
      record_.failed_rank = f.rank;
      text = rank_phrase(f.rank) + " " + f.how;
    }
    if (f.message_rank >= 0) {
      if (record_.failed_rank < 0) record_.failed_rank = f.message_rank;
      if (!text.empty()) text += "; ";
      text += fmt::format("{} reported: {}", rank_phrase(f.message_rank), f.message);
      // A deadline names the ranks that never arrived: those are the ones to look at.
      if (!f.missing.empty()) {
        std::vector<std::string> where;
        for (int r : f.missing) where.push_back(rank_phrase(r));
        text += fmt::format(" [missing: {}]", fmt::join(where, ", "));
        record_.failed_rank = f.missing.front();  // the rank that aborted only reported it
      }
    }
    if (text.empty()) text = fmt::format("mpirun ended with {} without naming a rank", record_.exit);
    if (record_.failed_rank >= 0 && record_.failed_rank < plan_.worker_num)
      record_.failed_host = plan_.host_of(record_.failed_rank);
    record_.failure = text;
  }

  const LaunchPlan& plan_;
  const SupervisorOptions& options_;
  LaunchLog& log_;
  std::vector<File>& rank_logs_;
  AttemptRecord& record_;
  MpirunOutputParser parser_;
  std::string out_buf_, err_buf_;
  int exit_code_ = 1;
};

}  // namespace

LaunchLog::LaunchLog(const std::string& path) : path_(path) {
  if (path.empty()) return;
  file_ = std::fopen(path.c_str(), "a");
  if (!file_) fail("cannot write the launcher log {}: {}", path, std::strerror(errno));
}

LaunchLog::~LaunchLog() {
  if (file_) std::fclose(file_);
}

void LaunchLog::line(const std::string& text) {
  std::fprintf(stderr, "moe4d launch: %s\n", text.c_str());
  std::fflush(stderr);
  file_only("moe4d launch: " + text);
}

void LaunchLog::file_only(const std::string& text) {
  if (!file_) return;
  std::fprintf(file_, "[%s] %s\n", utc_stamp(unix_now()).c_str(), text.c_str());
  std::fflush(file_);
}

SupervisorResult supervise(const LaunchPlan& plan, const SupervisorOptions& options, LaunchLog& log,
                           const volatile std::sig_atomic_t* stop) {
  std::vector<File> rank_logs(plan.worker_num);
  if (!options.log_dir.empty()) {
    for (int r = 0; r < plan.worker_num; ++r) {
      const std::string path = fmt::format("{}/rank_{}.log", options.log_dir, r);
      rank_logs[r].reset(std::fopen(path.c_str(), "a"));
      if (!rank_logs[r]) fail("cannot write the rank log {}: {}", path, std::strerror(errno));
    }
  }
  SupervisorResult result;
  for (int attempt = 1;; ++attempt) {
    AttemptRecord record{.attempt = attempt};
    const std::vector<std::string>& argv = attempt == 1 ? options.command : options.restart_command;
    log.line(fmt::format("attempt {} of at most {}: {}", attempt, options.max_restarts + 1, shell_command(argv)));
    Attempt run(plan, options, log, rank_logs, record);
    run.run(argv, stop, &result.interrupted);
    result.exit_code = record.ok ? 0 : run.exit_code();
    result.attempts.push_back(record);
    if (record.ok) {
      log.line(fmt::format("attempt {} {} (steps {}..{} seen on rank 0)", attempt,
                           result.interrupted ? "stopped on request" : "finished", record.first_step,
                           record.last_step));
      result.ok = true;
      break;
    }
    log.line(fmt::format("attempt {} failed ({}; last step seen on rank 0: {}): {}", attempt, record.exit,
                         record.last_step, record.failure));
    if (result.interrupted) break;
    if (attempt > options.max_restarts) {
      if (options.max_restarts > 0) log.line(fmt::format("no restarts left (--max-restarts {})", options.max_restarts));
      break;
    }
    log.line(fmt::format("restart {} of {}: resuming from the latest checkpoint", attempt, options.max_restarts));
  }
  for (size_t i = 1; i < result.attempts.size(); ++i) {
    const AttemptRecord& before = result.attempts[i - 1];
    const AttemptRecord& after = result.attempts[i];
    if (after.first_step_unix > 0)
      log.line(fmt::format("restart {}: {:.2f} s from the failure of attempt {} to the first step of attempt {} "
                           "(step {})",
                           i, after.first_step_unix - before.failure_unix, before.attempt, after.attempt,
                           after.first_step));
  }
  return result;
}

nlohmann::json attempts_json(const SupervisorResult& result) {
  nlohmann::json attempts = nlohmann::json::array();
  for (const AttemptRecord& a : result.attempts) {
    nlohmann::json j = {{"attempt", a.attempt},         {"start_unix", a.start_unix}, {"end_unix", a.end_unix},
                        {"first_step_unix", a.first_step_unix}, {"first_step", a.first_step},
                        {"last_step", a.last_step},     {"ok", a.ok},                 {"exit", a.exit}};
    if (!a.ok)
      j.update({{"failure_unix", a.failure_unix}, {"failed_rank", a.failed_rank}, {"failed_host", a.failed_host},
                {"failure", a.failure}});
    attempts.push_back(std::move(j));
  }
  nlohmann::json restarts = nlohmann::json::array();
  for (size_t i = 1; i < result.attempts.size(); ++i)
    if (result.attempts[i].first_step_unix > 0)
      restarts.push_back(result.attempts[i].first_step_unix - result.attempts[i - 1].failure_unix);
  return {{"ok", result.ok},
          {"interrupted", result.interrupted},
          {"exit_code", result.exit_code},
          {"attempts", attempts},
          {"failure_to_first_step_s", restarts}};
}

}  // namespace moe4d
