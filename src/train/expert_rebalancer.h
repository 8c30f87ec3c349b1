// train/expert_rebalancer.h — expert replication at the step level (docs/expert_replication.md): the
// per-step replica fetch, the bytes the replicas moved, the rebalance every moe.rebalance_interval
// steps and the replication metrics.
//
// Every rank sums the same all-reduced per-expert load (integers carried in doubles, exact) and runs
// the same integer placement algorithm on it, so all ranks of an EP group switch to the same
// placement after the same step without exchanging it. Each rank keeps the placement of every MoE
// layer of the model (rank 0 reports layers of other stages). Placements are not checkpointed: a
// resumed run (with any R) starts from the initial placement and rebalances on the same schedule.
#pragma once

#include <cstdint>
#include <vector>

#include <nlohmann/json.hpp>

#include "backend/backend.h"
#include "config/config.h"
#include "expert_placement/expert_placement.h"
#include "model/transformer.h"
#include "parallel/parallel_context.h"

namespace moe4d {

class ExpertRebalancer {
 public:
  // moe_layers: the global index of every MoE layer of the model. `config`, `pc` and `model` are
  // borrowed.
  ExpertRebalancer(const Config& config, ParallelContext& pc, Transformer& model, std::vector<int> moe_layers);

  // Whether the run replicates experts (moe.redundant_experts > 0 over more than one EP rank).
  bool active() const { return active_; }
  // Values per MoE layer in the step's reduction: rows per EP rank with / without replicas, replica
  // bytes, cross-node rows with / without (0 when inactive).
  size_t stride() const { return active_ ? 2 * size_t(pc_.ep_size()) + 3 : 0; }

  // Before every step and evaluation: replica weights are stale (the optimizer ran), their fetch is
  // started for every local MoE layer when the homes' values are resident (ZeRO 0-2).
  void begin_step(const ParamStore& params, Backend& backend);
  // After the step's backward: the bytes each layer's replicas moved, into `stats`.
  void collect_replica_bytes(std::vector<MoeLayerStats>& stats);
  // This rank's figures of `stats` into out [MoE layers x stride()] (the global layer order).
  void pack(const std::vector<MoeLayerStats>& stats, double* out) const;
  // After the step: adds the all-reduced load [MoE layers x experts]; every rebalance_interval
  // steps places the replicas anew (from the next step on).
  void rebalance(const std::vector<double>& load, int64_t step);
  // The metrics' moe.replication object from the all-reduced [MoE layers x stride()] figures.
  nlohmann::json record(const double* reduced) const;
  // This rank's replica weights, gradients and staging.
  double buffer_bytes() const;

 private:
  const Config& config_;
  ParallelContext& pc_;
  Transformer& model_;
  std::vector<int> moe_layers_;
  bool active_;
  std::vector<ExpertPlacement> placements_;          // every MoE layer's, once the first rebalance ran
  std::vector<std::vector<int64_t>> interval_load_;  // integer load since the last rebalance
  std::vector<int> moved_slots_;                     // replica slots refilled by the last rebalance
};

}  // namespace moe4d
