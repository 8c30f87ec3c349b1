// Whole jobs through `moe4d launch` on two fake hosts (tests/launch/fake_rsh.sh: every hostfile
// entry 127.0.0.x gets its own UTS namespace, hence its own orted and node to MPI; TCP over
// loopback). The real moe4d binary, the real mpirun: placement, per-rank logs, preflight FAILs, a
// job that reproduces the single-rank losses, cross-node TP, oversubscription, and a restart after
// kill -9 whose metrics equal an uninterrupted run's bit for bit.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "../train/train_fixture.h"
#include "config/config_loader.h"
#include "launch/subprocess.h"

namespace moe4d::test {
namespace {

namespace fs = std::filesystem;
const std::string kBin = MOE4D_BIN;
const std::string kRsh = FAKE_RSH;
const std::string kMpiArgs = "--mca btl tcp,self --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo";

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

struct Shell {
  int status = -1;  // exit status
  std::string out;  // stdout + stderr
};

// Runs a shell command line, both streams captured.
Shell sh(const std::string& command) {
  const CommandResult r = run_commands({{"/bin/sh", "-c", command + " 2>&1"}}, 600)[0];
  return {WIFEXITED(r.wait_status) ? WEXITSTATUS(r.wait_status) : 128 + WTERMSIG(r.wait_status), r.out};
}

double unix_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// Step -> loss of a metrics file; fails the test when a step is repeated or missing.
std::vector<double> losses_of(const std::string& metrics) {
  std::vector<double> losses;
  std::ifstream in(metrics);
  for (std::string line; std::getline(in, line);) {
    const auto j = nlohmann::json::parse(line);
    EXPECT_EQ(j["step"].get<int64_t>(), int64_t(losses.size()) + 1) << metrics << ": steps not 1, 2, 3, ...";
    losses.push_back(j["loss"].get<double>());
  }
  return losses;
}

class LaunchJob : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir("moe4d-launch");
    write_synthetic_shard(dir_->file("data.bin"), 64, 20000);
    ::setenv("OMPI_MCA_plm_rsh_agent", kRsh.c_str(), 1);  // the launcher's preflight reads it too
    std::ofstream(dir_->file("hosts")) << "# two fake nodes\n127.0.0.2 slots=2\n127.0.0.3 slots=2\n";
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  void SetUp() override {
    if (sh("unshare --uts true").status != 0) GTEST_SKIP() << "unshare --uts is not permitted here";
  }

  // The tiny MoE on a layout; checkpoints every 4 steps into DIR/<name>/ckpt.
  static std::string write_config(const std::string& name, int dp, int ep, int tp, int steps, int micro_batch_num = 1,
                                  double collective_timeout = 0) {
    Config c = tiny_training_config(dir_->file("data.bin"));
    // `train` checks the shard header's tokenizer (bytes: 257 ids) fits the model's vocabulary;
    // 260 rows also divide over TP 2 and 4.
    c.model.vocab_size = 260;
    c.parallel.data_parallel = dp;
    c.parallel.expert_parallel = ep;
    c.parallel.tensor_parallel = tp;
    c.parallel.micro_batch_num = micro_batch_num;
    c.train.steps = steps;
    if (collective_timeout > 0) c.parallel.collective_timeout = collective_timeout;
    fs::create_directories(dir_->file(name));
    c.checkpoint.dir = dir_->file(name + "/ckpt");
    c.checkpoint.interval = 4;
    const std::string path = dir_->file(name + "/job.yaml");
    std::ofstream(path) << config_to_yaml(c);
    return path;
  }

 public:  // also used by run_with_fault below
  static std::string launch(const std::string& flags, const std::string& config, const std::string& train_flags = "") {
    return fmt::format("{} launch --hostfile {} --mpi-arg '{}' {} -- train {} {}", kBin, dir_->file("hosts"), kMpiArgs,
                       flags, config, train_flags);
  }

  // The 2 hosts x 2 ranks DP2 x EP2 run of 16 steps, uninterrupted (run once, shared by tests).
  static const std::string& two_node_run() {
    static std::string metrics;
    if (metrics.empty()) {
      const std::string cfg = write_config("two_node", 2, 2, 1, 16);
      const Shell r = sh(launch("--log_dir " + dir_->file("two_node/logs"), cfg));
      EXPECT_EQ(r.status, 0) << r.out;
      two_node_output_ = r.out;
      metrics = dir_->file("two_node/ckpt/metrics.jsonl");
    }
    return metrics;
  }

