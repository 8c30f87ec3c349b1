// model/moe_block.h — x + MoE(RMSNorm(x)): router (softmax or sigmoid scores) with top-k, routed
// experts spread over the EP group (all-to-all dispatch and combine), each expert a SwiGLU FFN of
// width moe.expert_ffn_hidden_size sharded over the TP group, plus optional always-on shared experts.
//
// Shared experts (moe.shared_experts = N of width fs): every token goes through them and their output
// is added to the routed combine. N SwiGLU experts summed equal one SwiGLU of width N * fs (the
// hidden units are independent), so they are one fused FFN, layers.<l>.moe.shared.{w1,w3}.weight
// [d, N*fs] and .w2.weight [N*fs, d] (expert i is hidden columns i*fs .. (i+1)*fs-1), as DeepSeek-MoE and HF's
// DeepSeek-V2/V3 fuse them. They are dense parameters: TP-sharded like the dense FFN (column /
// row-parallel), replicated over EP, gradients reduced over DP x EP. Their TP partial output shares
// the routed path's TP all-reduce (and their input gradient the expert path's), so they add no
// collective.
//
// Parallel layout (docs/model.md §2): the router is a dense parameter (replicated over DP x EP and TP);
// expert e lives on EP rank e / (E / ep); inside the TP group each expert's W1/W3 are column- and W2
// row-parallel, exactly like the dense FFN. We chose TP-sharded experts over "experts replicated
// over TP with token slicing" because it keeps one code path for dense and expert FFNs, divides
// expert memory by TP, and needs no extra collective: the TP all-reduce after the combine is the one
// the dense FFN already does. Its cost is that every TP rank runs the all-to-all on the same tokens
// (and, without sequence parallelism, the router too).
//
// Sequence parallelism (model/sequence_shard.h): each TP rank routes only its own T / tp tokens and
// the routing decisions (top-k experts and weights, T * k each) are all-gathered over TP in sequence
// order, so counts, capacity drops and dispatch are the TP run's; the aux / z-loss shares of the
// shards sum over TP to the TP run's losses, and the router weight gradient, computed from the
// shard, is summed over TP like the norm weights'.
//
// Balance statistics (moe.load_balancing_type, docs/moe.md §4): the aux loss balances each
// micro-batch's counts, each sequence's (a run of rows per sequence on every rank, also under
// sequence parallelism), or the global batch's: the counts summed over the DP x EP replicas in the
// forward (one E-float all-reduce per MoE layer and micro-batch) and averaged over the step's
// micro-batches so far, each replica's share weighted by the replica count.
//
// Capacity (capacity_factor set) is applied per source rank before dispatch, as in GShard: each
// data replica keeps at most ceil(T * k / E * cf) of its own T tokens' slots per expert.
//
// Overlap (moe.a2a_chunks = C > 1 with EP > 1): the exchange is cut into C slices
// (model/expert_exchange.h). Forward: all dispatch slices start at once; the experts run on slice c
// as soon as it is in (later slices still arriving), and slice c's outputs travel back while later
// slices compute (all combines are waited for at the end).
// Backward: the same pipeline carries the output gradients in and the input gradients out, computing
// only the row-wise (input-gradient) GEMMs per slice; the weight-gradient GEMMs run once per expert
// over all its rows after the loop, hiding the return trip (with C = 1 too). Exposed all-to-all time
// is then about the first dispatch slice and the last combine slice. C changes no expert's rows or
// their order; results agree with C = 1 to float rounding (docs/moe.md). With EP = 1 nothing moves
// and C has no effect.
//
// Replication (moe.redundant_experts = R > 0, docs/expert_replication.md): each EP rank runs
// (E + R) / ep expert slots, its E / ep home experts and R / ep replicas of hot experts on other
// ranks (model/expert_replicas.h). The exchange then addresses physical slots instead of experts;
// routing, capacity (per logical expert, before the rows are split over copies), the aux loss and
// every parameter are unchanged, so results agree with R = 0 to float rounding.
//
// Node-aware dispatch (moe.dispatcher: hierarchical, model/hierarchical_exchange.h): a token goes
// once to each destination node's relay, which runs the exchange above inside its node over the rows
// it received as its own tokens, and forms the weighted sums of the picks on its node; the partial
// sums (backward: the input and weight gradients) come back one row per (token, node).
//
// An expert that receives no rows (on any rank) skips its GEMMs; every rank still takes part in every
// collective, so empty experts neither hang nor break backward.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "kernels/router.h"
#include "model/block_context.h"
#include "model/block_matmul.h"
#include "model/expert_exchange.h"
#include "model/expert_replicas.h"
#include "model/hierarchical_exchange.h"

