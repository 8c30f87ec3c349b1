// tests/machine/machine_cluster_test.cc — the cluster `moe4d bench` writes: built from (synthetic)
// measurements, it round-trips through cluster_to_yaml / parse_cluster_yaml, carries the measured
// numbers where the planner reads them, and leaves out precisions the machine cannot run.
#include <gtest/gtest.h>

#include <cmath>

#include "core/error.h"
#include "machine/machine_bench.h"
#include "plan/cluster_yaml.h"
#include "plan/comm_model.h"

namespace moe4d {
namespace {

void expect_rel(double a, double b, double tol = 1e-12) { EXPECT_NEAR(a, b, tol * std::max(std::fabs(a), std::fabs(b))); }

MachineMeasurements synthetic_measurements(int ranks, bool with_bf16) {
  MachineMeasurements m;
  m.host = {"Test CPU 9000", "testhost", 2, 16.0 * (1 << 30)};
  m.ranks = ranks;
  for (int p = 0; p < kNumPrecisions; ++p) {
    GemmSurvey& s = m.gemm[p];
    s.precision = static_cast<Precision>(p);
    const bool available = p == 0 || (with_bf16 && p == 1);
    if (!available) {
      s.reason = "no such GEMM on the test CPU";
      continue;
    }
    s.available = true;
    s.implementation = "synthetic";
    for (int size : {32, 128, 512})
      s.timings.push_back({GemmShape{size, size, size, "cube"}, 2.0 * size * size * size / (50e9 * size / (size + 32.0)),
                           50.0 * (p + 1)});
    fit_efficiency_curve(s);
  }
  m.memory = {20e9, 15e9, 1 << 27};
  for (int n = 2; n <= ranks; ++n) {
    for (Collective c : {Collective::kAllReduce, Collective::kReduceScatter, Collective::kAllGather,
                         Collective::kAllToAll, Collective::kSendRecv}) {
      CollectiveCurve curve;
      curve.collective = c;
      curve.ranks = n;
      AlphaBetaRegime small, large;
      small.fit.latency = 1e-6 * (n + static_cast<int>(c));
      small.fit.bus_bandwidth = 1e9 * (10 - n);
      // Messages from 8 MiB on: a second regime at a quarter of the bandwidth (out of cache).
      large.min_bytes = 8 << 20;
      large.fit.latency = 2 * small.fit.latency;
      large.fit.bus_bandwidth = small.fit.bus_bandwidth / 4;
      curve.fit.regimes = {small, large};
      m.collectives.push_back(curve);
    }
  }
  return m;
}

TEST(MachineCluster, DescribesTheMeasurementsAndRoundTripsThroughTheClusterFile) {
  const MachineMeasurements m = synthetic_measurements(3, true);
  const ClusterSpec c = machine_cluster(m);
  EXPECT_EQ(c.nodes, 1);
  EXPECT_EQ(c.devices_per_node, 3);
  expect_rel(c.device.memory_bytes, 16.0 * (1 << 30) / 3);
  expect_rel(c.device.memory_bandwidth, 15e9);  // triad
  expect_rel(c.peak_flops(Precision::kFP32), 50e9);
  expect_rel(c.peak_flops(Precision::kBF16), 100e9);
  EXPECT_EQ(c.peak_flops(Precision::kFP16), 0.0);
  EXPECT_NE(c.description.find("fp16 not available: no such GEMM on the test CPU"), std::string::npos) << c.description;
  EXPECT_NE(c.description.find("Test CPU 9000"), std::string::npos);
  // The planner's collective time is the measured fit, per group size.
  // Two regimes per group size, sorted by ranks then min_bytes.
  const auto& ar = c.measured[0][static_cast<int>(Collective::kAllReduce)];
  ASSERT_EQ(ar.size(), 4u);
  EXPECT_EQ(ar[0].ranks, 2);
  EXPECT_EQ(ar[0].min_bytes, 0);
  EXPECT_EQ(ar[1].ranks, 2);
  EXPECT_EQ(ar[1].min_bytes, 8 << 20);
  EXPECT_EQ(ar[2].ranks, 3);
  EXPECT_EQ(ar[3].ranks, 3);
  const double bytes = 1 << 22, big = 1 << 25;
  expect_rel(collective_seconds(c, Collective::kAllReduce, GroupSpan{3, 1, 3}, bytes),
             3e-6 + 2.0 * 2 / 3 * bytes / 7e9);
  expect_rel(collective_seconds(c, Collective::kAllReduce, GroupSpan{3, 1, 3}, big),
             6e-6 + 2.0 * 2 / 3 * big / 1.75e9);
  expect_rel(collective_seconds(c, Collective::kSendRecv, GroupSpan{2, 1, 2}, bytes), 6e-6 + bytes / 8e9);
  expect_rel(collective_seconds(c, Collective::kSendRecv, GroupSpan{2, 1, 2}, big), 12e-6 + big / 2e9);
  // Fallback link: large-message all-reduce bandwidth of the widest group, small-message send/recv latency.
  expect_rel(c.intra.bandwidth, 1.75e9);
  expect_rel(c.intra.latency, 6e-6);

  const std::string yaml = cluster_to_yaml(c);
  EXPECT_EQ(yaml.find("fp16"), yaml.rfind("fp16")) << "fp16 appears once (in the description), not as a peak";
  const ClusterSpec back = parse_cluster_yaml(yaml, "this_machine.yaml");
  EXPECT_EQ(back.name, c.name);
  EXPECT_EQ(back.description, c.description);
  EXPECT_EQ(back.devices_per_node, 3);
  expect_rel(back.device.memory_bytes, c.device.memory_bytes, 1e-12);
  expect_rel(back.device.memory_bandwidth, c.device.memory_bandwidth, 1e-12);
  for (int p = 0; p < kNumPrecisions; ++p) {
    expect_rel(back.device.peak_flops[p], c.device.peak_flops[p], 1e-12);
    ASSERT_EQ(back.device.gemm_efficiency[p].size(), c.device.gemm_efficiency[p].size());
    for (size_t i = 0; i < c.device.gemm_efficiency[p].size(); ++i) {
      expect_rel(back.device.gemm_efficiency[p][i].size, c.device.gemm_efficiency[p][i].size);
      expect_rel(back.device.gemm_efficiency[p][i].efficiency, c.device.gemm_efficiency[p][i].efficiency);
    }
  }
  for (int k = 0; k < kNumCollectives; ++k) {
    ASSERT_EQ(back.measured[0][k].size(), c.measured[0][k].size());
    for (size_t i = 0; i < c.measured[0][k].size(); ++i) {
      EXPECT_EQ(back.measured[0][k][i].ranks, c.measured[0][k][i].ranks);
      expect_rel(back.measured[0][k][i].latency, c.measured[0][k][i].latency);
      expect_rel(back.measured[0][k][i].bus_bandwidth, c.measured[0][k][i].bus_bandwidth);
      expect_rel(back.measured[0][k][i].min_bytes, c.measured[0][k][i].min_bytes);
    }
  }
}

TEST(MachineCluster, OneRankUsesTheMemoryCopyRateAsItsLink) {
  const ClusterSpec c = machine_cluster(synthetic_measurements(1, false));
  EXPECT_EQ(c.devices_per_node, 1);
  expect_rel(c.intra.bandwidth, 20e9);  // copy
  EXPECT_EQ(c.intra.latency, 0.0);
  for (const auto& table : c.measured[0]) EXPECT_TRUE(table.empty());
  EXPECT_EQ(c.peak_flops(Precision::kBF16), 0.0);
  const ClusterSpec back = parse_cluster_yaml(cluster_to_yaml(c), "one.yaml");
  EXPECT_EQ(back.peak_flops(Precision::kBF16), 0.0);
  expect_rel(back.peak_flops(Precision::kFP32), c.peak_flops(Precision::kFP32));
}

TEST(MachineCluster, RefusesMeasurementsWithoutFp32) {
  MachineMeasurements m = synthetic_measurements(2, true);
  m.gemm[0] = GemmSurvey{};
  EXPECT_THROW(machine_cluster(m), Error);
}

TEST(MachineDetails, ListEveryMeasurement) {
  const nlohmann::json d = machine_details_json(synthetic_measurements(2, false));
  EXPECT_EQ(d["ranks"], 2);
  EXPECT_TRUE(d["gemm"]["fp32"]["available"].get<bool>());
  EXPECT_EQ(d["gemm"]["fp32"]["shapes"].size(), 3u);
  EXPECT_FALSE(d["gemm"]["bf16"]["available"].get<bool>());
  EXPECT_EQ(d["gemm"]["bf16"]["reason"], "no such GEMM on the test CPU");
  EXPECT_EQ(d["collectives"].size(), 5u);
  EXPECT_EQ(d["collectives"][0]["regimes"].size(), 2u);
  EXPECT_DOUBLE_EQ(d["memory_bandwidth"]["triad_gbps"].get<double>(), 15.0);
}

}  // namespace
}  // namespace moe4d
