// plan/cluster_yaml.cc — reading and writing the cluster file (format in plan/cluster_yaml.h).
#include "plan/cluster_yaml.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include "core/error.h"
#include "plan/yaml_reader.h"

namespace moe4d {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
constexpr double kGB = 1e9;
constexpr double kTFLOPS = 1e12;
constexpr double kUs = 1e-6;

std::vector<EfficiencyPoint> read_curve(const YAML::Node& node, const std::string& path, const std::string& source) {
  if (!node.IsSequence()) fail("{}: {}: expected a list of [size, efficiency] pairs", YamlMap::location(node, source), path);
  std::vector<EfficiencyPoint> curve;
  for (size_t i = 0; i < node.size(); ++i) {
    const YAML::Node pair = node[i];
    const std::string item = fmt::format("{}[{}]", path, i);
    if (!pair.IsSequence() || pair.size() != 2)
      fail("{}: {}: expected a [size, efficiency] pair", YamlMap::location(pair, source), item);
    curve.push_back({YamlMap::as_number(pair[0], item, source), YamlMap::as_number(pair[1], item, source)});
  }
  return curve;
}

std::vector<CollectiveSample> read_samples(const YAML::Node& node, const std::string& path, const std::string& source) {
  if (!node.IsSequence())
    fail("{}: {}: expected a list of {{ranks, latency_us, bus_bandwidth_gbps[, min_bytes]}}", YamlMap::location(node, source),
         path);
  std::vector<CollectiveSample> samples;
  for (size_t i = 0; i < node.size(); ++i) {
    YamlMap entry(node[i], fmt::format("{}[{}]", path, i), source);
    CollectiveSample s;
    s.ranks = static_cast<int>(entry.integer("ranks"));
    s.latency = entry.number("latency_us") * kUs;
    s.bus_bandwidth = entry.number("bus_bandwidth_gbps") * kGB;
    s.min_bytes = entry.number_or("min_bytes", 0);
    entry.finish();
    samples.push_back(s);
  }
  return samples;
}

}  // namespace