  static TempDir* dir_;
  static std::string two_node_output_;
};
TempDir* LaunchJob::dir_ = nullptr;

std::string LaunchJob::two_node_output_;

TEST_F(LaunchJob, DryRunPrintsTheMpirunCommandAndPlacementAndStartsNothing) {
  const std::string cfg = write_config("dry", 2, 1, 2, 4);
  const Shell r = sh(launch("--dry-run --bind_core --log_dir " + dir_->file("dry/logs"), cfg));
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find(fmt::format("mpirun -np 4 --host 127.0.0.2:2,127.0.0.3:2 --map-by slot --bind-to core "
                                   "--tag-output {} {} train {}",
                                   kMpiArgs, kBin, cfg)),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("placement: 2 hosts x 2 ranks = 4 ranks; dp 2 x ep 1 x tp 2 x pp 1 (order tp-ep-dp-pp)"),
            std::string::npos);
  EXPECT_NE(r.out.find("  127.0.0.3      3      1    1   0   1   0"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("tp groups: 2 of size 2, all inside one host"), std::string::npos);
  EXPECT_NE(r.out.find("dp groups: 2 of 2 cross hosts: {0,2} {1,3}"), std::string::npos);
  EXPECT_EQ(r.out.find("preflight"), std::string::npos);
  EXPECT_FALSE(fs::exists(dir_->file("dry/logs")));

  const Shell mismatch = sh(fmt::format("{} launch --hostfile {} --worker_num 6 --local_worker_num 2 --dry-run -- train {}", kBin,
                                      dir_->file("hosts"), cfg));
  EXPECT_EQ(mismatch.status, 2);
  EXPECT_NE(mismatch.out.find("moe4d: error: --worker_num 6 is not hosts 2 (in " + dir_->file("hosts") +
                              ") x --local_worker_num 2 = 4"),
            std::string::npos)
      << mismatch.out;
  const std::string wrong = write_config("wrong", 4, 1, 2, 4);
  const Shell layout = sh(launch("--dry-run", wrong));
  EXPECT_NE(layout.out.find("parallel size mismatch: dp 4 x ep 1 x tp 2 x pp 1 = 8 in " + wrong +
                            ", but --worker_num is 4 (2 hosts x 2 ranks per host)"),
            std::string::npos)
      << layout.out;
}

TEST_F(LaunchJob, TwoFakeNodesReproduceTheSingleRankRun) {
  const std::string& metrics = two_node_run();
  // Reference: one rank, the same global batch in the same micro-batches (4 replicas x 1 -> 4).
  const std::string ref_cfg = write_config("single", 1, 1, 1, 16, 4);
  const Shell ref = sh(fmt::format("mpirun -np 1 --bind-to none {} train {} --quiet", kBin, ref_cfg));
  ASSERT_EQ(ref.status, 0) << ref.out;
  const std::vector<double> want = losses_of(dir_->file("single/ckpt/metrics.jsonl"));
  const std::vector<double> got = losses_of(metrics);
  ASSERT_EQ(got.size(), 16u);
  ASSERT_EQ(want.size(), 16u);
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-5 * std::fabs(want[i])) << "step " << i + 1;

  // MPI's node detection and the hierarchical all-reduce saw two nodes of two ranks.
  const std::string rank0 = read_text(dir_->file("two_node/logs/rank_0.log"));
  EXPECT_NE(rank0.find("dp_ep[tp=0,pp=0] gradient all-reduce spans 2 nodes: hierarchical"), std::string::npos) << rank0;
  // Per-rank logs: one per rank, each headed with its host; rank 0's progress also on the terminal.
  for (int r = 0; r < 4; ++r) {
    const std::string log = read_text(dir_->file(fmt::format("two_node/logs/rank_{}.log", r)));
    EXPECT_NE(log.find(fmt::format("attempt 1, rank {} on 127.0.0.{}", r, 2 + r / 2)), std::string::npos) << log;
  }
  EXPECT_NE(rank0.find("step    16/16"), std::string::npos);
  EXPECT_NE(two_node_output_.find("step    16/16"), std::string::npos);
  EXPECT_NE(read_text(dir_->file("two_node/logs/launcher.log")).find("attempt 1 finished"), std::string::npos);
  // Per-rank compute times and hosts in the metrics; the summary and moe4d report name the slowest.
  const auto first = nlohmann::json::parse(read_text(metrics).substr(0, read_text(metrics).find('\n')));
  EXPECT_EQ(first["rank_hosts"], nlohmann::json({"127.0.0.2", "127.0.0.2", "127.0.0.3", "127.0.0.3"}));
  EXPECT_EQ(first["time"]["rank_compute_s"].size(), 4u);
  EXPECT_NE(two_node_output_.find("moe4d launch: slowest rank "), std::string::npos);
  const auto summary = nlohmann::json::parse(read_text(dir_->file("two_node/logs/launch_summary.json")));
  EXPECT_EQ(summary["slowest_rank"]["ranks"], 4);
  const Shell report = sh(fmt::format("{} report {} --output {}", kBin, metrics, dir_->file("two_node/report")));
  EXPECT_EQ(report.status, 0) << report.out;
  EXPECT_NE(report.out.find("rank_compute.svg"), std::string::npos) << report.out;
  EXPECT_NE(report.out.find("slowest rank "), std::string::npos) << report.out;
}

