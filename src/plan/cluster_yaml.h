// plan/cluster_yaml.h — the cluster file: a ClusterSpec as YAML, read by `moe4d plan` and written by
// `moe4d bench` for "this machine".
//
// Format (units in the key names; every key below is required unless marked optional):
//
//   name: this-machine
//   description: "..."                      # optional
//   nodes: 1
//   devices_per_node: 2
//   memory_reserve_fraction: 0.05           # optional, default 0.05
//   device:
//     name: "..."                           # optional
//     memory_gib: 11
//     memory_bandwidth_gbps: 20             # GB/s = 1e9 bytes/s
//     fused_attention: true                 # optional, default false: the stack runs flash attention
//     kernel_overhead_us: 4                 # optional, default 0: fixed cost per kernel
//     speed_variation: 0.01                 # optional, default 0: relative sd of device speed
//     compute_units: 108                    # optional, default 0: SMs the GEMM tiles fill in waves
//     peak_tflops: {fp32: 0.1, bf16: 0.2, fp16: 0.2}   # bf16 / fp16 optional: absent = no such GEMM
//     gemm_efficiency:                      # optional per precision: [size, efficiency] pairs,
//       fp32: [[64, 0.3], [512, 0.8]]       # size = cbrt(M*N*K), increasing
//   intra_node: {kind: full_mesh|switch, bandwidth_gbps: 2.0, latency_us: 1.0}
//   inter_node: {nic_bandwidth_gbps: 12.5, latency_us: 20}
//   collectives:                            # optional, measured by `moe4d bench`
//     intra_node:                           # or inter_node (one rank per node)
//       all_reduce: [{ranks: 2, latency_us: 6.0, bus_bandwidth_gbps: 2.0}, ...]
//       # several entries of one group size are size regimes: min_bytes (optional, default 0) is the
//       # smallest buffer an entry holds for, e.g. {ranks: 2, min_bytes: 8388608, ...} for >= 8 MiB
//       # also reduce_scatter, all_gather, all_to_all, send_recv
//
// Unknown keys and wrong types are errors naming the file, line and key path. Pure functions.
#pragma once

#include <string>

#include "plan/cluster_spec.h"

namespace moe4d {

ClusterSpec load_cluster_file(const std::string& path);
ClusterSpec parse_cluster_yaml(const std::string& yaml_text, const std::string& source_name);

// A document in the format above that parse_cluster_yaml reads back to the same ClusterSpec, up to
// the rounding of the unit conversions (numbers are written with 17 significant digits).
std::string cluster_to_yaml(const ClusterSpec& cluster);

}  // namespace moe4d