ClusterSpec parse_cluster_yaml(const std::string& yaml_text, const std::string& source) {
  const YAML::Node doc = parse_yaml_text(yaml_text, source);
  YamlMap root(doc, "", source);
  ClusterSpec c;
  c.name = root.string("name");
  c.description = root.string_or("description", "");
  c.nodes = static_cast<int>(root.integer("nodes"));
  c.devices_per_node = static_cast<int>(root.integer("devices_per_node"));
  c.memory_reserve_fraction = root.number_or("memory_reserve_fraction", c.memory_reserve_fraction);

  YamlMap device = root.map("device");
  c.device.name = device.string_or("name", "");
  c.device.memory_bytes = device.number("memory_gib") * kGiB;
  c.device.memory_bandwidth = device.number("memory_bandwidth_gbps") * kGB;
  if (device.has("fused_attention")) c.device.fused_attention = device.boolean("fused_attention");
  c.device.kernel_overhead = device.number_or("kernel_overhead_us", 0) * 1e-6;
  c.device.speed_variation = device.number_or("speed_variation", 0);
  c.device.compute_units = static_cast<int>(device.number_or("compute_units", 0));
  YamlMap peak = device.map("peak_tflops");
  // fp32 is required; bf16 / fp16 are absent on a machine without a 16-bit GEMM (moe4d bench omits them).
  c.device.peak_flops[0] = peak.number(precision_name(Precision::kFP32)) * kTFLOPS;
  for (int p = 1; p < kNumPrecisions; ++p) {
    const char* key = precision_name(static_cast<Precision>(p));
    if (peak.has(key)) {
      c.device.peak_flops[p] = peak.number(key) * kTFLOPS;
      if (c.device.peak_flops[p] <= 0) fail("{}: device.peak_tflops.{} must be positive (omit it when the device has no {} GEMM)", source, key, key);
    }
  }
  peak.finish();
  if (device.has("gemm_efficiency")) {
    YamlMap curves = device.map("gemm_efficiency");
    for (int p = 0; p < kNumPrecisions; ++p) {
      const std::string key = precision_name(static_cast<Precision>(p));
      if (curves.has(key)) c.device.gemm_efficiency[p] = read_curve(curves.node(key), curves.key_path(key), source);
    }
    curves.finish();
  }
  device.finish();

  YamlMap intra = root.map("intra_node");
  const std::string kind = intra.string("kind");
  if (kind == "full_mesh") {
    c.intra.kind = LinkKind::kFullMesh;
  } else if (kind == "switch") {
    c.intra.kind = LinkKind::kSwitch;
  } else {
    fail("{}: intra_node.kind: expected full_mesh or switch, got '{}'", intra.where("kind"), kind);
  }
  c.intra.bandwidth = intra.number("bandwidth_gbps") * kGB;
  c.intra.latency = intra.number("latency_us") * kUs;
  intra.finish();

  YamlMap inter = root.map("inter_node");
  c.inter.nic_bandwidth = inter.number("nic_bandwidth_gbps") * kGB;
  c.inter.latency = inter.number("latency_us") * kUs;
  inter.finish();

  if (root.has("storage")) {
    YamlMap storage = root.map("storage");
    c.storage_write_bandwidth = storage.number("write_bandwidth_gbps") * kGB;
    if (c.storage_write_bandwidth <= 0) fail("{}: storage.write_bandwidth_gbps must be positive", source);
    storage.finish();
  }

  if (root.has("collectives")) {
    YamlMap tiers = root.map("collectives");
    for (int tier = 0; tier < 2; ++tier) {
      const std::string tier_key = link_tier_name(static_cast<LinkTier>(tier));
      if (!tiers.has(tier_key)) continue;
      YamlMap colls = tiers.map(tier_key);
      for (int k = 0; k < kNumCollectives; ++k) {
        const std::string key = collective_name(static_cast<Collective>(k));
        if (colls.has(key)) c.measured[tier][k] = read_samples(colls.node(key), colls.key_path(key), source);
      }
      colls.finish();
    }
    tiers.finish();
  }
  root.finish();
  c.validate(source);
  return c;
}

ClusterSpec load_cluster_file(const std::string& path) {
  return parse_cluster_yaml(read_text_file(path, "cluster file"), path);
}

