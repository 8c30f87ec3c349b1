// plan/cluster_spec.cc — efficiency-curve interpolation and validation of a ClusterSpec.
#include "plan/cluster_spec.h"

#include <cmath>

#include "config/config_names.h"
#include "core/error.h"

namespace moe4d {

const char* link_kind_name(LinkKind kind) { return kind == LinkKind::kFullMesh ? "full_mesh" : "switch"; }

const char* link_tier_name(LinkTier tier) { return tier == LinkTier::kIntraNode ? "intra_node" : "inter_node"; }

const char* collective_name(Collective coll) {
  switch (coll) {
    case Collective::kAllReduce: return "all_reduce";
    case Collective::kReduceScatter: return "reduce_scatter";
    case Collective::kAllGather: return "all_gather";
    case Collective::kAllToAll: return "all_to_all";
    case Collective::kSendRecv: return "send_recv";
  }
  return "?";
}

const char* precision_name(Precision precision) { return config_names::name_of(config_names::kPrecisionNames, precision).data(); }

const std::vector<EfficiencyPoint>& default_gemm_efficiency() {
  static const std::vector<EfficiencyPoint> curve = {
      {64, 0.05}, {256, 0.30}, {1024, 0.60}, {2048, 0.72}, {4096, 0.80}, {8192, 0.83}};
  return curve;
}

double ClusterSpec::gemm_efficiency(double size, Precision precision) const {
  const std::vector<EfficiencyPoint>& own = device.gemm_efficiency[static_cast<int>(precision)];
  const std::vector<EfficiencyPoint>& curve = own.empty() ? default_gemm_efficiency() : own;
  if (size <= curve.front().size) return curve.front().efficiency;
  if (size >= curve.back().size) return curve.back().efficiency;
  size_t hi = 1;
  while (curve[hi].size < size) ++hi;
  const EfficiencyPoint& a = curve[hi - 1];
  const EfficiencyPoint& b = curve[hi];
  const double w = std::log(size / a.size) / std::log(b.size / a.size);
  return a.efficiency + w * (b.efficiency - a.efficiency);
}

void ClusterSpec::validate(const std::string& source) const {
  if (nodes <= 0) fail("{}: nodes must be a positive integer, got {}", source, nodes);
  if (devices_per_node <= 0) fail("{}: devices_per_node must be a positive integer, got {}", source, devices_per_node);
  if (device.memory_bytes <= 0) fail("{}: device.memory_gib must be positive", source);
  if (device.memory_bandwidth <= 0) fail("{}: device.memory_bandwidth_gbps must be positive", source);
  if (device.kernel_overhead < 0) fail("{}: device.kernel_overhead_us must be >= 0", source);
  if (device.compute_units < 0) fail("{}: device.compute_units must be >= 0, got {}", source, device.compute_units);
  if (device.speed_variation < 0 || device.speed_variation >= 1)
    fail("{}: device.speed_variation must be in [0, 1), got {}", source, device.speed_variation);
  if (!(storage_write_bandwidth >= 0)) fail("{}: storage.write_bandwidth_gbps must be positive", source);
  for (int p = 0; p < kNumPrecisions; ++p) {
    const char* name = precision_name(static_cast<Precision>(p));
    // fp32 is required; a 16-bit precision the device cannot run has peak 0 (and no curve).
    if (p == 0 ? device.peak_flops[p] <= 0 : device.peak_flops[p] < 0)
      fail("{}: device.peak_tflops.{} must be positive", source, name);
    if (device.peak_flops[p] == 0 && !device.gemm_efficiency[p].empty())
      fail("{}: device.gemm_efficiency.{} is given, but device.peak_tflops.{} is not", source, name, name);
    const std::vector<EfficiencyPoint>& curve = device.gemm_efficiency[p];
    for (size_t i = 0; i < curve.size(); ++i) {
      if (curve[i].size <= 0) fail("{}: device.gemm_efficiency.{}[{}]: size must be positive", source, name, i);
      if (!(curve[i].efficiency > 0 && curve[i].efficiency <= 1))
        fail("{}: device.gemm_efficiency.{}[{}]: efficiency must be in (0, 1], got {}", source, name, i,
             curve[i].efficiency);
      if (i > 0 && curve[i].size <= curve[i - 1].size)
        fail("{}: device.gemm_efficiency.{}: sizes must increase, got {} after {}", source, name, curve[i].size,
             curve[i - 1].size);
    }
  }
  if (intra.bandwidth <= 0) fail("{}: intra_node.bandwidth_gbps must be positive", source);
  if (intra.latency < 0) fail("{}: intra_node.latency_us must not be negative", source);
  if (inter.nic_bandwidth <= 0) fail("{}: inter_node.nic_bandwidth_gbps must be positive", source);
  if (inter.latency < 0) fail("{}: inter_node.latency_us must not be negative", source);
  if (!(memory_reserve_fraction >= 0 && memory_reserve_fraction < 1))
    fail("{}: memory_reserve_fraction must be in [0, 1), got {}", source, memory_reserve_fraction);
  for (int tier = 0; tier < 2; ++tier) {
    for (int c = 0; c < kNumCollectives; ++c) {
      const std::vector<CollectiveSample>& table = measured[tier][c];
      const char* where = link_tier_name(static_cast<LinkTier>(tier));
      const char* coll = collective_name(static_cast<Collective>(c));
      for (size_t i = 0; i < table.size(); ++i) {
        if (table[i].ranks < 2) fail("{}: collectives.{}.{}[{}]: ranks must be >= 2", source, where, coll, i);
        if (table[i].latency < 0 || table[i].bus_bandwidth <= 0)
          fail("{}: collectives.{}.{}[{}]: latency must be >= 0 and bus bandwidth positive", source, where, coll, i);
        if (table[i].min_bytes < 0)
          fail("{}: collectives.{}.{}[{}]: min_bytes must not be negative", source, where, coll, i);
        if (i > 0 && table[i].ranks < table[i - 1].ranks)
          fail("{}: collectives.{}.{}: ranks must increase, got {} after {}", source, where, coll, table[i].ranks,
               table[i - 1].ranks);
        if (i > 0 && table[i].ranks == table[i - 1].ranks && table[i].min_bytes <= table[i - 1].min_bytes)
          fail("{}: collectives.{}.{}: the size regimes of {} ranks must have increasing min_bytes, got {} after {}",
               source, where, coll, table[i].ranks, table[i].min_bytes, table[i - 1].min_bytes);
      }
    }
  }
}

ClusterSpec cluster_with_devices(const ClusterSpec& cluster, int devices) {
  if (devices <= 0) fail("device count must be positive, got {}", devices);
  ClusterSpec out = cluster;
  if (devices <= cluster.devices_per_node) {
    out.nodes = 1;
    out.devices_per_node = devices;
    return out;
  }
  if (devices % cluster.devices_per_node != 0)
    fail("{} devices is not a whole number of {}-device nodes of cluster {}", devices, cluster.devices_per_node,
         cluster.name);
  out.nodes = devices / cluster.devices_per_node;
  return out;
}

}  // namespace moe4d
