// tests/machine/planner_calibration_test.cc — the planner changes calibration against the runtime
// asked for (src/plan): causal attention timed as the runtime computes it (masked key blocks skipped),
// measured collective tables with size regimes, and clusters without a 16-bit GEMM.
#include <gtest/gtest.h>

#include <cmath>

#include "core/error.h"
#include "plan/cluster_yaml.h"
#include "plan/comm_model.h"
#include "plan/compute_model.h"
#include "plan/memory_model.h"
#include "plan/planner.h"

namespace moe4d {
namespace {

// 1 TFLOP/s at a flat 50% GEMM efficiency, 1e10 B/s memory: GEMM time = flops / 5e11.
ClusterSpec flat_cluster(int devices) {
  ClusterSpec c;
  c.name = "flat";
  c.devices_per_node = devices;
  c.device.memory_bytes = 1e12;
  c.device.memory_bandwidth = 1e10;
  c.device.peak_flops = {1e12, 0, 0};
  c.device.gemm_efficiency[0] = {{1, 0.5}, {1e6, 0.5}};
  c.intra = {LinkKind::kSwitch, 1e10, 1e-6};
  c.inter = {1e9, 1e-5};
  return c;
}

TEST(CausalAttention, OnlyKeyBlocksAtOrBelowTheDiagonalAreMultiplied) {
  ModelConfig m;
  m.vocab_size = 64;
  m.hidden_size = 64;
  m.num_layers = 1;
  m.num_heads = 2;  // head_dim 32
  m.ffn_hidden_size = 128;
  m.seq_length = 160;  // query blocks [0,64) [64,128) [128,160)
  TrainingSetup s;
  s.global_batch = 1;
  s.seq_length = 160;
  s.precision = Precision::kFP32;
  Layout l;
  const LayerCompute dense = layer_compute(m, s, l, flat_cluster(1), false);
  const double T = 160, d = 64, f = 128, hd = 32, heads = 2;
  // Per head: QK^T and PV each 2 * rows * keys * hd over the blocks (64 x 64, 64 x 128, 32 x 160).
  const double core = heads * 2 * (2 * hd * (64 * 64 + 64 * 128 + 32 * 160));
  const double dense_gemms = 2 * T * 3 * d * d + 2 * T * d * d + 3 * 2 * T * d * f;
  EXPECT_DOUBLE_EQ(dense.forward.flops, dense_gemms + core);
  // The full square would be heads * 2 * 2 * 160 * 160 * hd: the blocks skip 32% of it here.
  EXPECT_NEAR(core / (heads * 2 * 2 * T * T * hd), 0.68, 1e-12);
  // What selective recompute repeats: the core attention GEMMs (and the softmax traffic).
  EXPECT_GE(dense.attention_scores_time, core / 5e11);
  EXPECT_LT(dense.attention_scores_time, core / 5e11 + 2 * heads * T * T * 4 / 1e10 + 1e-12);
}

TEST(ExpertImbalance, TheBusiestExpertParallelDeviceSetsTheLayersTimeMemoryAndTraffic) {
  ModelConfig m;
  m.vocab_size = 64;
  m.hidden_size = 64;
  m.num_layers = 2;
  m.num_heads = 2;
  m.ffn_hidden_size = 128;
  m.seq_length = 32;
  m.moe.num_experts = 4;
  m.moe.top_k = 2;
  TrainingSetup s;
  s.global_batch = 2;
  s.seq_length = 32;
  s.precision = Precision::kFP32;
  Layout ep2;
  ep2.ep = 2;
  // Memory bandwidth out of the way: a GEMM's time is never below moving its operands (the planner's
  // roofline), and the expert weights read do not grow with the rows, so only the compute-bound
  // time scales exactly with the busiest device's rows.
  ClusterSpec c = flat_cluster(2);
  c.device.memory_bandwidth = 1e30;
  const LayerCompute balanced = layer_compute(m, s, ep2, c, true);
  const LayerActivations balanced_act = layer_activations(m, s, ep2, true);
  s.expert_imbalance = 1.5;
  const LayerCompute skewed = layer_compute(m, s, ep2, c, true);
  EXPECT_NEAR(skewed.expert_time, 1.5 * balanced.expert_time, 1e-15);
  // With the bandwidth bound (64-row GEMMs at 10 GB/s are memory-bound here) the busiest device is
  // still the slower one, by less than its 1.5x rows.
  s.expert_imbalance = 1;
  const double bound_balanced = layer_compute(m, s, ep2, flat_cluster(2), true).expert_time;
  s.expert_imbalance = 1.5;
  const double bound_skewed = layer_compute(m, s, ep2, flat_cluster(2), true).expert_time;
  EXPECT_GT(bound_skewed, bound_balanced);
  EXPECT_LE(bound_skewed, 1.5 * bound_balanced * (1 + 1e-12));
  EXPECT_EQ(device_routed_rows(m, s, ep2, 32), 1.5 * 64);
  EXPECT_GT(layer_activations(m, s, ep2, true).full, balanced_act.full);
  // Without expert parallelism every device holds every expert: the skew changes nothing.
  Layout single;
  EXPECT_EQ(device_routed_rows(m, s, single, 32), 64);
  EXPECT_DOUBLE_EQ(layer_compute(m, s, single, c, true).expert_time,
                   layer_compute(m, TrainingSetup{s.global_batch, s.seq_length, s.precision}, single, c, true).expert_time);
}

TEST(ExpertImbalance, BelowOneIsRefused) {
  PlanRequest request;
  request.model = "mixtral-8x7b";
  request.cluster = "dgx-h100";
  request.expert_imbalance = 0.8;
  try {
    run_plan(request);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "--expert-imbalance 0.8: expected the busiest device's routed rows over the balanced share, a number "
                 ">= 1");
  }
}

TEST(CollectiveRegimes, EachMessageSizeUsesItsRegimeAndGroupSizesInterpolate) {
  ClusterSpec c = flat_cluster(4);
  auto& table = c.measured[0][static_cast<int>(Collective::kAllReduce)];
  // 2 ranks: 2 us + 4 GB/s below 1 MiB, 10 us + 1 GB/s from 1 MiB; 4 ranks: 4 us + 2 GB/s, 20 us + 0.5 GB/s.
  table = {{2, 2e-6, 4e9, 0}, {2, 1e-5, 1e9, 1 << 20}, {4, 4e-6, 2e9, 0}, {4, 2e-5, 5e8, 1 << 20}};
  c.validate("regimes");
  const double small = 1 << 16, large = 1 << 24;
  EXPECT_DOUBLE_EQ(collective_seconds(c, Collective::kAllReduce, GroupSpan{2, 1, 2}, small), 2e-6 + small / 4e9);
  EXPECT_DOUBLE_EQ(collective_seconds(c, Collective::kAllReduce, GroupSpan{2, 1, 2}, large), 1e-5 + large / 1e9);
  EXPECT_DOUBLE_EQ(collective_seconds(c, Collective::kAllReduce, GroupSpan{4, 1, 4}, large),
                   2e-5 + 1.5 * large / 5e8);
  // 3 ranks: halfway between the two group sizes' regimes for the same message size.
  EXPECT_DOUBLE_EQ(collective_seconds(c, Collective::kAllReduce, GroupSpan{3, 1, 3}, large),
                   1.5e-5 + 4.0 / 3 * large / 7.5e8);
  // Below and above the table's group sizes: clamped.
  EXPECT_DOUBLE_EQ(collective_seconds(c, Collective::kAllReduce, GroupSpan{8, 1, 8}, small),
                   4e-6 + 1.75 * small / 2e9);
  // Round trip through the cluster file keeps the regimes.
  const ClusterSpec back = parse_cluster_yaml(cluster_to_yaml(c), "regimes.yaml");
  ASSERT_EQ(back.measured[0][0].size(), 4u);
  EXPECT_DOUBLE_EQ(back.measured[0][0][1].min_bytes, 1 << 20);
  EXPECT_DOUBLE_EQ(collective_seconds(back, Collective::kAllReduce, GroupSpan{3, 1, 3}, large),
                   collective_seconds(c, Collective::kAllReduce, GroupSpan{3, 1, 3}, large));
}

TEST(CollectiveRegimes, MinBytesMustIncreaseWithinAGroupSize) {
  ClusterSpec c = flat_cluster(2);
  c.measured[0][0] = {{2, 2e-6, 4e9, 1 << 20}, {2, 1e-5, 1e9, 1 << 20}};
  try {
    c.validate("box.yaml");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "box.yaml: collectives.intra_node.all_reduce: the size regimes of 2 ranks must have increasing "
                 "min_bytes, got 1048576 after 1048576");
  }
  c.measured[0][0] = {{2, 2e-6, 4e9, -1}};
  EXPECT_THROW(c.validate("box.yaml"), Error);
}

