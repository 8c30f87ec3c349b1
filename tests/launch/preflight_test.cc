// Judging the preflight answers: a host that does not answer, a different build, clocks, MTU,
// memory that does not fit (moe4d plan's memory model), disk and files.
#include "launch/preflight.h"

#include <sys/wait.h>

#include <csignal>

#include <gtest/gtest.h>

#include "core/error.h"

namespace moe4d {
namespace {

HostFacts facts() {
  HostFacts f;
  f.hostname = "n1";
  f.version = "moe4d 0.1.0";
  f.exe = "/opt/moe4d";
  f.exe_sha256 = std::string(64, 'a');
  f.unix_time = 1000.0;
  f.mem_available = 64.0 * (1 << 30);
  f.mtu = {{"eth0", 9000}};
  f.interface_note = "holds 10.0.0.2";
  f.disk_free = 100.0 * (1 << 30);
  f.disk_path = "/ckpt";
  f.cpu_model = "AMD EPYC 7B13";
  return f;
}

PreflightJob job() {
  PreflightJob j;
  j.remote_shell = {"ssh"};
  j.exe = "/opt/moe4d";
  j.reference = facts();
  j.rank_memory_bytes = 4.0 * (1 << 30);
  j.ranks_per_host = 8;
  j.checkpoint_bytes = 10.0 * (1 << 30);
  j.request.disk_dir = "/ckpt/run";
  j.request.readable = {"/data/train.bin"};
  return j;
}

CommandResult answered(const HostFacts& f) {
  CommandResult r;
  r.wait_status = 0;  // exit 0
  r.out = "Welcome banner\n" + host_facts_to_json(f).dump() + "\n";
  return r;
}

const PreflightLine& line_of(const std::vector<PreflightLine>& lines, const std::string& check) {
  for (const PreflightLine& l : lines)
    if (l.check == check) return l;
  static PreflightLine none{.check = "(missing)"};
  return none;
}

TEST(Preflight, AllPass) {
  const auto lines = judge_host(job(), "n1", false, answered(facts()), 999.9, 1000.1);
  ASSERT_EQ(lines.size(), 8u) << format_preflight(lines);
  EXPECT_FALSE(preflight_failed(lines)) << format_preflight(lines);
  for (const PreflightLine& l : lines) EXPECT_EQ(l.verdict, CheckVerdict::kPass) << l.check << ": " << l.detail;
  EXPECT_NE(format_preflight(lines).find("PASS  n1    remote shell  answered over 'ssh n1'"), std::string::npos)
      << format_preflight(lines);
}

TEST(Preflight, HostThatDoesNotAnswer) {
  CommandResult r;
  r.wait_status = 255 << 8;  // ssh's exit status
  r.err = "ssh: connect to host n9 port 22: Connection refused\n";
  const auto lines = judge_host(job(), "n9", false, r, 0, 1);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_TRUE(preflight_failed(lines));
  EXPECT_EQ(lines[0].detail, "did not answer over 'ssh n9' (exit 255: ssh: connect to host n9 port 22: Connection refused)");
  CommandResult hung;
  hung.timed_out = true;
  hung.seconds = 20;
  EXPECT_EQ(judge_host(job(), "n9", false, hung, 0, 20)[0].detail, "did not answer over 'ssh n9' (timed out after 20 s)");
}

TEST(Preflight, CpuWithoutTheInstructionSetsOfANativeBuild) {
  HostFacts f = facts();
  f.cpu_needed = "sse4.2,avx,avx2,fma,avx512f,avx512bw";
  f.cpu_missing = "avx512f,avx512bw";
  const auto lines_n4 = judge_host(job(), "n4", false, answered(f), 999.9, 1000.1);
  const PreflightLine& cpu = line_of(lines_n4, "cpu");
  EXPECT_EQ(cpu.verdict, CheckVerdict::kFail);
  EXPECT_EQ(cpu.detail, "AMD EPYC 7B13 lacks avx512f,avx512bw that /opt/moe4d was compiled for (a -DMOE4D_NATIVE=ON "
                        "build from another machine); install the default portable build");
  const auto lines_n1 = judge_host(job(), "n1", false, answered(facts()), 999.9, 1000.1);
  EXPECT_EQ(line_of(lines_n1, "cpu").detail,
            "AMD EPYC 7B13 runs what the binary uses (baseline x86-64)");
  // A probe that dies of SIGILL locally, or whose remote shell reports 128 + SIGILL.
  for (const int status : {SIGILL, 132 << 8}) {
    CommandResult r;
    r.wait_status = status;
    const auto lines = judge_host(job(), "n4", false, r, 0, 1);
    ASSERT_EQ(lines.size(), 1u);
    EXPECT_NE(lines[0].detail.find("uses instructions this CPU lacks"), std::string::npos) << lines[0].detail;
  }
}

TEST(Preflight, DifferentBinaryOrVersion) {
  HostFacts other = facts();
  other.exe_sha256 = std::string(64, 'b');
  const auto lines = judge_host(job(), "n2", false, answered(other), 999.9, 1000.1);
  const PreflightLine& build = line_of(lines, "build");
  EXPECT_EQ(build.verdict, CheckVerdict::kFail) << build.detail;
  EXPECT_NE(build.detail.find("has SHA-256 bbbbbbbbbbbbbbbb..., this machine's aaaaaaaaaaaaaaaa..."), std::string::npos) << build.detail;
  other.version = "moe4d 0.0.9";
  const auto older = judge_host(job(), "n2", false, answered(other), 999.9, 1000.1);
  EXPECT_EQ(line_of(older, "build").detail,
            "runs 'moe4d 0.0.9', this machine 'moe4d 0.1.0'");
}

TEST(Preflight, ClockMtuMemoryDiskFiles) {
  HostFacts f = facts();
  f.unix_time = 1003.0;  // 3 s ahead
  f.mtu = {{"eth0", 1500}, {"ib0", 65520}};
  f.mem_available = 16.0 * (1 << 30);  // 8 ranks x 4 GiB do not fit
  f.disk_free = 5.0 * (1 << 30);
  f.unreadable = {{"/data/train.bin", "Permission denied"}};
  const auto lines = judge_host(job(), "n3", false, answered(f), 999.9, 1000.1);
  EXPECT_EQ(line_of(lines, "clock").verdict, CheckVerdict::kWarn);
  EXPECT_EQ(line_of(lines, "mtu").verdict, CheckVerdict::kWarn);
  EXPECT_NE(line_of(lines, "mtu").detail.find("eth0 has MTU 1500"), std::string::npos);
  EXPECT_EQ(line_of(lines, "memory").verdict, CheckVerdict::kFail);
  EXPECT_NE(line_of(lines, "memory").detail.find("8 ranks x 4.000 GiB"), std::string::npos);
  EXPECT_EQ(line_of(lines, "disk").verdict, CheckVerdict::kFail);
  EXPECT_EQ(line_of(lines, "files").detail, "cannot read /data/train.bin: Permission denied");
}

TEST(Preflight, PlannerMemoryModelForTheLayout) {
  Config c;
  c.model.vocab_size = 32000;
  c.model.hidden_size = 4096;
  c.model.num_layers = 32;
  c.model.num_heads = 32;
  c.model.ffn_hidden_size = 11008;
  c.model.seq_length = 256;  // small activations: the state dominates
  c.train.global_batch_size = 2;
  c.parallel.micro_batch_num = 1;
  c.parallel.data_parallel = 2;
  LaunchPlan plan = plan_launch({.worker_num = 2}, &c.parallel, "big");
  const double dp2 = predicted_rank_memory(c, plan);
  EXPECT_GT(dp2, 100.0 * (1 << 30));  // 7B parameters, fp32 AdamW: ~16 bytes each per rank
  c.parallel.data_parallel = 1;
  c.parallel.tensor_parallel = 2;
  plan = plan_launch({.worker_num = 2}, &c.parallel, "big");
  EXPECT_LT(predicted_rank_memory(c, plan), 0.6 * dp2);  // TP2 halves the state
  EXPECT_GT(predicted_checkpoint_bytes(c), 6.5e9 * 12);
}

}  // namespace
}  // namespace moe4d
