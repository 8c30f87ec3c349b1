#include "launch/preflight.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cmath>

#include <fmt/format.h>

#include "core/error.h"
#include "launch/mpirun_command.h"
#include "plan/layout.h"
#include "plan/layout_evaluator.h"
#include "plan/model_source.h"
#include "plan/param_count.h"

namespace moe4d {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
constexpr double kMaxClockSkew = 1.0;  // seconds (the articles: NTP on every node)
constexpr int kJumboMtu = 9000;

double unix_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string first_line(const std::string& text) {
  std::string t = text;
  while (!t.empty() && (t.back() == '\n' || t.back() == '\r')) t.pop_back();
  const size_t nl = t.rfind('\n');
  return nl == std::string::npos ? t : t.substr(nl + 1);
}

}  // namespace

const char* check_verdict_name(CheckVerdict verdict) {
  switch (verdict) {
    case CheckVerdict::kPass: return "PASS";
    case CheckVerdict::kWarn: return "WARN";
    case CheckVerdict::kFail: return "FAIL";
  }
  return "?";
}

std::vector<PreflightLine> judge_host(const PreflightJob& job, const std::string& host, bool local,
                                      const CommandResult& result, double before, double after) {
  using V = CheckVerdict;
  std::vector<PreflightLine> out;
  const auto add = [&](V v, const char* check, std::string detail) {
    out.push_back({.verdict = v, .host = host, .check = check, .detail = std::move(detail)});
  };
  const std::string shell = job.remote_shell.empty() ? "(none)" : shell_command(job.remote_shell);
  HostFacts f;
  std::string bad_answer;
  if (result.ok()) {
    try {
      f = host_facts_from_json(result.out);
    } catch (const Error& e) {
      bad_answer = e.what();
    }
  }
  if (!result.ok() || !bad_answer.empty()) {
    std::string why = !bad_answer.empty() ? bad_answer : result.describe();
    // SIGILL here, or 132 = 128 + SIGILL from a remote shell: the binary uses instructions this CPU lacks.
    const int ws = result.wait_status;
    if (!result.timed_out && ((WIFSIGNALED(ws) && WTERMSIG(ws) == SIGILL) || (WIFEXITED(ws) && WEXITSTATUS(ws) == 132)))
      why += ": the moe4d binary uses instructions this CPU lacks (a -DMOE4D_NATIVE=ON build from another "
             "machine?); install the default portable build";
    const std::string err = first_line(result.err);
    if (!err.empty()) why += ": " + err;
    if (local) add(V::kFail, "remote shell", fmt::format("this machine's probe failed ({})", why));
    else add(V::kFail, "remote shell", fmt::format("did not answer over '{} {}' ({})", shell, host, why));
    return out;
  }
  if (local)
    add(V::kPass, "remote shell", fmt::format("this machine (mpirun starts its ranks without a remote shell), {}",
                                              f.hostname));
  else
    add(V::kPass, "remote shell", fmt::format("answered over '{} {}' in {:.2f} s as {}", shell, host, after - before,
                                              f.hostname));

  const HostFacts& ref = job.reference;
  if (f.version != ref.version)
    add(V::kFail, "build", fmt::format("runs '{}', this machine '{}'", f.version, ref.version));
  else if (f.exe_sha256 != ref.exe_sha256)
    add(V::kFail, "build", fmt::format("{} has SHA-256 {}..., this machine's {}... ({}); install the same build on "
                                       "every host",
                                       f.exe, f.exe_sha256.substr(0, 16), ref.exe_sha256.substr(0, 16), ref.exe));
  else
    add(V::kPass, "build", fmt::format("{}, SHA-256 {}...", f.version, f.exe_sha256.substr(0, 16)));

  if (!f.cpu_missing.empty())
    add(V::kFail, "cpu", fmt::format("{} lacks {} that {} was compiled for (a -DMOE4D_NATIVE=ON build from another "
                                     "machine); install the default portable build",
                                     f.cpu_model, f.cpu_missing, f.exe));
  else
    add(V::kPass, "cpu", fmt::format("{} runs what the binary uses ({})", f.cpu_model,
                                     f.cpu_needed.empty() ? "baseline x86-64" : f.cpu_needed));

  // The probe read its clock somewhere between `before` and `after` on ours.
  const double mid = 0.5 * (before + after), slack = 0.5 * (after - before);
  const double skew = f.unix_time - mid;
  if (std::fabs(skew) - slack > kMaxClockSkew)
    add(V::kWarn, "clock", fmt::format("{:+.2f} s from this machine (more than {:.0f} s: run NTP/chrony on every "
                                       "host; deadlines and logs compare clocks)",
                                       skew, kMaxClockSkew));
  else
    add(V::kPass, "clock", fmt::format("{:+.3f} s from this machine (+-{:.3f} s)", skew, slack));

  if (f.mtu.empty()) {
    add(V::kWarn, "mtu", fmt::format("no interface found for MPI ({})", f.interface_note));
  } else {
    std::string smallest;
    int mtu = 0;
    for (const auto& [name, value] : f.mtu)
      if (smallest.empty() || value < mtu) smallest = name, mtu = value;
    if (mtu <= 0)
      add(V::kWarn, "mtu", fmt::format("the MTU of {} could not be read ({})", smallest, f.interface_note));
    else if (mtu < kJumboMtu)
      add(V::kWarn, "mtu", fmt::format("{} has MTU {} ({}), below {}: enable jumbo frames for MPI's traffic",
                                       smallest, mtu, f.interface_note, kJumboMtu));
    else
      add(V::kPass, "mtu", fmt::format("{} has MTU {} ({})", smallest, mtu, f.interface_note));
  }

  if (job.rank_memory_bytes < 0) {
    add(V::kWarn, "memory", fmt::format("not predicted: {}; {:.2f} GiB available", job.memory_note,
                                        f.mem_available / kGiB));
  } else {
    const double need = job.rank_memory_bytes * job.ranks_per_host;
    const std::string text = fmt::format("{} ranks x {:.3f} GiB (moe4d plan's model) = {:.3f} GiB, {:.2f} GiB "
                                         "available",
                                         job.ranks_per_host, job.rank_memory_bytes / kGiB, need / kGiB,
                                         f.mem_available / kGiB);
    if (need > f.mem_available) add(V::kFail, "memory", text + ": will not fit; use more hosts, TP/PP/EP or ZeRO");
    else if (need > 0.9 * f.mem_available) add(V::kWarn, "memory", text + " (over 90%)");
    else add(V::kPass, "memory", text);
  }

  if (job.checkpoint_bytes > 0) {
    const double need = 2 * job.checkpoint_bytes;
    const std::string text = fmt::format("{} has {:.2f} GiB free for checkpoint.dir {}, two checkpoints need {:.3f} "
                                         "GiB",
                                         f.disk_path, f.disk_free / kGiB, job.request.disk_dir, need / kGiB);
    if (f.disk_free < 0) add(V::kFail, "disk", "cannot measure free space for checkpoint.dir " + job.request.disk_dir);
    else if (f.disk_free < need) add(V::kFail, "disk", text);
    else add(V::kPass, "disk", text);
  }

  if (!job.request.readable.empty()) {
    if (f.unreadable.empty()) {
      add(V::kPass, "files", fmt::format("{} data/tokenizer files readable", job.request.readable.size()));
    } else {
      for (const auto& [path, why] : f.unreadable) add(V::kFail, "files", fmt::format("cannot read {}: {}", path, why));
    }
  }
  return out;
}

