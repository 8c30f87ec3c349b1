// plan/cluster_presets.h — built-in cluster descriptions: Atlas 800T A2 (8 x Ascend 910B, HCCS full
// mesh, 200GE RoCE per NPU), DGX A100, DGX H100 and DGX H200 (NVSwitch, InfiniBand per GPU).
//
// Numbers are public peak figures; link bandwidths are what collective benchmarks typically reach
// (bus bandwidth), not marketing totals. "This machine" is not a preset: `moe4d bench` measures it
// and writes a cluster YAML (format: plan/cluster_yaml.h, example configs/clusters/this_machine.example.yaml).
#pragma once

#include <string>
#include <vector>

#include "plan/cluster_spec.h"

namespace moe4d {

std::vector<std::string> cluster_preset_names();

// Throws moe4d::Error naming the known presets when `name` is not one of them.
ClusterSpec cluster_preset(const std::string& name);

bool is_cluster_preset(const std::string& name);

}  // namespace moe4d