namespace moe4d {

class MoeBlock {
 public:
  // Registers layers.<layer>.ffn_norm.weight, .moe.router.weight [d, E] and
  // .moe.experts.{w1,w3} [E, d, f], .moe.experts.w2 [E, f, d] (f = expert width), and with shared
  // experts .moe.shared.{w1,w3}.weight [d, fs_total], .moe.shared.w2.weight [fs_total, d].
  MoeBlock(int layer, const ModelConfig& model, ParallelContext& pc, ParamStore& params);

  // Same contract as AttentionBlock::forward / backward. Forward records this micro-batch's routing
  // statistics and its aux / z-loss values (unscaled) into this layer's slot of ctx.moe_stats, if
  // set (evaluation passes none); the losses' gradients enter backward through the router, scaled
  // by moe.aux_loss_coeff / z_loss_coeff and ctx.grad_scale.
  void* forward(const float* x_in, float* x_out, BlockContext& ctx) const;
  void backward(float* dx, const float* x_in, const void* saved, BlockContext& ctx) const;

  int layer() const { return layer_; }
  // Aux-loss-free balancing (DeepSeek-V3): the selection bias of each expert.
  std::vector<float>& router_bias() { return router_bias_; }
  const std::vector<float>& router_bias() const { return router_bias_; }
  // Replica placement (null without redundant experts). set_placement: between steps, the same
  // placement on every rank of the EP group.
  const ExpertPlacement* placement() const { return replicas_ ? &replicas_->placement() : nullptr; }
  void set_placement(ExpertPlacement placement) { replicas_->set_placement(std::move(placement)); }
  ExpertReplicas* replicas() { return replicas_.get(); }  // null without redundant experts

 private:
  int capacity(int tokens) const;
  // The statistics the load-balancing loss of this micro-batch balances against (moe.load_balancing_type),
  // in `keep`; counts / topk_idx of all T tokens. Global: reduces the counts over the data replicas.
  RouterBalance balance_statistics(const int* counts, const int* topk_idx, Arena& keep, BlockContext& ctx) const;
  MoeLayerStats& stats_slot(const BlockContext& ctx) const;  // this layer's slot of ctx.moe_stats
  // The GEMM of weight `which` (0 w1, 1 w3, 2 w2) of this rank's local slot: a home expert's slice of
  // the parameter, or a replica slot's own buffers.
  BlockGemm slot_gemm(int local_slot, int which, int first_expert) const;
  // Runs gemm(weight, first row, rows) for every local expert slot with rows in `slice`, for weight
  // `which` (0 w1, 1 w3, 2 w2); a slot without rows only takes part in the weight's value reads.
  void experts_sweep(const ExchangeSlice& slice, int which, BlockContext& ctx,
                     const std::function<void(const BlockGemm&, size_t, int)>& gemm) const;
  // The experts on one slice's rows of the expert layout ([R, d] / [R, f_local] buffers).
  void experts_forward(const ExchangeSlice& slice, const float* xr, float* h1, float* h3, float* g, float* yr,
                       BlockContext& ctx) const;
  // Row-wise part of the experts' backward on one slice: dg, dh1, dh3 and the input gradient dxr.
  void experts_backward_inputs(const ExchangeSlice& slice, const float* dyr, const float* h1, const float* h3,
                               float* dg, float* dh1, float* dh3, float* dxr, BlockContext& ctx) const;
  // Weight gradients of every local expert over all its rows.
  void experts_backward_weights(const ExpertExchangePlan& plan, const float* xr, const float* g, const float* dyr,
                                const float* dh1, const float* dh3, BlockContext& ctx) const;

  // The fused shared experts on all T tokens: x_out = xn W2s(silu(xn W1s) * (xn W3s)) (TP partial sum).
  void shared_forward(const float* xn, float* h1, float* h3, float* g, float* x_out, int T, BlockContext& ctx) const;
  // Adds the shared experts' input gradient (TP partial) to dxn; accumulates their weight gradients.
  void shared_backward(const float* dout, const float* xn, const float* h1, const float* h3, const float* g,
                       float* dxn, int T, BlockContext& ctx) const;

  int layer_;
  int hidden_, local_ffn_, local_shared_ffn_, experts_, local_experts_, local_slots_, top_k_;
  RouterScoring scoring_;
  LoadBalancing balancing_;
  std::optional<double> capacity_factor_;
  float aux_coeff_, z_coeff_;
  int norm_id_, router_id_, w1_id_, w3_id_, w2_id_;
  int shared_w1_id_ = -1, shared_w3_id_ = -1, shared_w2_id_ = -1;
  ExpertExchange exchange_;
  std::unique_ptr<HierarchicalExchange> relays_;  // null: the flat exchange (moe.dispatcher: alltoall)
  std::vector<float> router_bias_;
  std::unique_ptr<ExpertReplicas> replicas_;  // null: no redundant experts
  // Global-batch balancing: the step's counts so far, summed over the replicas (reset by the first
  // micro-batch of a step, told by its empty statistics slot).
  mutable std::vector<double> global_counts_;
};

}  // namespace moe4d
