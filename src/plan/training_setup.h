// plan/training_setup.h — the training run a layout is planned for (what does not depend on the layout).
#pragma once

#include <cstdint>

#include "config/config.h"

namespace moe4d {

struct TrainingSetup {
  int64_t global_batch = 0;  // sequences per optimizer step, over all data replicas
  int seq_length = 0;
  Precision precision = Precision::kBF16;
  GradCompression grad_compression = GradCompression::kNone;  // dtype of the data-parallel gradient reduction
  int grad_buckets = 4;              // parallel_config.gradient_aggregation_group
  bool overlap_grad_reduce = true;   // bucket reductions run behind the backward pass
  // Routed rows of the busiest expert-parallel device over the balanced T k (>= 1; 1 = balanced
  // routing). Routing is data-dependent — a fresh router sends 1.3-1.6x the balanced rows to its
  // busiest EP rank of 2 — so it is an input (moe4d plan --expert-imbalance, measured from a run's
  // moe.layers[].tokens_per_expert), not something the planner can derive. With EP > 1 the busiest
  // device's expert GEMMs, expert activations and all-to-all traffic scale by it; every layer waits
  // for that device at its all-to-all.
  double expert_imbalance = 1.0;

  bool mixed() const { return precision != Precision::kFP32; }
  // Bytes of one activation / compute-weight element.
  int compute_bytes() const { return mixed() ? 2 : 4; }
  int grad_reduce_bytes() const { return grad_compression == GradCompression::kNone ? 4 : 2; }
};

}  // namespace moe4d