TEST_F(LaunchJob, CrossNodeTensorParallelIsRefusedAndSeenByTheTrainer) {
  const std::string cfg = write_config("tp4", 1, 1, 4, 2);
  const Shell refused = sh(launch("--no-check", cfg));
  EXPECT_EQ(refused.status, 2);
  EXPECT_NE(refused.out.find("1 of 1 tensor-parallel groups cross hosts (2 ranks per host): {0,1,2,3}"),
            std::string::npos)
      << refused.out;
  const Shell allowed = sh(launch("--no-check --allow-cross-node-tp --log_dir " + dir_->file("tp4/logs"), cfg));
  ASSERT_EQ(allowed.status, 0) << allowed.out;
  // The trainer's own check, from MPI's node detection (MPI_COMM_TYPE_SHARED), also finds two nodes.
  EXPECT_NE(read_text(dir_->file("tp4/logs/rank_0.log")).find("1 of 1 tensor-parallel groups span nodes (2 ranks "
                                                               "per node)"),
            std::string::npos);
}

TEST_F(LaunchJob, TwoNodesOfFourRanksOversubscribed) {
  const std::string cfg = write_config("eight", 2, 2, 2, 2);
  const Shell refused = sh(launch("--local_worker_num 4 --dry-run", cfg));
  EXPECT_NE(refused.out.find("host 127.0.0.2 (" + dir_->file("hosts") + ":2) has slots=2, fewer than "
                             "--local_worker_num 4; pass --oversubscribe"),
            std::string::npos)
      << refused.out;
  const Shell r = sh(launch("--local_worker_num 4 --oversubscribe --log_dir " + dir_->file("eight/logs"), cfg));
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("--oversubscribe"), std::string::npos);
  for (int rank = 0; rank < 8; ++rank)
    EXPECT_TRUE(fs::exists(dir_->file(fmt::format("eight/logs/rank_{}.log", rank))));
  EXPECT_NE(read_text(dir_->file("eight/logs/rank_0.log")).find("dp_ep[tp=0,pp=0] gradient all-reduce spans 2 nodes"),
            std::string::npos)
      << read_text(dir_->file("eight/logs/rank_0.log"));
  EXPECT_EQ(losses_of(dir_->file("eight/ckpt/metrics.jsonl")).size(), 2u);
}

