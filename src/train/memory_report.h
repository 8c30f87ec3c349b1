// train/memory_report.h — what each rank holds (docs/zero.md): one rank's bytes as a named record,
// gathered from every rank (explicitly collective), the metrics' "memory" object and the start-up
// table built from the gathered records.
#pragma once

#include <vector>

#include <nlohmann/json.hpp>

#include "comm/communicator.h"
#include "config/config.h"
#include "train/zero_layout.h"

namespace moe4d {

// Bytes one rank holds (all doubles: it travels as one all-gather of kF64).
struct RankMemoryUse {
  double params = 0, params_peak = 0, grads = 0, grads_peak = 0, optimizer = 0, activations = 0;
  double replicas = 0;  // expert replica buffers (docs/expert_replication.md)
  double rss_peak = 0;
  double formula_params = 0, formula_grads = 0, formula_optimizer = 0;  // docs/zero.md's formula
  double local_params = 0;                                              // elements of this rank's parameters

  double model_state_and_activations() const { return params + grads + optimizer + activations + replicas; }
  double peak() const { return params_peak + grads_peak + optimizer + activations + replicas; }
};

// Every rank's record, by world rank. Collective over `world`.
std::vector<RankMemoryUse> gather_rank_memory(Communicator& world, const RankMemoryUse& mine);

// The metrics' "memory" object: the largest rank's peak per category and every rank's record.
nlohmann::json memory_record(const std::vector<RankMemoryUse>& ranks, const ParallelConfig& parallel,
                             const ZeroLayout& layout);

// The start-up table of model state per rank (every rank up to 16, else the largest), logged.
void log_memory_table(const std::vector<RankMemoryUse>& ranks, int zero_stage);

}  // namespace moe4d
