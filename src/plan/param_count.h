// plan/param_count.h — parameter counts of the reference model (docs/model.md §1), whole and per device.
//
// Dense parameters (attention, norms, dense FFNs, shared experts, routers, embedding, head) are
// replicated over the dp * ep data replicas; routed expert parameters over dp only. Within a pipeline
// stage TP shards W_qkv, W_o, W1/W2/W3 (dense, shared and routed experts), the embedding and the
// head; norms and routers are replicated over TP. W_qkv is [d, (h + 2 kvh) head_dim] (grouped-query
// attention); routed experts have width expert_ffn(), the fused shared experts shared_ffn(). Counts are doubles (1T-parameter models overflow nothing and the planner works in
// doubles throughout). Pure functions.
#pragma once

#include <cstdint>

#include "config/config.h"
#include "plan/layout.h"

namespace moe4d {

struct ModelParamCount {
  double attention = 0;       // sum over layers of W_qkv + W_o (d (h + 2 kvh) hd + d^2 each; 4 d^2 for MHA)
  double norms = 0;           // 2 d per layer + the final norm
  double dense_ffn = 0;       // 3 d f per dense layer
  double shared_experts = 0;  // 3 d fs per MoE layer (fs = shared_experts x their width)
  double routers = 0;         // d E per MoE layer
  double experts = 0;         // E * 3 d fe per MoE layer (fe = expert_ffn_hidden_size)
  double embedding = 0;       // V d
  double head = 0;            // V d, 0 when tied
  double dense() const { return attention + norms + dense_ffn + shared_experts + routers + embedding + head; }
  double total() const { return dense() + experts; }
  // Parameters one token passes through: routed experts count top_k of E, shared experts all.
  double active = 0;
};

ModelParamCount count_model_params(const ModelConfig& model);

// MoE layers among layers [first, last), in O(1) (ModelConfig::is_moe_layer counted in closed form,
// so that a config with billions of layers is planned as fast as one with 64).
int64_t moe_layers_in(const ModelConfig& model, int64_t first, int64_t last);

// What one device of pipeline stage `stage` holds (per-device counts: already divided by TP / EP).
struct StageParams {
  double dense = 0;          // replicated over the dp * ep data replicas
  double experts = 0;        // replicated over dp
  double largest_layer = 0;  // dense + expert parameters of the biggest transformer layer on the stage
  int layers = 0;
  int moe_layers = 0;
  bool has_embedding = false;  // stage 0
  bool has_head = false;       // stage pp-1 (also a tied copy of the embedding when pp > 1)
};

// Layer l belongs to virtual stage l / (L / (pp * v)); virtual stage c * pp + s runs on stage s.
// Requires num_layers % (pp * v) == 0 (checked by the evaluator before calling).
StageParams stage_params(const ModelConfig& model, const Layout& layout, int stage);

}  // namespace moe4d