TEST(SixteenBitPeaks, AreOptionalAndThePlannerRefusesAMissingOne) {
  const std::string yaml = R"(name: cpu-box
nodes: 1
devices_per_node: 2
device:
  memory_gib: 8
  memory_bandwidth_gbps: 20
  peak_tflops: {fp32: 0.09}
intra_node: {kind: switch, bandwidth_gbps: 2, latency_us: 1}
inter_node: {nic_bandwidth_gbps: 2, latency_us: 1}
)";
  const ClusterSpec c = parse_cluster_yaml(yaml, "cpu.yaml");
  EXPECT_DOUBLE_EQ(c.peak_flops(Precision::kFP32), 0.09e12);
  EXPECT_EQ(c.peak_flops(Precision::kBF16), 0.0);
  EXPECT_EQ(cluster_to_yaml(c).find("bf16"), std::string::npos);
  // A 16-bit curve without its peak is refused.
  std::string with_curve = yaml;
  with_curve.replace(with_curve.find("  peak_tflops"), 0, "  gemm_efficiency: {bf16: [[64, 0.5]]}\n");
  EXPECT_THROW(parse_cluster_yaml(with_curve, "cpu.yaml"), Error);
  // fp32 stays required.
  std::string no_fp32 = yaml;
  no_fp32.replace(no_fp32.find("{fp32: 0.09}"), 12, "{bf16: 0.2}");
  EXPECT_THROW(parse_cluster_yaml(no_fp32, "cpu.yaml"), Error);

  const std::string path = ::testing::TempDir() + "/cpu_box.yaml";
  {
    std::FILE* f = std::fopen(path.c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fputs(yaml.c_str(), f);
    std::fclose(f);
  }
  PlanRequest request;
  request.model = "mixtral-8x7b";  // bf16 by default
  request.cluster = path;
  try {
    run_plan(request);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "cluster cpu-box has no bf16 GEMM (device.peak_tflops.bf16 is absent); plan with --precision fp32 or "
                 "a cluster that has one");
  }
  request.precision = Precision::kFP32;
  request.devices = {2};
  EXPECT_NO_THROW(run_plan(request));
}

}  // namespace
}  // namespace moe4d
