#include "model/attention_block.h"

#include <fmt/format.h>

#include "backend/backend.h"
#include "model/block_matmul.h"
#include "model/context_parallel.h"
#include "model/param_store.h"
#include "model/sequence_shard.h"

namespace moe4d {
namespace {
struct AttentionSaved {
  float* rstd;   // [T]
  float* xn;     // [T, d]
  float* qkv;    // [B x full_seq, local_kv_heads, g + 2, head_dim] after RoPE (all CP ranks' rows)
  float* probs;  // [B, local_heads, full_seq, full_seq]; null under selective recompute
  float* attn;   // [T, local_d]
  const void* qk_norm;  // QkNorm's saved state (null without model.qk_layernorm)
};
constexpr GemmLabels kQkvLabels{"attention input (attn_norm output)", "attention q/k/v projection"};
constexpr GemmLabels kOutLabels{"attention core output", "attention output"};
}  // namespace

AttentionBlock::AttentionBlock(int layer, const ModelConfig& model, const ParallelContext& pc, ParamStore& params)
    : local_heads_(model.num_heads / pc.tp_size()),
      local_kv_heads_(model.kv_heads() / pc.tp_size()),
      head_dim_(model.head_dim()),
      hidden_(model.hidden_size) {
  const int tp = pc.tp_size(), tp_rank = pc.coord.tp;
  const int64_t d = model.hidden_size;
  const std::string prefix = fmt::format("layers.{}.", layer);
  ParamInfo norm{.name = prefix + "attn_norm.weight", .global_shape = {d}, .init = ParamInit::kOnes,
                 .weight_decay = false, .tp_replicated = true, .layer = layer};
  ParamInfo qkv{.name = prefix + "attn.qkv.weight", .global_shape = {d, model.qkv_width()}, .shards = {{1, tp, tp_rank}},
                .layer = layer};
  ParamInfo out{.name = prefix + "attn.out.weight", .global_shape = {model.attn_width(), d}, .shards = {{0, tp, tp_rank}},
                .init_std = 0.02f / std::sqrt(2.0f * model.num_layers), .layer = layer};
  norm_id_ = params.add(norm);
  qkv_id_ = params.add(qkv);
  out_id_ = params.add(out);
  qk_norm_ = QkNorm(layer, model, params);
}

void* AttentionBlock::forward(const float* x_in, float* x_out, BlockContext& ctx) const {
  const int T = ctx.tokens(), n = ctx.shard_tokens(), d = hidden_, ld = local_heads_ * head_dim_;
  const int lqkv = (local_heads_ + 2 * local_kv_heads_) * head_dim_;
  const bool sharded = ctx.sequence_sharded(), cp = ctx.context_parallel();
  const int S = ctx.full_seq();  // attention sees whole sequences (model/context_parallel.h)
  Arena& keep = ctx.recompute == RecomputeGranularity::kFull ? ctx.scratch : ctx.saved;
  auto* s = keep.alloc<AttentionSaved>(1);
  // Under sequence parallelism the norm and its output are this rank's shard (n rows); the gathered
  // input of W_qkv is rebuilt in backward rather than kept, as Megatron does (t times less memory).
  s->rstd = keep.alloc_f32(n);
  s->xn = keep.alloc_f32(size_t(n) * d);
  s->qkv = keep.alloc_f32(size_t(ctx.batch) * S * lqkv);
  s->attn = keep.alloc_f32(size_t(T) * ld);
  const size_t probs_size = size_t(ctx.batch) * local_heads_ * S * S;
  s->probs = ctx.recompute == RecomputeGranularity::kSelective ? nullptr : keep.alloc_f32(probs_size);
  float* probs = s->probs ? s->probs : ctx.scratch.alloc_f32(probs_size);

  const float* xn = sp_norm_forward(ctx, s->xn, s->rstd, x_in, norm_id_, d);
  float* qkv = cp ? ctx.scratch.alloc_f32(size_t(T) * lqkv) : s->qkv;
  block_matmul_forward(ctx, {.labels = kQkvLabels, .weight_id = qkv_id_}, qkv, xn, T, d, lqkv);
  s->qk_norm = qk_norm_.forward(qkv, T, local_heads_, local_kv_heads_, keep, ctx);  // per token: the rank's rows
  if (cp) cp_gather_sequence(ctx, qkv, s->qkv, lqkv);
  ctx.backend().rope_forward(s->qkv, ctx.rope, ctx.batch, local_heads_, local_kv_heads_);
  float* attn = cp ? ctx.scratch.alloc_f32(size_t(ctx.batch) * S * ld) : s->attn;
  ctx.backend().attention_forward(attn, probs, s->qkv, ctx.batch, S, local_heads_, local_kv_heads_, head_dim_);
  if (cp) cp_take_local(ctx, attn, s->attn, ld);
  // Row-parallel W_o: each TP rank produces a partial sum of the output, summed over TP (all-reduce),
  // or under sequence parallelism summed and scattered along the sequence (reduce-scatter).
  float* partial = sharded ? ctx.scratch.alloc_f32(size_t(T) * d) : x_out;
  block_matmul_forward(ctx, {.labels = kOutLabels, .weight_id = out_id_}, partial, s->attn, T, ld, d);
  if (sharded)
    sp_reduce_scatter(ctx, partial, x_out, d);
  else if (ctx.pc.tp_size() > 1)
    ctx.pc.tp->all_reduce(x_out, size_t(T) * d);
  ctx.backend().axpy(x_out, x_in, 1.0f, int64_t(n) * d);
  return s;
}

void AttentionBlock::backward(float* dx, const float* x_in, const void* saved, BlockContext& ctx) const {
  const auto* s = static_cast<const AttentionSaved*>(saved);
  const int T = ctx.tokens(), d = hidden_, ld = local_heads_ * head_dim_, S = ctx.full_seq();
  const int lqkv = (local_heads_ + 2 * local_kv_heads_) * head_dim_;
  const bool cp = ctx.context_parallel();
  const size_t full_tokens = size_t(ctx.batch) * S;
  const float* probs = s->probs;
  if (!probs) {  // selective recompute: rebuild the attention probabilities
    float* p = ctx.scratch.alloc_f32(size_t(ctx.batch) * local_heads_ * S * S);
    float* discard = ctx.scratch.alloc_f32(full_tokens * ld);
    ctx.backend().attention_forward(discard, p, s->qkv, ctx.batch, S, local_heads_, local_kv_heads_, head_dim_);
    probs = p;
  }
  // The backward of the reduce-scatter is an all-gather of the output gradient.
  const auto [dout, xn] = sp_gather_backward_inputs(ctx, dx, s->xn, d);
  float* dattn = ctx.scratch.alloc_f32(size_t(T) * ld);
  block_matmul_backward(ctx, {.labels = kOutLabels, .weight_id = out_id_}, dattn, dout, s->attn, T, ld, d, false);
  // Under context parallelism: this rank's queries' share of the whole sequence's q/k/v gradient,
  // summed over the CP group onto each rank's rows (model/context_parallel.h).
  float* dattn_full = dattn;
  if (cp) {
    dattn_full = ctx.scratch.alloc_f32(full_tokens * ld);
    cp_put_local(ctx, dattn, dattn_full, ld);
  }
  float* dqkv = ctx.scratch.alloc_f32(full_tokens * lqkv);
  float* att_scratch = ctx.scratch.alloc_f32(size_t(S) * S);
  ctx.backend().attention_backward(dqkv, att_scratch, dattn_full, s->qkv, probs, ctx.batch, S, local_heads_,
                                   local_kv_heads_, head_dim_);
  ctx.backend().rope_backward(dqkv, ctx.rope, ctx.batch, local_heads_, local_kv_heads_);
  if (cp) {
    float* mine = ctx.scratch.alloc_f32(size_t(T) * lqkv);
    cp_reduce_scatter_sequence(ctx, dqkv, mine, lqkv);
    dqkv = mine;
  }
  qk_norm_.backward(dqkv, T, local_heads_, local_kv_heads_, s->qk_norm, ctx);
  float* dxn = ctx.scratch.alloc_f32(size_t(T) * d);
  block_matmul_backward(ctx, {.labels = kQkvLabels, .weight_id = qkv_id_}, dxn, dqkv, xn, T, d, lqkv, false);
  // Column-parallel W_qkv: the input gradient is a partial sum over TP ranks (reduce-scattered along
  // the sequence under sequence parallelism: the backward of the forward's all-gather).
  dxn = sp_reduce_input_gradient(ctx, dxn, d);
  sp_norm_backward(ctx, dx, norm_id_, dxn, x_in, s->rstd, d);
  grad_ready(ctx, norm_id_);
}

}  // namespace moe4d