std::string cluster_to_yaml(const ClusterSpec& c) {
  // {:.17g} keeps every digit, so the file reads back to the same spec up to unit-conversion rounding.
  auto num = [](double v) { return fmt::format("{:.17g}", v); };
  YAML::Emitter out;
  out << YAML::BeginMap;
  out << YAML::Key << "name" << YAML::Value << c.name;
  if (!c.description.empty()) out << YAML::Key << "description" << YAML::Value << YAML::DoubleQuoted << c.description;
  out << YAML::Key << "nodes" << YAML::Value << c.nodes;
  out << YAML::Key << "devices_per_node" << YAML::Value << c.devices_per_node;
  out << YAML::Key << "memory_reserve_fraction" << YAML::Value << num(c.memory_reserve_fraction);
  out << YAML::Key << "device" << YAML::Value << YAML::BeginMap;
  if (!c.device.name.empty()) out << YAML::Key << "name" << YAML::Value << YAML::DoubleQuoted << c.device.name;
  out << YAML::Key << "memory_gib" << YAML::Value << num(c.device.memory_bytes / kGiB);
  out << YAML::Key << "memory_bandwidth_gbps" << YAML::Value << num(c.device.memory_bandwidth / kGB);
  if (c.device.fused_attention) out << YAML::Key << "fused_attention" << YAML::Value << true;
  if (c.device.kernel_overhead > 0) out << YAML::Key << "kernel_overhead_us" << YAML::Value << num(c.device.kernel_overhead * 1e6);
  if (c.device.speed_variation > 0) out << YAML::Key << "speed_variation" << YAML::Value << num(c.device.speed_variation);
  if (c.device.compute_units > 0) out << YAML::Key << "compute_units" << YAML::Value << c.device.compute_units;
  out << YAML::Key << "peak_tflops" << YAML::Value << YAML::Flow << YAML::BeginMap;
  for (int p = 0; p < kNumPrecisions; ++p)
    if (p == 0 || c.device.peak_flops[p] > 0)
      out << YAML::Key << precision_name(static_cast<Precision>(p)) << YAML::Value << num(c.device.peak_flops[p] / kTFLOPS);
  out << YAML::EndMap;
  bool any_curve = false;
  for (const auto& curve : c.device.gemm_efficiency) any_curve = any_curve || !curve.empty();
  if (any_curve) {
    out << YAML::Key << "gemm_efficiency" << YAML::Value << YAML::BeginMap;
    for (int p = 0; p < kNumPrecisions; ++p) {
      if (c.device.gemm_efficiency[p].empty()) continue;
      out << YAML::Key << precision_name(static_cast<Precision>(p)) << YAML::Value << YAML::Flow << YAML::BeginSeq;
      for (const EfficiencyPoint& pt : c.device.gemm_efficiency[p])
        out << YAML::Flow << YAML::BeginSeq << num(pt.size) << num(pt.efficiency) << YAML::EndSeq;
      out << YAML::EndSeq;
    }
    out << YAML::EndMap;
  }
  out << YAML::EndMap;
  out << YAML::Key << "intra_node" << YAML::Value << YAML::Flow << YAML::BeginMap;
  out << YAML::Key << "kind" << YAML::Value << link_kind_name(c.intra.kind);
  out << YAML::Key << "bandwidth_gbps" << YAML::Value << num(c.intra.bandwidth / kGB);
  out << YAML::Key << "latency_us" << YAML::Value << num(c.intra.latency / kUs);
  out << YAML::EndMap;
  out << YAML::Key << "inter_node" << YAML::Value << YAML::Flow << YAML::BeginMap;
  out << YAML::Key << "nic_bandwidth_gbps" << YAML::Value << num(c.inter.nic_bandwidth / kGB);
  out << YAML::Key << "latency_us" << YAML::Value << num(c.inter.latency / kUs);
  out << YAML::EndMap;
  if (c.storage_write_bandwidth > 0)
    out << YAML::Key << "storage" << YAML::Value << YAML::Flow << YAML::BeginMap << YAML::Key << "write_bandwidth_gbps"
        << YAML::Value << num(c.storage_write_bandwidth / kGB) << YAML::EndMap;
  bool any_measured = false;
  for (const auto& tier : c.measured)
    for (const auto& table : tier) any_measured = any_measured || !table.empty();
  if (any_measured) {
    out << YAML::Key << "collectives" << YAML::Value << YAML::BeginMap;
    for (int tier = 0; tier < 2; ++tier) {
      bool any = false;
      for (const auto& table : c.measured[tier]) any = any || !table.empty();
      if (!any) continue;
      out << YAML::Key << link_tier_name(static_cast<LinkTier>(tier)) << YAML::Value << YAML::BeginMap;
      for (int k = 0; k < kNumCollectives; ++k) {
        const auto& table = c.measured[tier][k];
        if (table.empty()) continue;
        out << YAML::Key << collective_name(static_cast<Collective>(k)) << YAML::Value << YAML::BeginSeq;
        for (const CollectiveSample& s : table) {
          out << YAML::Flow << YAML::BeginMap;
          out << YAML::Key << "ranks" << YAML::Value << s.ranks;
          if (s.min_bytes > 0) out << YAML::Key << "min_bytes" << YAML::Value << num(s.min_bytes);
          out << YAML::Key << "latency_us" << YAML::Value << num(s.latency / kUs);
          out << YAML::Key << "bus_bandwidth_gbps" << YAML::Value << num(s.bus_bandwidth / kGB);
          out << YAML::EndMap;
        }
        out << YAML::EndSeq;
      }
      out << YAML::EndMap;
    }
    out << YAML::EndMap;
  }
  out << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

}  // namespace moe4d
