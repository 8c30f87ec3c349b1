// Worker / slot / layout checks, the placement table and the mpirun command.
#include "launch/launch_plan.h"

#include <gtest/gtest.h>

#include "core/error.h"
#include "launch/mpirun_command.h"

namespace moe4d {
namespace {

std::vector<HostEntry> hosts(int n, int slots) {
  std::vector<HostEntry> out;
  // The name is appended rather than built as "n" + std::to_string(i): GCC 12 warns about the latter
  // with a false -Wrestrict when inlined (it breaks CI's -Werror build).
  for (int i = 0; i < n; ++i) {
    std::string name = "n";
    name += std::to_string(i);
    out.push_back({.host = name, .slots = slots, .line = i + 1});
  }
  return out;
}

ParallelConfig layout(int dp, int ep, int tp, int pp) {
  ParallelConfig p;
  p.data_parallel = dp;
  p.expert_parallel = ep;
  p.tensor_parallel = tp;
  p.pipeline_parallel = pp;
  return p;
}

std::string error_of(const LaunchRequest& r, const ParallelConfig* p = nullptr) {
  try {
    plan_launch(r, p, "job.yaml");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(LaunchPlan, ArticlesSixtyFourCards) {
  // msrun --worker_num=64 --local_worker_num=8 over 8 hosts; DP2 x EP8 x TP4.
  const ParallelConfig p = layout(2, 8, 4, 1);
  const LaunchPlan plan =
      plan_launch({.hosts = hosts(8, 8), .hostfile = "hf", .worker_num = 64, .local_worker_num = 8}, &p, "job.yaml");
  EXPECT_EQ(plan.worker_num, 64);
  EXPECT_EQ(plan.host_of(0), "n0");
  EXPECT_EQ(plan.host_of(63), "n7");
  EXPECT_EQ(plan.ranks[13].local_rank, 5);
  // TP fastest: rank 13 = tp 1, ep 3 (of 8), dp 0.
  EXPECT_EQ(plan.ranks[13].coord.tp, 1);
  EXPECT_EQ(plan.ranks[13].coord.ep, 3);
  for (const CrossingGroups& c : plan.crossing) {
    if (c.dim == "tp") {
      EXPECT_TRUE(c.crossing.empty());
    }
    if (c.dim == "ep") {
      EXPECT_EQ(c.crossing.size(), c.groups);  // EP8 x TP4 = 32 ranks: 4 hosts
    }
  }
  const std::string table = placement_table(plan);
  EXPECT_NE(table.find("placement: 8 hosts x 8 ranks = 64 ranks; dp 2 x ep 8 x tp 4 x pp 1"), std::string::npos);
  EXPECT_NE(table.find("tp groups: 16 of size 4, all inside one host"), std::string::npos);
}

TEST(LaunchPlan, DerivesCountsFromSlotsAndConfig) {
  const ParallelConfig p = layout(4, 1, 1, 1);
  EXPECT_EQ(plan_launch({.hosts = hosts(2, 2), .hostfile = "hf"}, &p, "j").worker_num, 4);
  EXPECT_EQ(plan_launch({.hosts = hosts(2, 2), .hostfile = "hf"}, nullptr, "").local_worker_num, 2);
  EXPECT_EQ(plan_launch({}, &p, "j").local_worker_num, 4);  // this machine only
  EXPECT_EQ(plan_launch({.worker_num = 4}, nullptr, "").hosts, std::vector<std::string>{"localhost"});
}

TEST(LaunchPlan, WorkerSlotAndLayoutMismatchesNameEachFactor) {
  EXPECT_EQ(error_of({.hosts = hosts(2, 8), .hostfile = "hf", .worker_num = 12, .local_worker_num = 8}),
            "--worker_num 12 is not hosts 2 (in hf) x --local_worker_num 8 = 16");
  EXPECT_EQ(error_of({.hosts = hosts(2, 2), .hostfile = "hf", .local_worker_num = 4}),
            "host n0 (hf:1) has slots=2, fewer than --local_worker_num 4; pass --oversubscribe to run more ranks "
            "than slots");
  EXPECT_EQ(error_of({.hosts = hosts(2, 2), .hostfile = "hf", .local_worker_num = 4, .oversubscribe = true}), "");
  std::vector<HostEntry> capped = hosts(1, 2);
  capped[0].max_slots = 3;
  EXPECT_EQ(error_of({.hosts = capped, .hostfile = "hf", .local_worker_num = 4, .oversubscribe = true}),
            "host n0 (hf:1) has max_slots=3, fewer than --local_worker_num 4");
  EXPECT_EQ(error_of({.hosts = hosts(3, 0), .hostfile = "hf", .worker_num = 8}),
            "--worker_num 8 does not split evenly over hosts 3 (in hf); give --local_worker_num");
  const ParallelConfig p = layout(4, 1, 4, 3);
  EXPECT_EQ(error_of({.hosts = hosts(8, 8), .hostfile = "hf", .worker_num = 64}, &p),
            "parallel size mismatch: dp 4 x ep 1 x tp 4 x pp 3 = 48 in job.yaml, but --worker_num is 64 (8 hosts x 8 "
            "ranks per host)");
  ParallelConfig q = layout(4, 1, 1, 1);
  q.local_worker_num = 4;
  EXPECT_EQ(error_of({.hosts = hosts(2, 2), .hostfile = "hf"}, &q),
            "job.yaml: parallel_config.local_worker_num is 4, but the launch puts 2 ranks on each host "
            "(--local_worker_num)");
}

// Context parallelism: the dry run shows the dense grid and where its CP groups (consecutive data
// replicas of a (tp, pp) slice) land.
TEST(LaunchPlan, ShowsTheContextParallelGroups) {
  ParallelConfig p = layout(4, 1, 2, 1);
  p.context_parallel = 2;
  const LaunchPlan plan =
      plan_launch({.hosts = hosts(2, 4), .hostfile = "hf", .worker_num = 8, .local_worker_num = 4}, &p, "job.yaml");
  const std::string table = placement_table(plan);
  EXPECT_NE(table.find("dense grid per stage: tp 2 x cp 2 x dp_dense 2"), std::string::npos) << table;
  EXPECT_NE(table.find("cp groups: 4 of size 2, all inside one host"), std::string::npos) << table;
  p.context_parallel = 4;
  EXPECT_NE(placement_table(plan_launch({.hosts = hosts(2, 4), .hostfile = "hf", .worker_num = 8,
                                         .local_worker_num = 4},
                                        &p, "job.yaml"))
                .find("cp groups: 2 of 2 cross hosts: {0,2,4,6} {1,3,5,7}"),
            std::string::npos);
}

TEST(LaunchPlan, CrossNodeTensorParallelRefusedUnlessAllowed) {
  const ParallelConfig p = layout(1, 1, 4, 1);
  const std::string e = error_of({.hosts = hosts(2, 2), .hostfile = "hf"}, &p);
  EXPECT_NE(e.find("1 of 1 tensor-parallel groups cross hosts (2 ranks per host): {0,1,2,3}"), std::string::npos) << e;
  EXPECT_NE(e.find("--allow-cross-node-tp"), std::string::npos);
  const LaunchPlan plan =
      plan_launch({.hosts = hosts(2, 2), .hostfile = "hf", .allow_cross_node_tp = true}, &p, "job.yaml");
  EXPECT_NE(placement_table(plan).find("tp groups: 1 of 1 cross hosts: {0,1,2,3}"), std::string::npos);
  // The rank grid's order decides: dp fastest puts TP2 groups across the two hosts.
  ParallelConfig dp_first = layout(2, 1, 2, 1);
  dp_first.rank_order = "dp-tp-ep-pp";
  EXPECT_NE(error_of({.hosts = hosts(2, 2), .hostfile = "hf"}, &dp_first).find("{0,2} {1,3}"), std::string::npos);
}

TEST(MpirunCommand, PlacementBindingAndUserArguments) {
  const ParallelConfig p = layout(2, 1, 2, 1);
  const LaunchPlan plan = plan_launch({.hosts = hosts(2, 2), .hostfile = "hf"}, &p, "job.yaml");
  const auto argv = mpirun_command(plan, {.bind_core = true, .oversubscribe = true, .mpi_args = {"--mca", "btl", "tcp,self"}},
                                   {"/opt/moe4d", "train", "my job.yaml"});
  EXPECT_EQ(shell_command(argv),
            "mpirun -np 4 --host n0:2,n1:2 --map-by slot --bind-to core --tag-output --oversubscribe --mca btl "
            "tcp,self /opt/moe4d train 'my job.yaml'");
  EXPECT_EQ(shell_quote("it's"), "'it'\\''s'");
}

TEST(MpirunCommand, McaValueFromArgumentsThenEnvironment) {
  const McaEnvironment env = {{"plm_rsh_agent", "/usr/bin/fake-ssh"}, {"btl", "tcp,self"}};
  EXPECT_EQ(mca_value("plm_rsh_agent", {}, env), "/usr/bin/fake-ssh");
  EXPECT_EQ(mca_value("plm_rsh_agent", {"--mca", "plm_rsh_agent", "ssh -x"}, env), "ssh -x");
  EXPECT_EQ(mca_value("plm_rsh_agent", {"-mca", "plm_rsh_agent", "a", "--mca", "plm_rsh_agent", "b"}, env), "b");
  EXPECT_FALSE(mca_value("btl_tcp_if_include", {"--mca", "btl_tcp_if_include"}, env).has_value());
}

}  // namespace
}  // namespace moe4d
