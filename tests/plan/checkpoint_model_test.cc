// The planner's checkpoint model (plan/checkpoint_model.h): the async staging buffer in the memory,
// the write and blocked time per save at the cluster's storage bandwidth, the interval's cost, and
// the cluster YAML key storage.write_bandwidth_gbps.
#include <gtest/gtest.h>

#include <cmath>

#include "core/error.h"
#include "plan/checkpoint_model.h"
#include "plan/cluster_yaml.h"
#include "plan/memory_model.h"
#include "plan/param_count.h"
#include "plan/planner.h"
#include "plan_test_util.h"

namespace moe4d {
namespace {
using namespace testing;

TEST(CheckpointModel, AsyncStagingIsTheDevicesShareAndTheIntervalPaysTheBlockedTime) {
  const ModelConfig m = tiny_moe();
  TrainingSetup s = tiny_setup();
  ClusterSpec c = flat_cluster(1, 4);
  const Layout l = make_layout(1, 2, 2, 2, 2, 4);
  const StageParams p1 = stage_params(m, l, 1);  // dense 312 over dp*ep = 2, experts 384 over dp = 1
  const double before = stage_memory(m, s, l, c, 1, p1).total();
  EXPECT_DOUBLE_EQ(stage_memory(m, s, l, c, 1, p1).checkpoint_staging, 0);
  s.checkpoint_async = true;
  s.checkpoint_format = CheckpointFormat::kSharded;
  s.checkpoint_interval = 10;
  const MemoryBreakdown mem = stage_memory(m, s, l, c, 1, p1);
  EXPECT_DOUBLE_EQ(mem.checkpoint_staging, 12 * (312 / 2 + 384));  // values + m + v of its slices
  EXPECT_DOUBLE_EQ(mem.total(), before + mem.checkpoint_staging);

  PlanContext ctx{"tiny", m, s, c};
  Evaluation e;
  e.layout = l;
  e.memory = mem;
  e.time.step = 1e-6;
  const double bytes = 12 * count_model_params(m).total();
  // No storage bandwidth stated: the size and the copy are known, the write is not.
  CheckpointCost cost = checkpoint_cost(ctx, e);
  EXPECT_DOUBLE_EQ(cost.bytes, bytes);
  EXPECT_TRUE(std::isnan(cost.write_seconds));
  EXPECT_DOUBLE_EQ(cost.blocked_seconds, mem.checkpoint_staging / c.device.memory_bandwidth);

  // A write longer than the 10 steps between saves: the next save waits for the rest of it.
  ctx.cluster.storage_write_bandwidth = 1e6;
  cost = checkpoint_cost(ctx, e);
  EXPECT_DOUBLE_EQ(cost.write_seconds, bytes / 1e6);
  const double copy = mem.checkpoint_staging / c.device.memory_bandwidth;
  EXPECT_DOUBLE_EQ(cost.blocked_seconds, copy + (bytes / 1e6 - 10 * 1e-6));
  EXPECT_DOUBLE_EQ(cost.interval_share, cost.blocked_seconds / (10 * 1e-6));
  // Steps long enough to hide the write: only the copy blocks.
  e.time.step = 1.0;
  EXPECT_DOUBLE_EQ(checkpoint_cost(ctx, e).blocked_seconds, copy);

  // Synchronous: the step loop waits for the whole write; full has one writer, capped by one NIC.
  ctx.setup.checkpoint_async = false;
  EXPECT_DOUBLE_EQ(checkpoint_cost(ctx, e).blocked_seconds, bytes / 1e6);
  ctx.setup.checkpoint_format = CheckpointFormat::kFull;
  ctx.cluster.storage_write_bandwidth = 1e12;  // faster than the 1e9 B/s NIC
  EXPECT_DOUBLE_EQ(checkpoint_cost(ctx, e).write_seconds, bytes / c.inter.nic_bandwidth);
  EXPECT_DOUBLE_EQ(checkpoint_cost(ctx, e).interval_share, bytes / c.inter.nic_bandwidth / 10);
}

TEST(CheckpointModel, ClusterYamlStatesTheStorageBandwidth) {
  const std::string base = R"(name: box
nodes: 1
devices_per_node: 2
device:
  memory_gib: 8
  memory_bandwidth_gbps: 10
  peak_tflops: {fp32: 0.1}
intra_node: {kind: switch, bandwidth_gbps: 2, latency_us: 1}
inter_node: {nic_bandwidth_gbps: 1, latency_us: 10}
)";
  EXPECT_EQ(parse_cluster_yaml(base, "box.yaml").storage_write_bandwidth, 0);
  const ClusterSpec c = parse_cluster_yaml(base + "storage: {write_bandwidth_gbps: 2.5}\n", "box.yaml");
  EXPECT_DOUBLE_EQ(c.storage_write_bandwidth, 2.5e9);
  EXPECT_DOUBLE_EQ(parse_cluster_yaml(cluster_to_yaml(c), "again").storage_write_bandwidth, 2.5e9);
  std::string error;
  try {
    parse_cluster_yaml(base + "storage: {write_bandwidth_gbps: 0}\n", "box.yaml");
  } catch (const Error& e) {
    error = e.what();
  }
  EXPECT_EQ(error, "box.yaml: storage.write_bandwidth_gbps must be positive");
}

// moe4d plan --save-interval / --async-save: any model, presets included, gets the checkpoint line,
// and the staging buffer joins the memory; a negative interval is refused.
TEST(CheckpointModel, PlanFlagsSetTheIntervalAndAsyncSaves) {
  PlanRequest r;
  r.model = "mixtral-8x7b";
  r.cluster = "dgx-h100";
  r.explain = 1;
  EXPECT_EQ(run_plan(r).find("\ncheckpoint ("), std::string::npos);  // nothing stated: no line
  r.save_interval = 500;
  r.async_save = true;
  const std::string out = run_plan(r);
  EXPECT_NE(out.find("\ncheckpoint (sharded, async, every 500 steps): "), std::string::npos) << out;
  EXPECT_NE(out.find("  checkpoint staging "), std::string::npos) << out;
  r.save_interval = -1;
  std::string error;
  try {
    run_plan(r);
  } catch (const Error& e) {
    error = e.what();
  }
  EXPECT_EQ(error, "--save-interval -1: expected a number of steps >= 0");
}

}  // namespace
}  // namespace moe4d