std::vector<PreflightLine> run_preflight(const PreflightJob& job, const LaunchPlan& plan,
                                         const std::vector<bool>& is_local) {
  std::vector<std::vector<std::string>> commands;
  for (size_t i = 0; i < plan.hosts.size(); ++i) {
    ProbeRequest request = job.request;
    request.address = plan.hosts[i];
    const std::vector<std::string> probe = probe_command(job.exe, request);
    if (is_local[i]) {
      commands.push_back(probe);
    } else {
      // ssh-style agents take the remote command as words the remote shell joins: pass one
      // shell-quoted string, exactly as mpirun passes its orted command.
      std::vector<std::string> argv = job.remote_shell;
      argv.push_back(plan.hosts[i]);
      argv.push_back(shell_command(probe));
      commands.push_back(argv);
    }
  }
  const double before = unix_now();
  const std::vector<CommandResult> results = run_commands(commands, job.timeout_s);
  std::vector<PreflightLine> lines;
  for (size_t i = 0; i < plan.hosts.size(); ++i) {
    // Each command started at `before` and ended `seconds` later.
    auto host_lines = judge_host(job, plan.hosts[i], is_local[i], results[i], before, before + results[i].seconds);
    lines.insert(lines.end(), host_lines.begin(), host_lines.end());
  }
  return lines;
}

std::string format_preflight(const std::vector<PreflightLine>& lines) {
  size_t host_width = 4, check_width = 5;
  for (const PreflightLine& l : lines) {
    host_width = std::max(host_width, l.host.size());
    check_width = std::max(check_width, l.check.size());
  }
  std::string out;
  for (const PreflightLine& l : lines)
    out += fmt::format("{}  {:<{}}  {:<{}}  {}\n", check_verdict_name(l.verdict), l.host, host_width, l.check,
                       check_width, l.detail);
  return out;
}

bool preflight_failed(const std::vector<PreflightLine>& lines) {
  for (const PreflightLine& l : lines)
    if (l.verdict == CheckVerdict::kFail) return true;
  return false;
}

double predicted_rank_memory(const Config& config, const LaunchPlan& plan) {
  PlanContext ctx;
  ctx.model_name = config.source;
  ctx.model = config.model;
  ctx.setup = setup_from_config(config);
  ctx.cluster.name = "launch";
  ctx.cluster.nodes = static_cast<int>(plan.hosts.size());
  ctx.cluster.devices_per_node = plan.local_worker_num;
  ctx.cluster.device.memory_bytes = 1;  // the reserve is left out below
  ctx.cluster.device.peak_flops[0] = 1;
  const Layout layout =
      layout_from_parallel_config(config.parallel, config.train.global_batch_size, plan.worker_num);
  if (std::string problem = layout_problem(ctx, layout); !problem.empty()) fail("{}", problem);
  LayoutEvaluator evaluator(ctx);
  const MemoryBreakdown m = evaluator.memory(layout);
  return m.total() - m.reserve;
}

double predicted_checkpoint_bytes(const Config& config) {
  return count_model_params(config.model).total() * 3 * sizeof(float);
}

bool is_this_machine(const std::string& host) {
  if (host == "localhost") return true;
  char name[256] = {0};
  ::gethostname(name, sizeof name - 1);
  if (host == name) return true;
  in_addr want{};
  if (::inet_pton(AF_INET, host.c_str(), &want) != 1) return false;
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return false;
  bool found = false;
  for (ifaddrs* a = list; a && !found; a = a->ifa_next) {
    if (!a->ifa_addr || a->ifa_addr->sa_family != AF_INET) continue;
    found = reinterpret_cast<const sockaddr_in*>(a->ifa_addr)->sin_addr.s_addr == want.s_addr;
  }
  ::freeifaddrs(list);
  return found;
}

}  // namespace moe4d
