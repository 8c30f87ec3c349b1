// model/moe_block.h — x + MoE(RMSNorm(x)): softmax router with top-k, experts spread over the EP
// group (all-to-all dispatch and combine), each expert a SwiGLU FFN sharded over the TP group.
//
// Parallel layout (design.md §3): the router is a dense parameter (replicated over DP x EP and TP);
// expert e lives on EP rank e / (E / ep); inside the TP group each expert's W1/W3 are column- and W2
// row-parallel, exactly like the dense FFN. We chose TP-sharded experts over "experts replicated
// over TP with token slicing" because it keeps one code path for dense and expert FFNs, divides
// expert memory by TP, and needs no extra collective: the TP all-reduce after the combine is the one
// the dense FFN already does. Its cost is that every TP rank runs the router and the all-to-all on
// the same tokens.
//
// Capacity (capacity_factor set) is applied per source rank before dispatch, as in GShard: each
// data replica keeps at most ceil(T * k / E * cf) of its own T tokens' slots per expert.
#pragma once

#include <vector>

#include "model/block_context.h"
#include "model/expert_exchange.h"

namespace moe4d {

class MoeBlock {
 public:
  // Registers layers.<layer>.ffn_norm.weight, .moe.router.weight [d, E] and
  // .moe.experts.{w1,w3} [E, d, f], .moe.experts.w2 [E, f, d].
  MoeBlock(int layer, const ModelConfig& model, ParallelContext& pc, ParamStore& params);

  // Same contract as AttentionBlock::forward / backward. Records routing statistics into
  // ctx.moe_stats (if set) and adds the aux / z-loss values of this micro-batch to *aux_loss / *z_loss.
  void* forward(const float* x_in, float* x_out, BlockContext& ctx) const;
  void backward(float* dx, const float* x_in, const void* saved, BlockContext& ctx) const;

  int layer() const { return layer_; }
  // Aux-loss-free balancing (DeepSeek-V3): the selection bias of each expert.
  std::vector<float>& router_bias() { return router_bias_; }
  const std::vector<float>& router_bias() const { return router_bias_; }

 private:
  int capacity(int tokens) const;
  void experts_forward(const float* xr, float* h1, float* h3, float* g, float* yr, const ExpertExchangePlan& plan,
                       BlockContext& ctx) const;

  int layer_;
  int hidden_, local_ffn_, experts_, local_experts_, top_k_;
  std::optional<double> capacity_factor_;
  float aux_coeff_, z_coeff_;
  int norm_id_, router_id_, w1_id_, w3_id_, w2_id_;
  ExpertExchange exchange_;
  std::vector<float> router_bias_;
};

}  // namespace moe4d
