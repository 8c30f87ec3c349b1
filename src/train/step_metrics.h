// train/step_metrics.h — what a training step reports, as named records: the step's result, its
// totals over the world (one explicit all-reduce), the communication time per group, the metrics
// record built from them, and the progress line (means over the log interval).
#pragma once

#include <cstdint>
#include <vector>

#include <nlohmann/json.hpp>

#include "comm/communicator.h"
#include "config/config.h"
#include "data/blended_dataset.h"
#include "parallel/parallel_context.h"

namespace moe4d {

struct StepResult {
  int64_t step = 0;
  double loss = 0;       // mean cross-entropy over the step's tokens
  double aux_loss = 0;   // sum over MoE layers of the micro-batch-mean aux loss (unscaled)
  double z_loss = 0;
  double total_loss = 0; // the objective: loss + aux_coeff * aux + z_coeff * z
  double grad_norm = 0;  // before clipping (of the unscaled gradients; non-finite on overflow)
  double loss_scale = 1; // the loss scale this step's backward used (train/loss_scaler.h)
  bool overflow = false; // some gradient was non-finite
  bool skipped = false;  // the parameters were not updated (train/nonfinite_guard.h)
  double lr = 0;
  double seconds = 0;
  nlohmann::json record; // everything written to the metrics file
};

// The step's sums over every micro-batch of every data replica. Each value is contributed by exactly
// one rank per data replica (TP rank 0 of the stage that computes it; the others add zeros).
struct StepTotals {
  double ce_sum = 0;  // cross-entropy, summed over micro-batches (each one's token mean)
  // Over this step's micro-batches and the MoE layers:
  double aux_loss = 0, z_loss = 0, dropped_slots = 0, routed_slots = 0;
  std::vector<double> load;         // [MoE layers x experts] slots routed to each expert (global layer order)
  std::vector<double> replication;  // [MoE layers x stride] expert replication figures (train/expert_rebalancer.h)

  // Sums every field over `world` in one all-reduce. Collective: every rank passes the same sizes.
  void all_reduce(Communicator& world);
};

// Communication counters of every group kind at one moment.
struct CommSnapshot {
  CommStats tp, ep, dp, pp, other;
};
CommSnapshot comm_snapshot(ParallelContext& pc);
// {"tp": {busy_s, exposed_s, bytes}, "ep": ..., "dp": ..., "pp": ..., "other": ...} between two
// snapshots; *exposed_seconds = the exposed time of all groups together.
nlohmann::json comm_record(const CommSnapshot& after, const CommSnapshot& before, double* exposed_seconds);

// The metrics record's step, loss, throughput, data blend and MoE load fields (docs/metrics.md).
// moe_layers: the global index of every MoE layer (totals.load's rows).
nlohmann::json step_record(const Config& config, const StepResult& r, const StepTotals& totals,
                           const std::vector<int>& moe_layers, int world_size, const BlendedDataset& data);

// The progress line: means over the steps since the previous line (the log interval), not the last
// step alone; text or one JSON object per line.
class ProgressLog {
 public:
  ProgressLog(const Config& config, bool json) : config_(config), json_(json) {}
  void add(const StepResult& r);
  // Prints the line for step `step` of a run that stops at `stop`, `elapsed` seconds after it began
  // at step `first`, and starts a new window.
  void print(const StepResult& r, int64_t step, int64_t stop, int64_t first, double elapsed, int64_t skipped_steps,
             bool dynamic_loss_scale);

 private:
  const Config& config_;
  bool json_;
  int steps_ = 0;
  double loss_ = 0, aux_ = 0, grad_norm_ = 0, seconds_ = 0, tokens_ = 0;
};

}  // namespace moe4d