TEST_F(LaunchJob, PreflightFailsForADeadHostAnotherBuildAndAModelThatDoesNotFit) {
  const std::string cfg = write_config("pre", 2, 1, 2, 2);
  const Shell ok = sh(launch("--check", cfg));
  EXPECT_EQ(ok.status, 0) << ok.out;
  EXPECT_NE(ok.out.find(fmt::format("PASS  127.0.0.3  remote shell  answered over '{} 127.0.0.3'", kRsh)),
            std::string::npos)
      << ok.out;
  EXPECT_NE(ok.out.find("PASS  127.0.0.2  mtu           lo has MTU"), std::string::npos) << ok.out;

  const Shell dead = sh("FAKE_RSH_DOWN=127.0.0.3 " + launch("--log_dir " + dir_->file("pre/logs"), cfg));
  EXPECT_EQ(dead.status, 3) << dead.out;
  EXPECT_NE(dead.out.find(fmt::format("FAIL  127.0.0.3  remote shell  did not answer over '{} 127.0.0.3' (exit 255: "
                                      "ssh: connect to host 127.0.0.3 port 22: Connection refused)",
                                      kRsh)),
            std::string::npos)
      << dead.out;
  EXPECT_NE(dead.out.find("preflight failed (FAIL lines above); nothing was started"), std::string::npos);
  EXPECT_FALSE(fs::exists(dir_->file("pre/logs")));

  const std::string other = dir_->file("moe4d-other");
  fs::copy_file(kBin, other, fs::copy_options::overwrite_existing);
  std::ofstream(other, std::ios::app) << "another build";
  const Shell swapped = sh(fmt::format("FAKE_RSH_SWAP_HOST=127.0.0.3 FAKE_RSH_SWAP_FROM={} FAKE_RSH_SWAP_TO={} {}", kBin,
                                     other, launch("--check", cfg)));
  EXPECT_EQ(swapped.status, 3);
  EXPECT_NE(swapped.out.find("FAIL  127.0.0.3  build         " + other + " has SHA-256 "), std::string::npos)
      << swapped.out;
  EXPECT_NE(swapped.out.find("PASS  127.0.0.2  build"), std::string::npos);

  // A 7B dense model in fp32 with AdamW on DP2 x TP2: ~50 GiB per rank, two ranks per host.
  Config big = tiny_training_config(dir_->file("data.bin"));
  big.model.vocab_size = 32000;
  big.model.hidden_size = 4096;
  big.model.num_layers = 32;
  big.model.num_heads = 32;
  big.model.ffn_hidden_size = 11008;
  big.model.moe = {};
  big.parallel.data_parallel = 2;
  big.parallel.tensor_parallel = 2;
  std::ofstream(dir_->file("pre/big.yaml")) << config_to_yaml(big);
  const Shell huge = sh(launch("--check", dir_->file("pre/big.yaml")));
  EXPECT_EQ(huge.status, 3) << huge.out;
  EXPECT_NE(huge.out.find("FAIL  127.0.0.2  memory        2 ranks x "), std::string::npos) << huge.out;
  EXPECT_NE(huge.out.find("will not fit"), std::string::npos);
}

// The process of world rank `rank` whose command line mentions `marker` (this test's config), or -1.
pid_t find_rank(int rank, const std::string& marker) {
  const std::string wanted = fmt::format("OMPI_COMM_WORLD_RANK={}", rank);
  for (const auto& entry : fs::directory_iterator("/proc")) {
    const std::string name = entry.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    const std::string cmdline = read_text(entry.path() / "cmdline");
    if (cmdline.find(marker) == std::string::npos || cmdline.find(kBin + '\0' + "train") != 0) continue;
    std::istringstream env(read_text(entry.path() / "environ"));
    for (std::string var; std::getline(env, var, '\0');)
      if (var == wanted) return std::stoi(name);
  }
  return -1;
}

struct FaultRun {
  std::string output, launcher_log, metrics;
  nlohmann::json summary;
  double fault_at = -1;  // Unix time the signal was sent
};

