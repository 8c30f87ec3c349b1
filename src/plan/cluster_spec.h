// plan/cluster_spec.h — what the planner knows about a cluster: its devices, links and measured speeds.
//
// A ClusterSpec is plain data, filled from a built-in preset (plan/cluster_presets.h) or a cluster
// YAML file (plan/cluster_yaml.h, the file `moe4d bench` writes for "this machine"). Units are SI
// throughout: bytes, bytes/s, FLOP/s, seconds. Memory sizes are bytes (files and reports use GiB).
//
// Link model (docs/planner.md §Communication): a group inside one node uses the intra-node link —
// a full mesh (Ascend HCCS: every device pair has its own link, so a group of n devices drives n-1
// links and its per-device bandwidth grows with n) or a switch (NVSwitch: a constant bandwidth per
// device); a group that spans nodes is bound by each device's NIC. Measured tables (from `moe4d
// bench`) replace the link model for the collectives and group sizes they cover.
#pragma once

#include <array>
#include <string>
#include <vector>

#include "config/config.h"

namespace moe4d {

enum class LinkKind { kFullMesh, kSwitch };
enum class LinkTier { kIntraNode, kInterNode };
enum class Collective { kAllReduce, kReduceScatter, kAllGather, kAllToAll, kSendRecv };
inline constexpr int kNumCollectives = 5;
inline constexpr int kNumPrecisions = 3;  // indexed by static_cast<int>(Precision)

const char* link_kind_name(LinkKind kind);        // "full_mesh", "switch"
const char* link_tier_name(LinkTier tier);        // "intra_node", "inter_node"
const char* collective_name(Collective coll);     // "all_reduce", "reduce_scatter", ...
const char* precision_name(Precision precision);  // "fp32", "bf16", "fp16"

// GEMM efficiency (achieved / peak FLOP/s) at one problem size; size = cbrt(M * N * K).
struct EfficiencyPoint {
  double size = 0;
  double efficiency = 0;
};

// One measured collective: time(bytes) = latency + factor(n) * bytes / bus_bandwidth, where factor
// is the nccl-tests bus factor of the collective (all-reduce 2(n-1)/n, reduce-scatter, all-gather
// and all-to-all (n-1)/n, send/recv 1) and bytes is the full buffer (all-to-all: one rank's send
// buffer; reduce-scatter: the unsharded input). A group size may have several samples for size
// regimes (like NCCL's protocols, or a CPU's messages that stop fitting in cache): each holds from
// its min_bytes up to the next sample's; buffers below the first regime use the first.
struct CollectiveSample {
  int ranks = 0;
  double latency = 0;        // seconds
  double bus_bandwidth = 0;  // bytes/s
  double min_bytes = 0;      // smallest buffer of this regime
};

struct DeviceSpec {
  std::string name;
  double memory_bytes = 0;
  // FLOP/s by precision; fp32 is always positive, 0 for a 16-bit precision the device cannot run.
  std::array<double, kNumPrecisions> peak_flops{};
  double memory_bandwidth = 0;                      // bytes/s
  // The device's training stack runs fused (flash) attention, as Megatron-LM with Transformer Engine
  // and MindFormers' FlashAttentionScore do: no [S, S] probabilities are stored for backward (only the
  // softmax statistics, [b, h/t, S] fp32), and the backward recomputes QK^T. false for moe4d's own CPU
  // runtime, which keeps the probabilities (what `moe4d bench` describes).
  bool fused_attention = false;
  // Without fused attention: the stack computes QK^T and PV over the whole S x S square (batched
  // GEMMs, the masked half computed and then masked) and runs the softmax as its own kernel over the
  // stored scores, as Megatron-LM did before flash attention (2019-22: baddbmm, FusedScaleMaskSoftmax,
  // bmm). false: moe4d's own runtime, which skips the masked blocks (kernels/attention.cc). Not a
  // cluster-file key: the validation runs of that era set it (plan/published_runs.h).
  bool square_attention = false;
  // Fixed cost of one kernel (launch, ramp-up and drain, the dependent next kernel's start), paid by
  // every kernel of a layer on top of its own FLOP or byte time (plan/compute_model.h counts the
  // kernels). 0 for moe4d's CPU runtime, whose per-call costs are inside bench's measured curves.
  double kernel_overhead = 0;  // seconds
  // Relative standard deviation of the speed of devices of this model across a cluster (power
  // management, manufacturing): a synchronous step runs at its slowest device's pace, the expected
  // maximum of N such devices being 1 + sigma sqrt(2 ln N) times the mean (LayoutEvaluator).
  double speed_variation = 0;
  // Streaming multiprocessors (GPU) the GEMM kernels spread their output tiles over; 0: not modelled
  // (moe4d bench's measured curve already holds the CPU's). A GEMM of T output tiles runs in
  // ceil(T / units) waves, the last one partly idle (plan/compute_model.h).
  int compute_units = 0;
  // Efficiency curve per precision, sorted by size; an empty curve uses default_gemm_efficiency().
  std::array<std::vector<EfficiencyPoint>, kNumPrecisions> gemm_efficiency;
};

struct IntraNodeLink {
  LinkKind kind = LinkKind::kSwitch;
  double bandwidth = 0;  // bytes/s per direction: per link (full mesh) or per device (switch)
  double latency = 0;    // seconds per message step
};

struct InterNodeLink {
  double nic_bandwidth = 0;  // bytes/s per direction per device
  double latency = 0;        // seconds per message step
};

struct ClusterSpec {
  std::string name;
  std::string description;
  int nodes = 1;
  int devices_per_node = 1;
  DeviceSpec device;
  IntraNodeLink intra;
  InterNodeLink inter;
  // Memory kept free on every device (runtime context, allocator fragmentation), as a fraction of
  // device memory; the planner admits a layout only if its parts fit in the rest.
  double memory_reserve_fraction = 0.05;
  // storage.write_bandwidth_gbps: the checkpoint file system's aggregate write bandwidth (bytes/s,
  // all writers together); 0: not stated (the report then gives no save times).
  double storage_write_bandwidth = 0;
  // Measured collectives by [tier][collective], sorted by ranks, then min_bytes; empty: use the link model.
  std::array<std::array<std::vector<CollectiveSample>, kNumCollectives>, 2> measured;

  int device_count() const { return nodes * devices_per_node; }
  double peak_flops(Precision precision) const { return device.peak_flops[static_cast<int>(precision)]; }

  // GEMM efficiency at `size` (cube root of M*N*K), interpolated linearly in log(size) between the
  // curve's points and clamped at its ends.
  double gemm_efficiency(double size, Precision precision) const;

  // Throws moe4d::Error naming the first bad field (non-positive sizes or speeds, efficiencies
  // outside (0, 1], unsorted curves or tables). `source` prefixes the message.
  void validate(const std::string& source) const;
};

// The efficiency curve used when a cluster gives none: a generic accelerator GEMM (small problems
// are launch/latency bound, large ones reach ~80% of peak).
const std::vector<EfficiencyPoint>& default_gemm_efficiency();

// The same cluster with `devices` devices: fewer than one node keeps one partially used node;
// more must be a whole number of nodes (moe4d::Error otherwise).
ClusterSpec cluster_with_devices(const ClusterSpec& cluster, int devices);

}  // namespace moe4d
