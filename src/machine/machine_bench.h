// machine/machine_bench.h — `moe4d bench` as a library call: measure this machine and describe it as
// a planner cluster (plan/cluster_spec.h) that `moe4d plan MODEL cluster.yaml` reads.
//
// What runs (all ranks at once, because training keeps every rank busy at once and the ranks of one
// machine share its caches and memory bus; the slowest rank's numbers are kept):
//   1. GEMM survey per precision (machine/gemm_survey.h): fp32 always; bf16 / fp16 through oneDNN
//      when this CPU has optimised kernels for them, otherwise the reason is recorded and the cluster
//      has no peak for them (the planner then refuses that precision on this machine).
//   2. Memory bandwidth (machine/memory_bandwidth.h): the triad rate per rank.
//   3. Collectives (machine/collective_survey.h) for group sizes 2..world size, each fitted to
//      latency + bus_factor(n) * bytes / bus_bandwidth per size regime (one table entry per regime,
//      with its min_bytes); with one rank there is nothing to measure.
// The cluster: one node, devices_per_node = world size (a device is one single-threaded rank),
// memory = RAM / ranks, measured collective tables for the intra-node tier. The link model's
// fallback numbers (used only for collectives without a table) are the large-message all-reduce
// bandwidth of the largest group and the small-message send/recv latency; the inter-node tier is not measurable on one node and
// repeats the intra-node link (the description says so). With one rank the intra-node link is the
// measured memory copy rate (shared-memory MPI moves bytes by copying), latency 0.
//
// Collective over `world`: every rank calls run_machine_bench with the same options. Progress
// lines go through options.progress on rank 0 only. The BLAS thread count is the caller's (the CLI
// pins one thread per rank, as `moe4d train` does).
#pragma once

#include <array>
#include <vector>

#include <nlohmann/json.hpp>

#include "comm/communicator.h"
#include "machine/collective_survey.h"
#include "machine/gemm_survey.h"
#include "machine/host_info.h"
#include "machine/memory_bandwidth.h"
#include "plan/cluster_spec.h"

namespace moe4d {

struct MachineBenchOptions {
  bool quick = false;   // a few small shapes and messages (seconds, for tests); numbers are rough
  ProgressFn progress;  // called on world rank 0
};

struct MachineMeasurements {
  HostInfo host;
  int ranks = 1;
  std::array<GemmSurvey, kNumPrecisions> gemm;  // indexed by Precision
  MemoryBandwidth memory;
  std::vector<CollectiveCurve> collectives;
};

struct MachineBenchResult {
  MachineMeasurements measurements;
  ClusterSpec cluster;
  nlohmann::json details;  // every measurement and fit (moe4d bench --details)
};

MachineBenchResult run_machine_bench(Communicator& world, const MachineBenchOptions& options);

// The cluster that describes the measurements (rules above). Pure; throws moe4d::Error when the fp32
// survey is missing or a measured table is invalid.
ClusterSpec machine_cluster(const MachineMeasurements& measurements);

// The measurements as JSON (per precision: implementation or reason, peak, curve and every shape;
// memory bandwidth; per collective and group size: sizes, lower-quartile / min / max seconds and the fit).
nlohmann::json machine_details_json(const MachineMeasurements& measurements);

}  // namespace moe4d
