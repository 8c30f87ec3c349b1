// plan/checkpoint_model.h — what saving checkpoints costs a layout (docs/planner.md, "Checkpoints").
//
//  * bytes of a save: the fp32 values and AdamW's two moments of every parameter, 12 bytes each.
//  * write time, at the cluster's storage.write_bandwidth_gbps (the file system's aggregate write
//    bandwidth): checkpoint.format sharded writes every device's share in parallel, bytes / bandwidth;
//    full has one writer (rank 0, after gathering everything), so one device's NIC caps it too.
//  * the time the step loop is blocked per save: the write, for a synchronous save; with
//    checkpoint.async the copy of the device's share into its staging buffer (MemoryBreakdown::
//    checkpoint_staging) at the device's memory bandwidth — what moe4d's runtime does in host memory;
//    a GPU's copy to the host is PCIe-bound and slower — plus the part of the write that outlasts
//    checkpoint.interval steps (at most one save in flight: the next save waits for it).
//  * the interval's cost: blocked time / (interval x step time), the share of training time spent
//    saving.
// Pure function of the evaluation.
#pragma once

#include <limits>

#include "plan/layout_evaluator.h"

namespace moe4d {

struct CheckpointCost {
  static constexpr double kUnknown = std::numeric_limits<double>::quiet_NaN();
  double bytes = 0;                    // one checkpoint, all devices
  double staging_bytes = 0;            // per device (checkpoint.async)
  double write_seconds = kUnknown;     // NaN: the cluster states no storage bandwidth
  double blocked_seconds = kUnknown;   // per save
  double interval_share = kUnknown;    // of the training time; NaN without an interval or a time
};

CheckpointCost checkpoint_cost(const PlanContext& ctx, const Evaluation& evaluation);

}  // namespace moe4d
