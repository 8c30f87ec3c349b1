// cli/cmd_launch.cc — `moe4d launch [flags] -- train CONFIG.yaml [train flags]`: msrun's launcher
// over OpenMPI's mpirun (hostfile, worker counts, per-rank logs, preflight, restarts).
// Flags -> LaunchRequest / PreflightJob / SupervisorOptions -> src/launch. This file is the only
// place the launcher reads the environment (OMPI_MCA_*, PATH) and installs signal handlers.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "cli/commands.h"
#include "config/config_loader.h"
#include "core/error.h"
#include "core/version.h"
#include "data/token_shard_format.h"
#include "launch/host_probe.h"
#include "launch/hostfile.h"
#include "launch/job_supervisor.h"
#include "launch/launch_plan.h"
#include "launch/mpirun_command.h"
#include "launch/preflight.h"
#include "parallel/layout_check.h"
#include "report/metrics_log.h"
#include "report/rank_times.h"

extern char** environ;

namespace moe4d {
namespace {


// SIGINT/SIGTERM: how many arrived and the first one; the supervisor forwards the request to mpirun.
volatile std::sig_atomic_t g_stop = 0, g_stop_signal = 0;
void on_stop_signal(int signal) {
  if (g_stop_signal == 0) g_stop_signal = signal;
  g_stop = g_stop + 1;
}

struct LaunchArgs {
  int worker_num = 0, local_worker_num = 0;
  std::string hostfile, master_addr, log_dir = "launch_log", mpirun = "mpirun";
  bool bind_core = false, dry_run = false, check_only = false, no_check = false;
  bool allow_cross_node_tp = false, oversubscribe = false;
  std::vector<std::string> mpi_args;
  int max_restarts = 0;
  double check_timeout = 20, kill_grace = 15;
  std::vector<std::string> program;
  // `--probe`: the remote side of the preflight.
  bool probe = false;
  ProbeRequest probe_request;
};

McaEnvironment mca_environment() {
  McaEnvironment env;
  for (char** e = environ; *e; ++e) {
    const std::string_view kv(*e);
    if (kv.substr(0, 9) != "OMPI_MCA_") continue;
    const size_t eq = kv.find('=');
    if (eq != std::string_view::npos) env[std::string(kv.substr(9, eq - 9))] = std::string(kv.substr(eq + 1));
  }
  return env;
}

std::vector<std::string> split_words(const std::string& text, char sep = ' ') {
  std::vector<std::string> words;
  std::string word;
  for (char c : text + sep) {
    if (c == sep || (sep == ' ' && c == '\t')) {
      if (!word.empty()) words.push_back(word);
      word.clear();
    } else {
      word += c;
    }
  }
  return words;
}

bool on_path(const std::string& program) {
  if (program.find('/') != std::string::npos) return ::access(program.c_str(), X_OK) == 0;
  const char* path = std::getenv("PATH");
  for (const std::string& dir : split_words(path ? path : "", ':'))
    if (::access((dir + "/" + program).c_str(), X_OK) == 0) return true;
  return false;
}

// OpenMPI's plm_rsh_agent: "ssh : rsh" by default, alternatives separated by ':', the first one
// found is used, with plm_rsh_args after it.
std::vector<std::string> remote_shell(const std::vector<std::string>& mpi_args, const McaEnvironment& env,
                                      std::string* agent_text) {
  *agent_text = mca_value("plm_rsh_agent", mpi_args, env).value_or("ssh : rsh");
  for (const std::string& alternative : split_words(*agent_text, ':')) {
    std::vector<std::string> argv = split_words(alternative);
    if (argv.empty() || !on_path(argv[0])) continue;
    for (const std::string& a : split_words(mca_value("plm_rsh_args", mpi_args, env).value_or("")))
      argv.push_back(a);
    return argv;
  }
  return {};
}

std::string absolute(const std::string& path) {
  std::error_code ec;
  return std::filesystem::absolute(path, ec).lexically_normal().string();
}

std::vector<std::string> data_files(const Config& config) {
  std::vector<std::string> files;
  for (const std::string& shard : {config.data.train, config.data.valid}) {
    if (shard.empty()) continue;
    const TokenShardPaths p = token_shard_paths(shard);
    files.push_back(absolute(p.bin));
    files.push_back(absolute(p.json));
  }
  if (!config.data.tokenizer.empty() && config.data.tokenizer != "bytes") files.push_back(absolute(config.data.tokenizer));
  return files;
}

// The metrics file the trainer will write (train --metrics, train.metrics_file, checkpoint.dir).
std::string metrics_path(const Config& config, const std::vector<std::string>& program) {
  for (size_t i = 0; i + 1 < program.size(); ++i)
    if (program[i] == "--metrics") return program[i + 1];
  for (const std::string& a : program)
    if (a.rfind("--metrics=", 0) == 0) return a.substr(10);
  return config.metrics_path();
}

// The program's `--set KEY=VALUE` overrides, so that the launcher checks the config the ranks train.
std::vector<std::string> config_overrides(const std::vector<std::string>& program) {
  std::vector<std::string> overrides;
  for (size_t i = 0; i < program.size(); ++i) {
    if (program[i] == "--set" && i + 1 < program.size()) overrides.push_back(program[++i]);
    else if (program[i].rfind("--set=", 0) == 0) overrides.push_back(program[i].substr(6));
  }
  return overrides;
}

bool has_flag(const std::vector<std::string>& program, const std::string& flag) {
  for (const std::string& a : program)
    if (a == flag || a.rfind(flag + "=", 0) == 0) return true;
  return false;
}

double unix_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

int run_probe(const LaunchArgs& args) {
  const HostFacts facts = probe_this_host(args.probe_request, moe4d_version());
  fmt::print("{}\n", host_facts_to_json(facts).dump());
  return 0;
}

int run_launch(LaunchArgs args) {
  const double t_start = unix_now();
  if (args.probe) return run_probe(args);
  if (args.program.empty())
    fail("nothing to launch: give the moe4d command after '--', e.g. moe4d launch --worker_num 8 -- train "
         "CONFIG.yaml");
  if (args.check_only && args.no_check) fail("--check and --no-check contradict each other");
  if (args.max_restarts < 0) fail("--max-restarts must be >= 0, got {}", args.max_restarts);
  std::vector<std::string> mpi_args;
  for (const std::string& a : args.mpi_args)
    for (const std::string& w : split_words(a)) mpi_args.push_back(w);
  const McaEnvironment env = mca_environment();

  LaunchRequest request{.hostfile = args.hostfile,
                        .worker_num = args.worker_num,
                        .local_worker_num = args.local_worker_num,
                        .oversubscribe = args.oversubscribe,
                        .allow_cross_node_tp = args.allow_cross_node_tp};
  if (!args.hostfile.empty()) request.hosts = read_hostfile(args.hostfile);

  const bool training = args.program[0] == "train";
  std::optional<Config> config;
  if (training) {
    if (args.program.size() < 2) fail("train needs a CONFIG.yaml after it");
    config = load_config(args.program[1], config_overrides(args.program));
  }
  if (args.max_restarts > 0 && (!training || config->checkpoint.dir.empty()))
    fail("--max-restarts {} needs a training job with checkpoint.dir set (a restart resumes from the latest "
         "checkpoint)",
         args.max_restarts);
  const LaunchPlan plan = plan_launch(request, config ? &config->parallel : nullptr, config ? config->source : "");
  if (config) validate_layout(config->model, config->parallel, config->train.global_batch_size, plan.worker_num);
  std::vector<bool> is_local;
  for (const std::string& h : plan.hosts) is_local.push_back(is_this_machine(h));
  // msrun's scheduler address: with OpenMPI the rendezvous is mpirun, which runs where the launcher runs.
  std::string master_problem;
  if (!args.master_addr.empty() && !is_this_machine(args.master_addr))
    master_problem = fmt::format("--master_addr {} is not this machine: with OpenMPI the job's rendezvous is mpirun "
                                 "itself, so run moe4d launch on {} (or drop --master_addr)",
                                 args.master_addr, args.master_addr);
  if (!master_problem.empty() && !args.dry_run) fail("{}", master_problem);

  std::error_code ec;
  const std::string exe = std::filesystem::read_symlink("/proc/self/exe", ec).string();
  std::vector<std::string> program = {exe};
  program.insert(program.end(), args.program.begin(), args.program.end());
  MpirunOptions mpirun{.mpirun = args.mpirun, .bind_core = args.bind_core, .oversubscribe = args.oversubscribe,
                       .mpi_args = mpi_args};
  const std::vector<std::string> command = mpirun_command(plan, mpirun, program);
  std::vector<std::string> restart_program = program;
  if (training && !has_flag(args.program, "--resume") && !has_flag(args.program, "--resume-from"))
    restart_program.push_back("--resume");
  const std::vector<std::string> restart_command = mpirun_command(plan, mpirun, restart_program);

  fmt::print("{}", placement_table(plan));
  fmt::print("mpirun command:\n  {}\n", shell_command(command));
  if (args.max_restarts > 0) fmt::print("restart command:\n  {}\n", shell_command(restart_command));
  if (!master_problem.empty()) fmt::print("note: {}\n", master_problem);
  std::fflush(stdout);
  if (args.dry_run) return 0;

  if (!args.no_check) {
    PreflightJob job;
    std::string agent;
    job.remote_shell = remote_shell(mpi_args, env, &agent);
    job.exe = exe;
    job.timeout_s = args.check_timeout;
    job.ranks_per_host = plan.local_worker_num;
    if (config) {
      job.request.readable = data_files(*config);
      if (!config->checkpoint.dir.empty()) {
        job.request.disk_dir = absolute(config->checkpoint.dir);
        job.checkpoint_bytes = predicted_checkpoint_bytes(*config);
      }
      try {
        job.rank_memory_bytes = predicted_rank_memory(*config, plan);
      } catch (const Error& e) {
        job.memory_note = e.what();
      }
    } else {
      job.memory_note = "not a training job";
    }
    if (auto ifaces = mca_value("btl_tcp_if_include", mpi_args, env))
      job.request.interfaces = split_words(*ifaces, ',');
    job.reference = probe_this_host(job.request, moe4d_version());
    bool remote = false;
    for (bool local : is_local) remote = remote || !local;
    if (remote && job.remote_shell.empty())
      fail("no remote shell for the hosts: plm_rsh_agent '{}' names no program found in PATH", agent);
    const std::vector<PreflightLine> lines = run_preflight(job, plan, is_local);
    fmt::print("preflight ({} hosts):\n{}", plan.hosts.size(), format_preflight(lines));
    std::fflush(stdout);
    if (preflight_failed(lines)) {
      std::fprintf(stderr, "moe4d: error: preflight failed (FAIL lines above); nothing was started\n");
      return 3;
    }
    if (args.check_only) return 0;
  } else if (args.check_only) {
    return 0;
  }

  std::filesystem::create_directories(args.log_dir, ec);
  if (ec) fail("cannot create --log_dir {}: {}", args.log_dir, ec.message());
  LaunchLog log(args.log_dir + "/launcher.log");
  log.line(fmt::format("{} ranks on {} hosts; per-rank logs in {}/rank_<r>.log", plan.worker_num, plan.hosts.size(),
                       args.log_dir));
  struct sigaction sa{};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  ::sigaction(SIGINT, &sa, nullptr);
  ::sigaction(SIGTERM, &sa, nullptr);
  ::signal(SIGPIPE, SIG_IGN);

  SupervisorOptions options{.command = command,
                            .restart_command = restart_command,
                            .max_restarts = args.max_restarts,
                            .log_dir = args.log_dir,
                            .kill_grace_s = args.kill_grace};
  const double t_mpirun = unix_now();
  const SupervisorResult result = supervise(plan, options, log, &g_stop);
  nlohmann::json summary = attempts_json(result);
  summary["launcher_setup_s"] = t_mpirun - t_start;
  summary["hosts"] = plan.hosts;
  summary["worker_num"] = plan.worker_num;
  if (config && result.ok) {
    const std::string metrics = metrics_path(*config, args.program);
    try {
      const MetricsLog metrics_log = read_metrics_log(metrics);
      const RankTimeSummary slow = summarize_rank_times(metrics_log);
      if (slow.ranks > 0) {
        log.line(describe_rank_times(slow));
        summary["slowest_rank"] = rank_times_json(slow);
      }
    } catch (const Error& e) {
      log.line(fmt::format("no per-rank step times: {}", e.what()));
    }
  }
  std::ofstream(args.log_dir + "/launch_summary.json") << summary.dump(2) << "\n";
  const char* signal_name = g_stop_signal == SIGINT ? "SIGINT" : "SIGTERM";
  if (result.interrupted && result.ok) {
    log.line(fmt::format("job stopped by {} (forwarded to every rank as SIGUSR1); exit 0 (logs in {})", signal_name,
                         args.log_dir));
    return 0;
  }
  if (result.interrupted) {  // ended by a second request, or before the ranks could stop cleanly
    log.line(fmt::format("job ended by {}: {} (logs in {})", signal_name, result.attempts.back().failure,
                         args.log_dir));
    return 128 + (g_stop_signal ? int(g_stop_signal) : SIGTERM);
  }
  if (!result.ok) log.line(fmt::format("job failed: {} (logs in {})", result.attempts.back().failure, args.log_dir));
  return result.exit_code == 0 && !result.ok ? 1 : result.exit_code;
}

}  // namespace

void add_launch_command(CLI::App& app) {
  auto args = std::make_shared<LaunchArgs>();
  CLI::App* cmd = app.add_subcommand(
      "launch", "start a job on many hosts through mpirun, as msrun does: moe4d launch [flags] -- train CONFIG.yaml");
  cmd->add_option("--worker_num", args->worker_num, "ranks in all (default: hosts x local_worker_num)");
  cmd->add_option("--local_worker_num", args->local_worker_num, "ranks per host (default: the hostfile's slots)");
  cmd->add_option("--hostfile", args->hostfile, "hosts, 'HOST slots=N' (msrun/OpenMPI) or 'HOST:N' lines");
  cmd->add_option("--master_addr", args->master_addr, "this machine's address (mpirun is the rendezvous)");
  cmd->add_option("--log_dir", args->log_dir, "per-rank logs rank_<r>.log, launcher.log, launch_summary.json")
      ->capture_default_str();
  cmd->add_flag("--bind_core", args->bind_core, "pin each rank to a core (mpirun --bind-to core)");
  cmd->add_flag("--dry-run", args->dry_run, "print the placement table and the mpirun command; start nothing");
  cmd->add_option("--mpi-arg", args->mpi_args, "argument(s) for mpirun, split at spaces; repeatable")
      ->allow_extra_args(false);
  cmd->add_flag("--allow-cross-node-tp", args->allow_cross_node_tp, "allow tensor-parallel groups to span hosts");
  cmd->add_flag("--oversubscribe", args->oversubscribe, "allow more ranks on a host than its slots");
  cmd->add_flag("--check", args->check_only, "run the preflight checks only");
  cmd->add_flag("--no-check", args->no_check, "skip the preflight checks");
  cmd->add_option("--check-timeout", args->check_timeout, "seconds a host has to answer the preflight")
      ->check(CLI::PositiveNumber)->capture_default_str();
  cmd->add_option("--max-restarts", args->max_restarts, "restart a failed training job from its latest checkpoint "
                  "at most this many times")->capture_default_str();
  cmd->add_option("--kill-grace", args->kill_grace, "seconds mpirun may take to end a failed job before SIGTERM")
      ->check(CLI::PositiveNumber)->capture_default_str();
  cmd->add_option("--mpirun", args->mpirun, "the mpirun program")->capture_default_str();
  cmd->add_option("command", args->program, "the moe4d command every rank runs (after --)");
  // The remote side of the preflight (run by the launcher over the remote shell, not by users).
  // Group "" hides them from --help.
  cmd->add_flag("--probe", args->probe, "answer the preflight: this host's facts as one JSON line")->group("");
  cmd->add_option("--probe-address", args->probe_request.address)->group("");
  cmd->add_option("--probe-iface", args->probe_request.interfaces)->group("");
  cmd->add_option("--probe-read", args->probe_request.readable)->group("");
  cmd->add_option("--probe-disk", args->probe_request.disk_dir)->group("");
  cmd->callback([args] {
    const int code = run_launch(*args);
    if (code != 0) throw CLI::RuntimeError(code);
  });
}

}  // namespace moe4d