// Launches the 16-step two-host job with --max-restarts 2, sends `sig` to world rank `rank` once
// rank 0 has printed step 6, and waits for the launcher to finish on its own.
FaultRun run_with_fault(const std::string& cfg, const std::string& logs, int rank, int sig) {
  FaultRun run;
  Subprocess launcher = Subprocess::spawn(
      {"/bin/sh", "-c", LaunchJob::launch("--no-check --max-restarts 2 --log_dir " + logs, cfg) + " 2>&1"});
  pid_t victim = -1;
  for (int i = 0; i < 6000 && victim < 0; ++i) {
    if (launcher.stdout_fd() >= 0) launcher.read_available(launcher.stdout_fd(), &run.output);
    if (run.output.find("step     6/16") != std::string::npos) {
      victim = find_rank(rank, cfg);
      EXPECT_GT(victim, 0) << "rank " << rank << " of the job not found";
      if (victim <= 0) return run;
      EXPECT_EQ(::kill(victim, sig), 0);
      run.fault_at = unix_now();
    }
    if (launcher.poll_exit(nullptr)) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  int status = 0;
  while (!launcher.poll_exit(&status) || launcher.stdout_fd() >= 0 || launcher.stderr_fd() >= 0) {
    if (launcher.stdout_fd() >= 0) launcher.read_available(launcher.stdout_fd(), &run.output);
    if (launcher.stderr_fd() >= 0) launcher.read_available(launcher.stderr_fd(), &run.output);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  if (victim > 0 && ::kill(victim, 0) == 0) ::kill(victim, SIGKILL);  // never leave a stopped rank behind
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << run.output;
  run.launcher_log = read_text(logs + "/launcher.log");
  const std::string summary = read_text(logs + "/launch_summary.json");
  if (!summary.empty()) run.summary = nlohmann::json::parse(summary);
  return run;
}

// Restart timings of a fault run as the JSON the test prints (seconds).
nlohmann::json restart_timing(const FaultRun& run) {
  const auto& attempts = run.summary["attempts"];
  return {{"fault_to_failure_noticed_s", attempts[0]["failure_unix"].get<double>() - run.fault_at},
          {"fault_to_first_step_of_restart_s", attempts[1]["first_step_unix"].get<double>() - run.fault_at},
          {"failure_noticed_to_first_step_s", run.summary["failure_to_first_step_s"][0]},
          {"resumed_at_step", attempts[1]["first_step"]}};
}

TEST_F(LaunchJob, RestartAfterKillNineReproducesTheUninterruptedRunBitForBit) {
  const std::vector<double> want = losses_of(two_node_run());
  const std::string cfg = write_config("restart", 2, 2, 1, 16);
  const FaultRun run = run_with_fault(cfg, dir_->file("restart/logs"), 1, SIGKILL);
  ASSERT_GT(run.fault_at, 0) << run.output;
  EXPECT_NE(run.launcher_log.find("attempt 1 failed (exit 137; last step seen on rank 0: "), std::string::npos)
      << run.launcher_log;
  EXPECT_NE(run.launcher_log.find("rank 1 on host 127.0.0.2 (local rank 1) exited on signal 9 (Killed)"),
            std::string::npos)
      << run.launcher_log;
  EXPECT_NE(run.launcher_log.find("train " + cfg + " --resume"), std::string::npos);
  EXPECT_NE(run.launcher_log.find("attempt 2 finished"), std::string::npos);
  const std::vector<double> got = losses_of(dir_->file("restart/ckpt/metrics.jsonl"));
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i], want[i]) << "step " << i + 1;  // bit-exact
  ASSERT_EQ(run.summary["attempts"].size(), 2u) << run.summary.dump();
  EXPECT_EQ(run.summary["attempts"][0]["failed_rank"], 1);
  EXPECT_EQ(run.summary["attempts"][0]["failed_host"], "127.0.0.2");
  // The launcher saw the trainer's (timestamped) progress lines: steps and the restart's timing.
  EXPECT_GT(run.summary["attempts"][0]["last_step"].get<int>(), 0) << run.summary.dump();
  EXPECT_GT(run.summary["attempts"][1]["first_step"].get<int>(), 0) << run.summary.dump();
  ASSERT_EQ(run.summary["failure_to_first_step_s"].size(), 1u) << run.summary.dump();
  std::printf("restart timing (kill -9): %s\n", restart_timing(run).dump().c_str());
}

TEST_F(LaunchJob, RestartAfterACollectiveDeadlineNamesTheMissingRankAndHost) {
  const std::vector<double> want = losses_of(two_node_run());
  // A stopped process (SIGSTOP: a hung rank) never arrives; the others' deadline fires.
  const std::string cfg = write_config("deadline", 2, 2, 1, 16, 1, /*collective_timeout=*/10);
  const FaultRun run = run_with_fault(cfg, dir_->file("deadline/logs"), 3, SIGSTOP);
  ASSERT_GT(run.fault_at, 0) << run.output;
  EXPECT_NE(run.launcher_log.find("collective timeout: "), std::string::npos) << run.launcher_log;
  EXPECT_NE(run.launcher_log.find("[missing: rank 3 on host 127.0.0.3 (local rank 1)]"), std::string::npos)
      << run.launcher_log;
  EXPECT_NE(run.launcher_log.find("attempt 2 finished"), std::string::npos);
  ASSERT_EQ(run.summary["attempts"].size(), 2u) << run.summary.dump();
  EXPECT_EQ(run.summary["attempts"][0]["failed_rank"], 3);
  EXPECT_EQ(run.summary["attempts"][0]["failed_host"], "127.0.0.3");
  const std::vector<double> got = losses_of(dir_->file("deadline/ckpt/metrics.jsonl"));
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i], want[i]) << "step " << i + 1;
  std::printf("restart timing (deadline 10 s): %s\n", restart_timing(run).dump().c_str());
}

}  // namespace
}  // namespace moe4d::test
