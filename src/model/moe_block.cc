// model/moe_block.cc — the MoE layer's forward and backward: routing, the sliced EP exchange
// pipeline, per-expert SwiGLU GEMMs and the weighted combine (see the header for the layout).
#include "model/moe_block.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <utility>

#include "backend/backend.h"
#include "model/block_matmul.h"
#include "model/param_store.h"
#include "model/sequence_shard.h"

namespace moe4d {
namespace {
struct MoeSaved {
  float* rstd;         // [n] (n = T, or T / tp under sequence parallelism: this rank's shard)
  float* xn;           // [n, d]; the full [T, d] is gathered again in backward
  // The router runs on this rank's n rows (all T without a sequence shard):
  float* logits;       // [n, E] router logits (sigmoid scoring only: its z-loss gradient needs them)
  float* probs;        // [n, E] router scores (softmax probabilities or sigmoids)
  float* lse;          // [n]
  int* my_idx;         // [n, k] this rank's rows of topk_idx (topk_idx itself without a shard)
  float* my_w;         // [n, k]
  // The routing decisions of all T tokens, in sequence order (gathered over TP from the shards):
  int* topk_idx;       // [T, k]
  float* topk_w;       // [T, k]
  int* counts;         // [E] of all T tokens
  RouterBalance balance;  // what the load-balancing loss balances against (balance_statistics)
  int* row_slot;       // [T * k]
  int* slot_row;       // [T * k]
  float* xr;           // [R, d] rows at this rank's experts, grouped by local expert
  float* h1;           // [R, f_local]
  float* h3;           // [R, f_local]
  float* g;            // [R, f_local]; null under selective recompute
  float* y;            // [rows, d] expert outputs back at their source positions (TP partial sums)
  float* sh1;          // [T, fs_local] shared experts' xn W1 (null without shared experts)
  float* sh3;          // [T, fs_local]
  float* sg;           // [T, fs_local]; null under selective recompute
  ExpertExchangePlan plan;
  NodeRelayPlan* relay;  // moe.dispatcher hierarchical: stage 1 (the exchange then runs on its rows)
};
constexpr GemmLabels kRouterLabels{"moe input (ffn_norm output)", "router logits"};
constexpr GemmLabels kW1Labels{"expert input", "expert w1 projection"};
constexpr GemmLabels kW3Labels{"expert input", "expert w3 projection"};
constexpr GemmLabels kW2Labels{"expert swiglu output", "expert output"};
constexpr GemmLabels kSharedW1Labels{"moe input (ffn_norm output)", "shared expert w1 projection"};
constexpr GemmLabels kSharedW3Labels{"moe input (ffn_norm output)", "shared expert w3 projection"};
constexpr GemmLabels kSharedW2Labels{"shared expert swiglu output", "shared expert output"};

// Replicas need an EP group to spread over; with EP 1 (e.g. a single-rank evaluation of a run
// trained with replicas) the layer runs exactly as without them.
int redundant_slots(const ModelConfig& model, const ParallelContext& pc) {
  return pc.ep_size() > 1 ? model.moe.redundant_experts : 0;
}
}  // namespace

MoeBlock::MoeBlock(int layer, const ModelConfig& model, ParallelContext& pc, ParamStore& params)
    : layer_(layer),
      hidden_(model.hidden_size),
      local_ffn_(model.expert_ffn() / pc.tp_size()),
      local_shared_ffn_(model.shared_ffn() / pc.tp_size()),
      experts_(model.moe.num_experts),
      local_experts_(model.moe.num_experts / pc.ep_size()),
      local_slots_((model.moe.num_experts + redundant_slots(model, pc)) / pc.ep_size()),
      top_k_(model.moe.top_k),
      scoring_{.sigmoid = model.moe.score_function == RouterScore::kSigmoid,
               .normalize = model.moe.normalize_top_k,
               .groups = model.moe.num_groups,
               .group_topk = model.moe.group_topk,
               .scaling = static_cast<float>(model.moe.routed_scaling_factor)},
      balancing_(model.moe.load_balancing_type),
      capacity_factor_(model.moe.capacity_factor),
      aux_coeff_(static_cast<float>(model.moe.aux_loss_coeff)),
      z_coeff_(static_cast<float>(model.moe.z_loss_coeff)),
      exchange_(*pc.ep, model.moe.num_experts + redundant_slots(model, pc), pc.ep_size() > 1 ? model.moe.a2a_chunks : 1),
      router_bias_(model.moe.num_experts, 0.0f) {
  const int tp = pc.tp_size(), tp_rank = pc.coord.tp, ep = pc.ep_size(), ep_rank = pc.coord.ep;
  const int64_t d = model.hidden_size, f = model.expert_ffn(), e = model.moe.num_experts;
  const std::string prefix = fmt::format("layers.{}.", layer);
  const float out_std = 0.02f / std::sqrt(2.0f * model.num_layers);
  norm_id_ = params.add({.name = prefix + "ffn_norm.weight", .global_shape = {d}, .init = ParamInit::kOnes,
                         .weight_decay = false, .tp_replicated = true, .layer = layer});
  router_id_ = params.add({.name = prefix + "moe.router.weight", .global_shape = {d, e}, .tp_replicated = true,
                           .layer = layer});
  const ParamGroup expert = ParamGroup::kExpert;
  w1_id_ = params.add({.name = prefix + "moe.experts.w1", .global_shape = {e, d, f},
                       .shards = {{0, ep, ep_rank}, {2, tp, tp_rank}}, .group = expert, .layer = layer});
  w3_id_ = params.add({.name = prefix + "moe.experts.w3", .global_shape = {e, d, f},
                       .shards = {{0, ep, ep_rank}, {2, tp, tp_rank}}, .group = expert, .layer = layer});
  w2_id_ = params.add({.name = prefix + "moe.experts.w2", .global_shape = {e, f, d},
                       .shards = {{0, ep, ep_rank}, {1, tp, tp_rank}}, .group = expert, .init_std = out_std,
                       .layer = layer});
  if (const int64_t fs = model.shared_ffn(); fs > 0) {
    shared_w1_id_ = params.add({.name = prefix + "moe.shared.w1.weight", .global_shape = {d, fs},
                                .shards = {{1, tp, tp_rank}}, .layer = layer});
    shared_w3_id_ = params.add({.name = prefix + "moe.shared.w3.weight", .global_shape = {d, fs},
                                .shards = {{1, tp, tp_rank}}, .layer = layer});
    shared_w2_id_ = params.add({.name = prefix + "moe.shared.w2.weight", .global_shape = {fs, d},
                                .shards = {{0, tp, tp_rank}}, .init_std = out_std, .layer = layer});
  }
  if (const int R = redundant_slots(model, pc); R > 0)
    replicas_ = std::make_unique<ExpertReplicas>(
        *pc.ep, expert_placement_initial(int(e), ep, R),
        ReplicaWeights{.w1_id = w1_id_, .w3_id = w3_id_, .w2_id = w2_id_, .hidden = int(d), .local_ffn = local_ffn_},
        ep_rank_nodes(pc));
  if (model.moe.dispatcher == MoeDispatcher::kHierarchical && ep > 1)
    relays_ = std::make_unique<HierarchicalExchange>(*pc.ep, ep_rank_nodes(pc),
                                                     model.moe.num_experts + redundant_slots(model, pc));
}

BlockGemm MoeBlock::slot_gemm(int local_slot, int which, int first_expert) const {
  static constexpr const GemmLabels* kLabels[3] = {&kW1Labels, &kW3Labels, &kW2Labels};
  const int ids[3] = {w1_id_, w3_id_, w2_id_};
  if (!replicas_ || !replicas_->is_replica(local_slot))
    return {*kLabels[which], ids[which], local_slot, first_expert + local_slot};
  return {.labels = *kLabels[which], .weight_id = ids[which], .global_expert = replicas_->expert_of(local_slot),
          .weight = replicas_->weight(local_slot, which), .weight_grad = replicas_->grad(local_slot, which)};
}

void MoeBlock::shared_forward(const float* xn, float* h1, float* h3, float* g, float* x_out, int T,
                              BlockContext& ctx) const {
  const int d = hidden_, f = local_shared_ffn_;
  block_matmul_forward(ctx, {.labels = kSharedW1Labels, .weight_id = shared_w1_id_}, h1, xn, T, d, f);
  block_matmul_forward(ctx, {.labels = kSharedW3Labels, .weight_id = shared_w3_id_}, h3, xn, T, d, f);
  ctx.backend().swiglu_forward(g, h1, h3, int64_t(T) * f);
  float* y = ctx.scratch.alloc_f32(size_t(T) * d);
  block_matmul_forward(ctx, {.labels = kSharedW2Labels, .weight_id = shared_w2_id_}, y, g, T, f, d);
  ctx.backend().axpy(x_out, y, 1.0f, int64_t(T) * d);
}

void MoeBlock::shared_backward(const float* dout, const float* xn, const float* h1, const float* h3, const float* g,
                               float* dxn, int T, BlockContext& ctx) const {
  const int d = hidden_, f = local_shared_ffn_;
  if (!g) {  // selective recompute: rebuild the gated activation
    float* rebuilt = ctx.scratch.alloc_f32(size_t(T) * f);
    ctx.backend().swiglu_forward(rebuilt, h1, h3, int64_t(T) * f);
    g = rebuilt;
  }
  float* dg = ctx.scratch.alloc_f32(size_t(T) * f);
  block_matmul_backward(ctx, {.labels = kSharedW2Labels, .weight_id = shared_w2_id_}, dg, dout, g, T, f, d, false);
  float* dh1 = ctx.scratch.alloc_f32(size_t(T) * f);
  float* dh3 = ctx.scratch.alloc_f32(size_t(T) * f);
  ctx.backend().swiglu_backward(dh1, dh3, dg, h1, h3, int64_t(T) * f);
  // Weight gradients in reverse flat order (w2, w3, w1), as in the dense FFN (ffn_block.cc).
  block_matmul_backward(ctx, {.labels = kSharedW1Labels, .weight_id = shared_w1_id_}, dxn, dh1, nullptr, T, d, f, true);
  block_matmul_backward(ctx, {.labels = kSharedW3Labels, .weight_id = shared_w3_id_}, dxn, dh3, xn, T, d, f, true);
  block_matmul_weight_grad(ctx, {.labels = kSharedW1Labels, .weight_id = shared_w1_id_}, dh1, xn, T, d, f);
}

int MoeBlock::capacity(int tokens) const {
  if (!capacity_factor_) return -1;
  return static_cast<int>(std::ceil(double(tokens) * top_k_ / experts_ * *capacity_factor_));
}

void MoeBlock::experts_sweep(const ExchangeSlice& slice, int which, BlockContext& ctx,
                             const std::function<void(const BlockGemm&, size_t, int)>& gemm) const {
  const int d = hidden_, f = local_ffn_;
  const int first_expert = ctx.pc.coord.ep * local_experts_;
  for (int e = 0; e < local_slots_; ++e) {
    const int begin = slice.expert_begin[e], n = slice.expert_end[e] - begin;
    const BlockGemm w = slot_gemm(e, which, first_expert);
    if (n == 0)  // no rows here, but the weight's gathers are collective (block_matmul.h)
      block_matmul_values_touch(ctx, w, which == 2 ? f : d, which == 2 ? d : f);
    else
      gemm(w, size_t(begin), n);
  }
}

void MoeBlock::experts_forward(const ExchangeSlice& slice, const float* xr, float* h1, float* h3, float* g,
                               float* yr, BlockContext& ctx) const {
  const int d = hidden_, f = local_ffn_;
  // One sweep over the experts per weight (w1, w3, then w2), each the GEMMs an expert-by-expert loop
  // would run: under ZeRO-3 a weight's buckets are then read one after another in flat order, not
  // as three interleaved streams that a short prefetch window would gather again and again.
  experts_sweep(slice, 0, ctx, [&](const BlockGemm& w, size_t r, int n) {
    block_matmul_forward(ctx, w, h1 + r * f, xr + r * d, n, d, f);
  });
  experts_sweep(slice, 1, ctx, [&](const BlockGemm& w, size_t r, int n) {
    block_matmul_forward(ctx, w, h3 + r * f, xr + r * d, n, d, f);
  });
  experts_sweep(slice, 2, ctx, [&](const BlockGemm& w, size_t r, int n) {
    ctx.backend().swiglu_forward(g + r * f, h1 + r * f, h3 + r * f, int64_t(n) * f);
    block_matmul_forward(ctx, w, yr + r * d, g + r * f, n, f, d);
  });
}

void MoeBlock::experts_backward_inputs(const ExchangeSlice& slice, const float* dyr, const float* h1, const float* h3,
                                       float* dg, float* dh1, float* dh3, float* dxr, BlockContext& ctx) const {
  const int d = hidden_, f = local_ffn_;
  // Per weight, as in experts_forward; each expert's rows still get w1's input gradient, then w3's.
  experts_sweep(slice, 2, ctx, [&](const BlockGemm& w, size_t r, int n) {
    block_matmul_backward(ctx, w, dg + r * f, dyr + r * d, nullptr, n, f, d, false);
    ctx.backend().swiglu_backward(dh1 + r * f, dh3 + r * f, dg + r * f, h1 + r * f, h3 + r * f, int64_t(n) * f);
  });
  experts_sweep(slice, 0, ctx, [&](const BlockGemm& w, size_t r, int n) {
    block_matmul_backward(ctx, w, dxr + r * d, dh1 + r * f, nullptr, n, d, f, false);
  });
  experts_sweep(slice, 1, ctx, [&](const BlockGemm& w, size_t r, int n) {
    block_matmul_backward(ctx, w, dxr + r * d, dh3 + r * f, nullptr, n, d, f, true);
  });
}

void MoeBlock::experts_backward_weights(const ExpertExchangePlan& plan, const float* xr, const float* g,
                                        const float* dyr, const float* dh1, const float* dh3,
                                        BlockContext& ctx) const {
  const int d = hidden_, f = local_ffn_;
  const int first_expert = ctx.pc.coord.ep * local_experts_;
  // Replica slots first: their gradients belong to experts homed elsewhere and must be in the
  // home's gradient before the home reports it ready to ZeRO's bucket reduction (below), so they are
  // computed, sent home and added here, ahead of the home experts' weight GEMMs — once the homes'
  // gradients are about to be reduced (grads_final); until then they accumulate locally.
  if (replicas_) {
    for (int e = local_experts_; e < local_slots_; ++e) {
      const int begin = plan.expert_offsets[e], n = plan.expert_offsets[e + 1] - begin;
      if (n == 0) continue;
      const size_t rf = size_t(begin) * f, rd = size_t(begin) * d;
      block_matmul_weight_grad(ctx, slot_gemm(e, 2, first_expert), dyr + rd, g + rf, n, f, d);
      block_matmul_weight_grad(ctx, slot_gemm(e, 0, first_expert), dh1 + rf, xr + rd, n, d, f);
      block_matmul_weight_grad(ctx, slot_gemm(e, 1, first_expert), dh3 + rf, xr + rd, n, d, f);
    }
    if (ctx.grads_final) {
      replicas_->return_grads_begin();
      replicas_->return_grads_finish(ctx.params, ctx.backend());
    }
  }
  // Weight by weight in reverse flat order (w2, w3, w1; experts from the last down), so that ZeRO's
  // buckets of the expert group fill one after another (model/layer_hooks.h). An expert without
  // rows computes nothing but is still reported in the same blocks (block_matmul_weight_grad with
  // n = 0), so every rank reports the same ranges in the same order.
  const int ids[3] = {w2_id_, w3_id_, w1_id_};
  for (int w = 0; w < 3; ++w) {
    const int id = ids[w];
    for (int e = local_experts_ - 1; e >= 0; --e) {
      const int begin = plan.expert_offsets[e], n = plan.expert_offsets[e + 1] - begin;
      const size_t rf = size_t(begin) * f, rd = size_t(begin) * d;
      const int global = first_expert + e;
      if (id == w2_id_) {
        block_matmul_weight_grad(ctx, {kW2Labels, w2_id_, e, global}, dyr + rd, g + rf, n, f, d);
      } else {
        block_matmul_weight_grad(ctx, {id == w1_id_ ? kW1Labels : kW3Labels, id, e, global},
                                 id == w1_id_ ? dh1 + rf : dh3 + rf, xr + rd, n, d, f);
      }
    }
  }
}

RouterBalance MoeBlock::balance_statistics(const int* counts, const int* topk_idx, Arena& keep,
                                           BlockContext& ctx) const {
  const int T = ctx.tokens(), E = experts_, k = top_k_;
  if (ctx.context_parallel()) {  // the unsplit sequences' counts (model/context_parallel.h); exact below 2^24
    MOE4D_CHECK_MSG(balancing_ == LoadBalancing::kAuxLoss, "context parallelism with load balancing type {}",
                    static_cast<int>(balancing_));  // refused by the config's rules
    float* c = keep.alloc_f32(E);
    for (int e = 0; e < E; ++e) c[e] = float(counts[e]);
    ctx.pc.cp->all_reduce(c, size_t(E));
    return micro_batch_balance(c, double(T) * ctx.pc.cp_size());
  }
  if (balancing_ == LoadBalancing::kSeqAuxLoss) {
    // Per sequence: the counts of its own tokens (sequence b's rows are b*seq .. (b+1)*seq-1 of the
    // gathered decisions, and the run of b in every rank's rows), averaged over the sequences.
    float* c = keep.alloc_f32(size_t(ctx.batch) * E);
    std::fill_n(c, size_t(ctx.batch) * E, 0.0f);
    for (int64_t slot = 0; slot < int64_t(T) * k; ++slot) c[slot / (int64_t(ctx.seq) * k) * E + topk_idx[slot]] += 1.0f;
    return {.counts = c, .groups = ctx.batch, .tokens = double(ctx.seq), .weight = 1.0 / ctx.batch};
  }
  float* c = keep.alloc_f32(E);
  for (int e = 0; e < E; ++e) c[e] = float(counts[e]);
  // Global batch (training forwards only; evaluation records no statistics and runs no backward):
  // this micro-batch's counts summed over the data replicas, averaged with those of the step's
  // earlier micro-batches (Megatron-Core's global_aux_loss). Every replica then holds the same
  // statistics of N = replicas x T tokens, and its rows' share times `replicas` is the loss that
  // grad_scale = 1 / (replicas x micro-batches) weights as one micro-batch's.
  if (balancing_ != LoadBalancing::kGlobalAuxLoss || !ctx.moe_stats) return micro_batch_balance(c, T);
  const int replicas = ctx.pc.dp_ep->size();
  if (replicas > 1) ctx.pc.dp_ep->all_reduce(c, size_t(E));
  const int earlier = stats_slot(ctx).micro_batches;  // this step's micro-batches before this one
  if (earlier == 0) global_counts_.assign(size_t(E), 0.0);
  for (int e = 0; e < E; ++e) {
    global_counts_[size_t(e)] += c[e];
    c[e] = float(global_counts_[size_t(e)] / (earlier + 1));
  }
  return {.counts = c, .groups = 1, .tokens = double(T) * replicas, .weight = double(replicas)};
}

MoeLayerStats& MoeBlock::stats_slot(const BlockContext& ctx) const {
  auto slot = std::find_if(ctx.moe_stats->begin(), ctx.moe_stats->end(),
                           [&](const MoeLayerStats& candidate) { return candidate.layer == layer_; });
  MOE4D_CHECK_MSG(slot != ctx.moe_stats->end(), "no stats slot for MoE layer {}", layer_);
  return *slot;
}

void* MoeBlock::forward(const float* x_in, float* x_out, BlockContext& ctx) const {
  const int T = ctx.tokens(), n = ctx.shard_tokens(), d = hidden_, f = local_ffn_, E = experts_, k = top_k_;
  const bool sharded = ctx.sequence_sharded();
  Arena& keep = ctx.recompute == RecomputeGranularity::kFull ? ctx.scratch : ctx.saved;
  auto* s = keep.alloc<MoeSaved>(1);
  s->rstd = keep.alloc_f32(n);
  s->xn = keep.alloc_f32(size_t(n) * d);
  s->probs = keep.alloc_f32(size_t(n) * E);
  s->lse = keep.alloc_f32(n);
  s->topk_idx = keep.alloc_i32(size_t(T) * k);
  s->topk_w = keep.alloc_f32(size_t(T) * k);
  s->my_idx = sharded ? keep.alloc_i32(size_t(n) * k) : s->topk_idx;
  s->my_w = sharded ? keep.alloc_f32(size_t(n) * k) : s->topk_w;
  s->counts = keep.alloc_i32(E);
  s->row_slot = keep.alloc_i32(size_t(T) * k);
  s->slot_row = keep.alloc_i32(size_t(T) * k);
  s->logits = nullptr;
  s->sh1 = s->sh3 = s->sg = nullptr;

  // The MoE input is gathered like a column-parallel GEMM's, since the TP-sharded experts need all
  // their tokens. Under sequence parallelism each TP rank routes its own n = T / tp tokens (as
  // Megatron-Core does), then the decisions of all T tokens are gathered in sequence order; everything
  // after them (counts, capacity, dispatch) sees the TP run's decisions.
  const float* xn = sp_norm_forward(ctx, s->xn, s->rstd, x_in, norm_id_, d);
  float* logits = scoring_.sigmoid ? (s->logits = keep.alloc_f32(size_t(n) * E)) : ctx.scratch.alloc_f32(size_t(n) * E);
  // The router stays fp32 whatever the training precision (docs/model.md §1).
  block_matmul_forward(ctx, {.labels = kRouterLabels, .weight_id = router_id_, .keep_fp32 = true}, logits, s->xn, n,
                       d, E);
  const bool use_bias = std::any_of(router_bias_.begin(), router_bias_.end(), [](float b) { return b != 0.0f; });
  ctx.backend().router_forward(s->probs, s->lse, s->my_idx, s->my_w, logits, use_bias ? router_bias_.data() : nullptr,
                               n, E, k, scoring_);
  if (sharded) {
    sp_all_gather_rows(ctx, s->my_idx, s->topk_idx, k, DType::kI32);
    sp_all_gather(ctx, s->my_w, s->topk_w, k);
  }
  ctx.backend().router_expert_counts(s->counts, s->topk_idx, T, E, k);
  ctx.backend().synchronize();  // the host reads the routing decisions
  s->balance = balance_statistics(s->counts, s->topk_idx, keep, ctx);
  // Replica weights (once per step) travel while the rows are planned and dispatched, unless the
  // trainer's prefetch already started them (waited for before the GEMMs). When this call starts the
  // fetch it copies the home weights, which ZeRO-3 gathers for it (model/layer_hooks.h).
  if (replicas_ && replicas_->fetch_needed()) {
    const ValueUse w1(ctx, w1_id_), w3(ctx, w3_id_), w2(ctx, w2_id_);
    replicas_->prefetch(ctx.params, ctx.backend());
  }

  int* expert_offsets = ctx.scratch.alloc_i32(E + 1);
  int* plan_scratch = ctx.scratch.alloc_i32(size_t(T) * k);
  const int rows = ctx.backend().moe_route_plan(expert_offsets, s->row_slot, s->slot_row, plan_scratch, s->topk_idx,
                                                s->topk_w, T, E, k, capacity(T));
  if (replicas_) {  // rows of each logical expert split over its copies: the token layout by physical slot
    const int S = replicas_->placement().slots();
    int* slot_offsets = ctx.scratch.alloc_i32(S + 1);
    replicas_->split_rows(expert_offsets, s->row_slot, s->slot_row, T * k, slot_offsets, ctx.scratch);
    expert_offsets = slot_offsets;
  }
  // The rows the exchange starts from: this rank's tokens, or under the node-aware dispatch the
  // (token, node) rows relayed to this rank.
  RowRouting route{.tokens = T, .k = k, .rows = rows, .row_slot = s->row_slot, .slot_row = s->slot_row,
                   .weights = s->topk_w, .slot_offsets = expert_offsets};
  const float* x_rows = xn;
  s->relay = nullptr;
  if (relays_) {
    ctx.backend().synchronize();  // the host reads the routing
    s->relay = keep.alloc<NodeRelayPlan>(1);
    *s->relay = relays_->plan(route, keep, ctx.backend());
    route = s->relay->relay;
    float* relayed = ctx.scratch.alloc_f32(size_t(route.tokens) * d);
    relays_->scatter(xn, relayed, d, *s->relay, ctx.scratch, ctx.backend());
    x_rows = relayed;
  }
  s->plan = exchange_.plan(route.slot_offsets, keep);
  const ExpertExchangePlan& plan = s->plan;
  const int R = plan.recv_rows;
  const bool expert_parallel = plan.ep > 1;

  // Token rows grouped by expert, then moved to the ranks holding those experts.
  s->xr = keep.alloc_f32(size_t(R) * d);
  float* xp = expert_parallel ? ctx.scratch.alloc_f32(size_t(route.rows) * d) : s->xr;
  ctx.backend().moe_permute_forward(xp, x_rows, route.row_slot, route.rows, k, d);

  s->h1 = keep.alloc_f32(size_t(R) * f);
  s->h3 = keep.alloc_f32(size_t(R) * f);
  s->g = ctx.recompute == RecomputeGranularity::kSelective ? nullptr : keep.alloc_f32(size_t(R) * f);
  float* g = s->g ? s->g : ctx.scratch.alloc_f32(size_t(R) * f);
  s->y = keep.alloc_f32(size_t(route.rows) * d);
  float* yr = expert_parallel ? ctx.scratch.alloc_f32(size_t(R) * d) : s->y;

  // Slice pipeline: every dispatch slice starts at once and the experts run on slice c as soon as it
  // is in, while later slices still arrive; each slice's outputs travel back while later slices
  // compute, and all are waited for at the end. Starting or waiting slice by slice would add a
  // rendezvous with the slowest rank of the EP group per slice (measured: more exposed time).
  ExchangeTransferQueue arriving(plan.chunks, ctx.scratch), returning(plan.chunks, ctx.scratch);
  for (int c = 0; expert_parallel && c < plan.chunks; ++c)
    arriving.push(exchange_.dispatch_begin(c, xp, s->xr, d, plan, ctx.scratch, ctx.backend()));
  if (replicas_) replicas_->weights_ready(ctx.params, ctx.backend());
  for (int c = 0; c < plan.chunks; ++c) {
    if (expert_parallel) arriving.finish(c);
    experts_forward(plan.slices[c], s->xr, s->h1, s->h3, g, yr, ctx);
    if (expert_parallel) returning.push(exchange_.combine_begin(c, yr, s->y, d, plan, ctx.scratch, ctx.backend()));
  }
  returning.finish_all();
  float* partial = sharded ? ctx.scratch.alloc_f32(size_t(T) * d) : x_out;
  float* sums = s->relay ? ctx.scratch.alloc_f32(size_t(route.tokens) * d) : partial;
  ctx.backend().moe_unpermute_forward(sums, s->y, route.slot_row, route.weights, route.tokens, k, d);
  if (s->relay) relays_->gather_sum(sums, partial, d, *s->relay, ctx.scratch, ctx.backend());
  if (local_shared_ffn_ > 0) {
    const size_t size = size_t(T) * local_shared_ffn_;
    s->sh1 = keep.alloc_f32(size);
    s->sh3 = keep.alloc_f32(size);
    s->sg = ctx.recompute == RecomputeGranularity::kSelective ? nullptr : keep.alloc_f32(size);
    shared_forward(xn, s->sh1, s->sh3, s->sg ? s->sg : ctx.scratch.alloc_f32(size), partial, T, ctx);
  }
  // One TP all-reduce (reduce-scatter along the sequence under sequence parallelism) for the routed
  // and the shared experts' partial sums.
  if (sharded)
    sp_reduce_scatter(ctx, partial, x_out, d);
  else if (ctx.pc.tp_size() > 1)
    ctx.pc.tp->all_reduce(x_out, size_t(T) * d);
  ctx.backend().axpy(x_out, x_in, 1.0f, int64_t(n) * d);

  if (ctx.moe_stats) {
    MoeLayerStats* st = &stats_slot(ctx);
    for (int e = 0; e < E; ++e) st->tokens_per_expert[e] += s->counts[e];
    st->routed_slots += double(T) * k;
    st->dropped_slots += double(T) * k - rows;
    // This rank's rows' shares of the losses (all of them without a shard), summed over TP and CP
    // so that every rank records the unsplit TP run's values.
    double losses[2] = {ctx.backend().router_aux_loss(s->probs, s->balance, n, E, k, scoring_),
                        ctx.backend().router_z_loss(s->lse, n, T * ctx.pc.cp_size())};
    if (sharded) ctx.pc.tp->all_reduce(losses, 2, DType::kF64);
    if (ctx.context_parallel()) ctx.pc.cp->all_reduce(losses, 2, DType::kF64);
    st->aux_loss += losses[0];
    st->z_loss += losses[1];
    st->micro_batches += 1;
    if (replicas_) {
      if (ctx.pc.coord.ep == 0) {  // every EP rank knows the whole count matrix: one records it
        std::vector<double> with, without;
        replicas_->rank_rows(plan.counts, with, without);
        st->rank_rows.resize(with.size(), 0.0);
        st->rank_rows_without.resize(without.size(), 0.0);
        for (size_t r = 0; r < with.size(); ++r) st->rank_rows[r] += with[r], st->rank_rows_without[r] += without[r];
        const auto [cross, cross_without] = replicas_->cross_node_rows(plan.counts);
        st->cross_node_rows += cross, st->cross_node_rows_without += cross_without;
      }
    }
  }
  return s;
}

void MoeBlock::backward(float* dx, const float* x_in, const void* saved, BlockContext& ctx) const {
  const auto* s = static_cast<const MoeSaved*>(saved);
  const ExpertExchangePlan& plan = s->plan;
  const int T = ctx.tokens(), n = ctx.shard_tokens(), d = hidden_, f = local_ffn_, E = experts_, k = top_k_;
  const int rows = plan.send_rows, R = plan.recv_rows;
  const bool expert_parallel = plan.ep > 1;
  const bool sharded = ctx.sequence_sharded();
  // Under sequence parallelism: the output gradient (the backward of the reduce-scatter) and the
  // MoE input are gathered over TP.
  const auto [dout, xn] = sp_gather_backward_inputs(ctx, dx, s->xn, d);

  // Combine backward: gradients of the expert outputs and of the router weights.
  // Under the node-aware dispatch the output gradient goes to the relays, which form the picks'
  // gradients; the weight gradients come back (one row per (token, node)).
  const RowRouting route = s->relay ? s->relay->relay
                                    : RowRouting{.tokens = T, .k = k, .rows = rows, .row_slot = s->row_slot,
                                                 .slot_row = s->slot_row, .weights = s->topk_w};
  float* dy = ctx.scratch.alloc_f32(size_t(rows) * d);
  float* dtopk_w = ctx.scratch.alloc_f32(size_t(T) * k);
  const float* dout_rows = dout;
  float* dw_rows = dtopk_w;
  if (s->relay) {
    float* relayed = ctx.scratch.alloc_f32(size_t(route.tokens) * d);
    relays_->scatter(dout, relayed, d, *s->relay, ctx.scratch, ctx.backend());
    dout_rows = relayed;
    dw_rows = ctx.scratch.alloc_f32(size_t(route.tokens) * k);
  }
  ctx.backend().moe_unpermute_backward(dy, dw_rows, dout_rows, s->y, route.slot_row, route.weights, route.tokens, k,
                                       d);
  if (s->relay) relays_->gather_sum(dw_rows, dtopk_w, k, *s->relay, ctx.scratch, ctx.backend());
  // y holds TP partial sums, so each rank's dot products are partial too. Summed over TP, and under
  // sequence parallelism only this rank's routed rows are kept (the backward of the gather).
  float* my_dtopk_w = dtopk_w;
  if (sharded) {
    my_dtopk_w = ctx.scratch.alloc_f32(size_t(n) * k);
    sp_reduce_scatter(ctx, dtopk_w, my_dtopk_w, k);
  } else if (ctx.pc.tp_size() > 1) {
    ctx.pc.tp->all_reduce(dtopk_w, size_t(T) * k);
  }

  float* dyr = expert_parallel ? ctx.scratch.alloc_f32(size_t(R) * d) : dy;
  float* dxr = ctx.scratch.alloc_f32(size_t(R) * d);
  float* dxp = expert_parallel ? ctx.scratch.alloc_f32(size_t(rows) * d) : dxr;
  float* dg = ctx.scratch.alloc_f32(size_t(R) * f);
  float* dh1 = ctx.scratch.alloc_f32(size_t(R) * f);
  float* dh3 = ctx.scratch.alloc_f32(size_t(R) * f);

  // The forward's slice pipeline, carrying output gradients in and input gradients out.
  ExchangeTransferQueue arriving(plan.chunks, ctx.scratch), returning(plan.chunks, ctx.scratch);
  for (int c = 0; expert_parallel && c < plan.chunks; ++c)
    arriving.push(exchange_.dispatch_begin(c, dy, dyr, d, plan, ctx.scratch, ctx.backend()));
  for (int c = 0; c < plan.chunks; ++c) {
    if (expert_parallel) arriving.finish(c);
    experts_backward_inputs(plan.slices[c], dyr, s->h1, s->h3, dg, dh1, dh3, dxr, ctx);
    if (expert_parallel) returning.push(exchange_.combine_begin(c, dxr, dxp, d, plan, ctx.scratch, ctx.backend()));
  }
  // Weight gradients over each expert's full row block (the same GEMMs whatever the slicing) while
  // the input gradients travel back.
  const float* g = s->g;
  if (!g) {
    float* rebuilt = ctx.scratch.alloc_f32(size_t(R) * f);
    ctx.backend().swiglu_forward(rebuilt, s->h1, s->h3, int64_t(R) * f);
    g = rebuilt;
  }
  experts_backward_weights(plan, s->xr, g, dyr, dh1, dh3, ctx);
  returning.finish_all();

  float* dxn = ctx.scratch.alloc_f32(size_t(T) * d);
  float* dx_rows = s->relay ? ctx.scratch.alloc_f32(size_t(route.tokens) * d) : dxn;
  ctx.backend().zero(dx_rows, sizeof(float) * size_t(route.tokens) * d);
  ctx.backend().moe_permute_backward(dx_rows, dxp, route.row_slot, rows, k, d);
  if (s->relay) relays_->gather_sum(dx_rows, dxn, d, *s->relay, ctx.scratch, ctx.backend());
  if (local_shared_ffn_ > 0) shared_backward(dout, xn, s->sh1, s->sh3, s->sg, dxn, T, ctx);
  // The expert paths' input gradient is a TP partial sum; the router's (below) is not.
  float* dxn_mine = sp_reduce_input_gradient(ctx, dxn, d);

  // The router's backward on the rows it routed: with the counts and token count of all T tokens,
  // a shard's dlogits are the whole micro-batch's loss gradient on its rows (kernels/router.h).
  // Under context parallelism the micro-batch is the CP group's: its losses weigh cp times a rank's
  // share of the step objective (grad_scale counts each CP rank as a data replica).
  float* dlogits = ctx.scratch.alloc_f32(size_t(n) * E);
  // Under CP the losses are the whole sequences' (T x cp tokens): this rank's rows carry their share,
  // which the 1 / (data replicas x micro-batches) of grad_scale would count cp times too little.
  const int cp = ctx.pc.cp_size();
  ctx.backend().router_backward(dlogits, my_dtopk_w, s->probs, s->lse, s->my_idx, s->my_w, s->balance, n, E, k,
                                aux_coeff_ * ctx.grad_scale * cp, z_coeff_ * ctx.grad_scale * cp, scoring_, s->logits,
                                T * cp);
  if (sharded) {
    // Its input gradient is complete on this rank's rows; its weight gradient covers only this
    // rank's tokens, so it is summed over TP like the norm weights' (model/sequence_shard.h).
    const size_t numel = size_t(d) * E;
    float* dw = ctx.scratch.alloc_f32(numel);
    ctx.backend().zero(dw, sizeof(float) * numel);
    const BlockGemm router{.labels = kRouterLabels, .weight_id = router_id_, .keep_fp32 = true, .weight_grad = dw};
    block_matmul_backward(ctx, router, dxn_mine, dlogits, s->xn, n, d, E, true);
    sp_add_shard_weight_grad(ctx, router_id_, dw);
    grad_ready(ctx, router_id_);
  } else {
    const BlockGemm router{.labels = kRouterLabels, .weight_id = router_id_, .keep_fp32 = true};
    block_matmul_backward(ctx, router, dxn, dlogits, xn, T, d, E, true);
  }
  sp_norm_backward(ctx, dx, norm_id_, dxn_mine, x_in, s->rstd, d);
  grad_ready(ctx, norm_id_);
}

}  // namespace moe4d
