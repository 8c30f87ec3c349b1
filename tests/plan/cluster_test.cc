// tests/plan/cluster_test.cc — cluster presets and the cluster file (the format `moe4d bench` writes).
#include <gtest/gtest.h>

#include <cmath>

#include "core/error.h"
#include "plan/cluster_presets.h"
#include "plan/cluster_yaml.h"

namespace moe4d {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

void expect_near_rel(double a, double b) { EXPECT_NEAR(a, b, 1e-12 * std::max(std::abs(a), std::abs(b))); }

void expect_same_cluster(const ClusterSpec& a, const ClusterSpec& b) {
  EXPECT_EQ(a.name, b.name);
  EXPECT_EQ(a.description, b.description);
  EXPECT_EQ(a.nodes, b.nodes);
  EXPECT_EQ(a.devices_per_node, b.devices_per_node);
  EXPECT_EQ(a.device.name, b.device.name);
  expect_near_rel(a.device.memory_bytes, b.device.memory_bytes);
  expect_near_rel(a.device.memory_bandwidth, b.device.memory_bandwidth);
  EXPECT_EQ(a.device.fused_attention, b.device.fused_attention);
  expect_near_rel(a.device.kernel_overhead, b.device.kernel_overhead);
  expect_near_rel(a.device.speed_variation, b.device.speed_variation);
  EXPECT_EQ(a.device.compute_units, b.device.compute_units);
  for (int p = 0; p < kNumPrecisions; ++p) {
    expect_near_rel(a.device.peak_flops[p], b.device.peak_flops[p]);
    ASSERT_EQ(a.device.gemm_efficiency[p].size(), b.device.gemm_efficiency[p].size());
    for (size_t i = 0; i < a.device.gemm_efficiency[p].size(); ++i) {
      expect_near_rel(a.device.gemm_efficiency[p][i].size, b.device.gemm_efficiency[p][i].size);
      expect_near_rel(a.device.gemm_efficiency[p][i].efficiency, b.device.gemm_efficiency[p][i].efficiency);
    }
  }
  EXPECT_EQ(a.intra.kind, b.intra.kind);
  expect_near_rel(a.intra.bandwidth, b.intra.bandwidth);
  expect_near_rel(a.intra.latency, b.intra.latency);
  expect_near_rel(a.inter.nic_bandwidth, b.inter.nic_bandwidth);
  expect_near_rel(a.inter.latency, b.inter.latency);
  expect_near_rel(a.memory_reserve_fraction, b.memory_reserve_fraction);
  for (int t = 0; t < 2; ++t) {
    for (int k = 0; k < kNumCollectives; ++k) {
      ASSERT_EQ(a.measured[t][k].size(), b.measured[t][k].size());
      for (size_t i = 0; i < a.measured[t][k].size(); ++i) {
        EXPECT_EQ(a.measured[t][k][i].ranks, b.measured[t][k][i].ranks);
        expect_near_rel(a.measured[t][k][i].latency, b.measured[t][k][i].latency);
        expect_near_rel(a.measured[t][k][i].bus_bandwidth, b.measured[t][k][i].bus_bandwidth);
      }
    }
  }
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(ClusterPresets, AreValidAndDescribeTheArticlesHardware) {
  for (const std::string& name : cluster_preset_names()) {
    const ClusterSpec c = cluster_preset(name);
    EXPECT_NO_THROW(c.validate(name));
    EXPECT_EQ(c.devices_per_node, 8) << name;
  }
  const ClusterSpec a2 = cluster_preset("atlas-800t-a2");
  EXPECT_EQ(a2.device_count(), 64);
  EXPECT_DOUBLE_EQ(a2.device.memory_bytes, 64 * kGiB);
  EXPECT_EQ(a2.intra.kind, LinkKind::kFullMesh);
  EXPECT_EQ(cluster_preset("dgx-h100").intra.kind, LinkKind::kSwitch);
  EXPECT_NE(error_of([] { cluster_preset("dgx-b200"); }).find("unknown cluster preset 'dgx-b200'"), std::string::npos);
}

TEST(ClusterYaml, PresetsRoundTrip) {
  for (const std::string& name : cluster_preset_names()) {
    const ClusterSpec c = cluster_preset(name);
    expect_same_cluster(parse_cluster_yaml(cluster_to_yaml(c), name), c);
  }
}

TEST(ClusterYaml, MeasuredTablesRoundTrip) {
  ClusterSpec c = cluster_preset("dgx-a100");
  c.measured[0][static_cast<int>(Collective::kAllReduce)] = {{2, 6e-6, 2e9}, {4, 9e-6, 1.8e9}};
  c.measured[1][static_cast<int>(Collective::kAllToAll)] = {{2, 3e-5, 1e10}};
  expect_same_cluster(parse_cluster_yaml(cluster_to_yaml(c), "measured"), c);
}

TEST(ClusterYaml, TheExampleFileParses) {
  const ClusterSpec c = load_cluster_file(std::string(MOE4D_SOURCE_DIR) + "/configs/clusters/this_machine.example.yaml");
  EXPECT_EQ(c.device_count(), 2);
  EXPECT_DOUBLE_EQ(c.peak_flops(Precision::kFP32), 0.1e12);
  EXPECT_EQ(c.measured[0][static_cast<int>(Collective::kAllReduce)].size(), 1u);
  EXPECT_DOUBLE_EQ(c.measured[0][static_cast<int>(Collective::kAllReduce)][0].bus_bandwidth, 2e9);
}

const char* kMinimal = R"(name: box
nodes: 1
devices_per_node: 2
device:
  memory_gib: 8
  memory_bandwidth_gbps: 10
  peak_tflops: {fp32: 0.1, bf16: 0.2, fp16: 0.2}
intra_node: {kind: switch, bandwidth_gbps: 2, latency_us: 1}
inter_node: {nic_bandwidth_gbps: 1, latency_us: 10}
)";

TEST(ClusterYaml, ErrorsNameTheFileLineAndKey) {
  EXPECT_NO_THROW(parse_cluster_yaml(kMinimal, "box.yaml"));
  EXPECT_FALSE(parse_cluster_yaml(kMinimal, "box.yaml").device.fused_attention);  // moe4d's CPU runtime: no flash
  std::string fused = kMinimal;
  fused.replace(fused.find("  memory_gib: 8\n"), 15, "  memory_gib: 8\n  fused_attention: true\n");
  EXPECT_TRUE(parse_cluster_yaml(fused, "box.yaml").device.fused_attention);
  fused.replace(fused.find("fused_attention: true"), 21, "fused_attention: 2");
  EXPECT_EQ(error_of([&] { parse_cluster_yaml(fused, "box.yaml"); }),
            "box.yaml:6: device.fused_attention: expected true or false, got '2'");
  std::string text = kMinimal;
  text += "gpus: 8\n";
  EXPECT_EQ(error_of([&] { parse_cluster_yaml(text, "box.yaml"); }), "box.yaml:10: unknown key gpus");
  text = kMinimal;
  text.replace(text.find("memory_gib: 8"), 13, "memory_gib: lots");
  EXPECT_EQ(error_of([&] { parse_cluster_yaml(text, "box.yaml"); }),
            "box.yaml:5: device.memory_gib: expected a number, got 'lots'");
  text = kMinimal;
  text.replace(text.find("kind: switch"), 12, "kind: torus");
  EXPECT_EQ(error_of([&] { parse_cluster_yaml(text, "box.yaml"); }),
            "box.yaml:8: intra_node.kind: expected full_mesh or switch, got 'torus'");
  text = kMinimal;
  text.replace(text.find("nodes: 1"), 8, "");
  EXPECT_EQ(error_of([&] { parse_cluster_yaml(text, "box.yaml"); }), "box.yaml:1: missing required key nodes");
  text = kMinimal;
  text.replace(text.find("peak_tflops: {fp32: 0.1,"), 24, "peak_tflops: {fp32: 0,");
  EXPECT_EQ(error_of([&] { parse_cluster_yaml(text, "box.yaml"); }), "box.yaml: device.peak_tflops.fp32 must be positive");
  EXPECT_NE(error_of([] { load_cluster_file("/nonexistent/cluster.yaml"); }).find("/nonexistent/cluster.yaml"),
            std::string::npos);
}

TEST(ClusterSpec, WithDevices) {
  const ClusterSpec a2 = cluster_preset("atlas-800t-a2");
  EXPECT_EQ(cluster_with_devices(a2, 128).nodes, 16);
  const ClusterSpec part = cluster_with_devices(a2, 4);
  EXPECT_EQ(part.nodes, 1);
  EXPECT_EQ(part.devices_per_node, 4);
  EXPECT_EQ(error_of([&] { cluster_with_devices(a2, 12); }),
            "12 devices is not a whole number of 8-device nodes of cluster atlas-800t-a2");
}

}  // namespace
}  // namespace moe4d
