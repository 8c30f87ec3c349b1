// config/layout_rules.h — what the parallel sizes must divide, defined once: the runtime's check of
// a layout (parallel/layout_check.cc, with messages that name the keys and what to change) and the
// planner (plan/layout_evaluator.cc, plan/search.cc, plan/replication_model.cc, with its terser
// words) both apply these, each in its own order and wording. Pure arithmetic, thread-safe.
#pragma once

#include <cstdint>
#include <vector>

#include "config/config.h"

namespace moe4d {

// A model quantity one parallel size must divide.
struct SplitRule {
  enum By { kTensor, kExpert } by;
  int64_t value;
  const char* key;       // as the runtime's messages name it: "moe.expert_ffn_hidden_size"
  const char* quantity;  // as the planner's messages name it: "expert_ffn_hidden_size"
};

// The rules that apply to `model`, tensor-parallel ones first: each TP rank holds whole query and
// KV heads, a slice of every FFN (dense, routed experts, the fused shared experts) and of the
// vocabulary; each EP rank holds whole experts.
std::vector<SplitRule> split_rules(const ModelConfig& model);

// The interleaved pipeline schedule with `pp` stages, `v` model chunks per rank and `micro_batch_num`
// micro-batches: which of its requirements fail (all false: it fits).
struct InterleavedFit {
  bool few_stages = false;           // pp < 2
  bool few_chunks = false;           // v < 2
  bool layers_uneven = false;        // num_layers % (pp x v) != 0: every chunk gets the same layers
  bool micro_batches_uneven = false; // micro_batch_num % pp != 0
  bool fits() const { return !few_stages && !few_chunks && !layers_uneven && !micro_batches_uneven; }
};
InterleavedFit interleaved_fit(int num_layers, int pp, int v, int micro_batch_num);

// moe.redundant_experts R over expert_parallel ep: replicas go to other EP ranks (ep >= 2), each EP
// rank holds R / ep replica slots, and no expert needs more copies than there are other EP ranks.
struct ReplicationFit {
  bool needs_two_ranks = false;  // R > 0 with ep < 2
  bool uneven = false;           // R % ep != 0
  bool too_many = false;         // R > num_experts x (ep - 1)
  int64_t most = 0;              // num_experts x (ep - 1)
};
ReplicationFit replication_fit(const ModelConfig& model, int ep, int redundant_experts);

}  // namespace moe4d
