// plan/training_setup.h — the training run a layout is planned for (what does not depend on the layout).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "config/config.h"

namespace moe4d {

struct TrainingSetup {
  int64_t global_batch = 0;  // sequences per optimizer step, over all data replicas
  int seq_length = 0;
  Precision precision = Precision::kBF16;
  GradCompression grad_compression = GradCompression::kNone;  // dtype of the data-parallel gradient reduction
  int grad_buckets = 0;              // parallel_config.gradient_aggregation_group (> 0: bucket count)
  int64_t grad_bucket_size = 0;      // parallel_config.grad_bucket_size (elements; 0: the default)
  int zero3_prefetch_buckets = 2;    // parallel_config.zero3_prefetch_buckets
  bool overlap_grad_reduce = true;   // bucket reductions run behind the backward pass
  // The modelled stack applies dropout to the attention probabilities and to both residual branches
  // (GPT-3-style training; moe4d's runtime and today's MoE recipes use none): its masks and passes are
  // memory-bound work (plan/compute_model.h). Set by the validation runs that trained with it.
  bool dropout = false;
  // Routed rows of the busiest expert-parallel device over the balanced T k (>= 1; 1 = balanced
  // routing). Routing is data-dependent — a fresh router sends 1.3-1.6x the balanced rows to its
  // busiest EP rank of 2 — so it is an input (moe4d plan --expert-imbalance, measured from a run's
  // moe.layers[].tokens_per_expert), not something the planner can derive. With EP > 1 the busiest
  // device's expert GEMMs, expert activations and all-to-all traffic scale by it; every layer waits
  // for that device at its all-to-all.
  double expert_imbalance = 1.0;
  // moe.redundant_experts (moe4d plan --redundant-experts): replica slots per MoE layer that take
  // rows off the busiest EP device (plan/replication_model.h); 0 = none.
  int redundant_experts = 0;
  // The run's checkpointing (plan/checkpoint_model.h): checkpoint.format, checkpoint.async (the
  // staging buffer is part of the memory) and checkpoint.interval in steps (0: only at the end).
  CheckpointFormat checkpoint_format = CheckpointFormat::kFull;
  bool checkpoint_async = false;
  int checkpoint_interval = 0;

  // Elements per gradient bucket of a parameter group of `elements` per device replicated over
  // `ranks` devices, as the runtime cuts it (train/zero_layout.h): elements / count, else
  // grad_bucket_size or max(40M, 1M x ranks); never more than the group.
  double bucket_elements(double elements, int ranks) const {
    double b = grad_buckets > 0 ? elements / grad_buckets
                                : grad_bucket_size > 0 ? double(grad_bucket_size)
                                                       : std::max(40e6, 1e6 * ranks);
    return std::min(b, elements);
  }
  // Buckets of such a group.
  int bucket_count(double elements, int ranks) const {
    const double b = bucket_elements(elements, ranks);
    return b > 0 ? static_cast<int>(std::ceil(elements / b)) : 0;
  }

  bool mixed() const { return precision != Precision::kFP32; }
  // Bytes of one activation / compute-weight element.
  int compute_bytes() const { return mixed() ? 2 : 4; }
  int grad_reduce_bytes() const { return grad_compression == GradCompression::kNone ? 4 : 2; }
};

}  // namespace moe4d
