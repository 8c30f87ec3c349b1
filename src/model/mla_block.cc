#include "model/mla_block.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "backend/backend.h"
#include "model/block_matmul.h"
#include "model/param_store.h"
#include "model/rope_scaling.h"
#include "model/sequence_shard.h"

namespace moe4d {
namespace {
struct MlaSaved {
  float* rstd;     // [n] attn_norm
  float* xn;       // [n, d]
  float* qa;       // [T, q_lora] q_a output (q_lora_rank > 0)
  float* qa_rstd;  // [T]
  float* qan;      // [T, q_lora] its norm, q_b's input
  float* kva;      // [T, kv_lora + rope] kv_a output
  float* c;        // [T, kv_lora] its latent part
  float* c_rstd;   // [T]
  float* cn;       // [T, kv_lora] the normalised latent, kv_b's input
  float* qkv;      // [T, lh, 3, head] the attention core's heads (q pre-scaled, RoPE applied)
  float* o;        // [T, lh v] the attention output, out's input
  float* probs;    // [B, lh, S, S]; null under selective recompute
};
constexpr float kLatentEps = 1e-6f;  // HF's DeepseekV3RMSNorm default, used for both latent norms
constexpr GemmLabels kQaLabels{"attention input (attn_norm output)", "mla q down-projection"};
constexpr GemmLabels kQbLabels{"mla q latent (q_a_norm output)", "mla q up-projection"};
constexpr GemmLabels kQLabels{"attention input (attn_norm output)", "mla q projection"};
constexpr GemmLabels kKvaLabels{"attention input (attn_norm output)", "mla kv down-projection"};
constexpr GemmLabels kKvbLabels{"mla kv latent (kv_a_norm output)", "mla kv up-projection"};
constexpr GemmLabels kOutLabels{"attention core output", "attention output"};

size_t bytes(int floats) { return sizeof(float) * size_t(floats); }

// din = dout @ W^T (added if accumulate) and W's gradient, for a TP-replicated weight that each TP
// rank reaches only through its own heads: its gradient is summed over TP.
void replicated_matmul_backward(BlockContext& ctx, const BlockGemm& g, float* din, const float* dout, const float* in,
                                int n, int in_dim, int out_dim, bool accumulate) {
  if (ctx.pc.tp_size() == 1) {
    block_matmul_backward(ctx, g, din, dout, in, n, in_dim, out_dim, accumulate);
    return;
  }
  float* dw = ctx.scratch.alloc_f32(size_t(in_dim) * out_dim);
  ctx.backend().zero(dw, bytes(in_dim) * out_dim);
  BlockGemm partial = g;
  partial.weight_grad = dw;
  block_matmul_backward(ctx, partial, din, dout, in, n, in_dim, out_dim, accumulate);
  sp_add_shard_weight_grad(ctx, g.weight_id, dw);
  grad_ready(ctx, g.weight_id);
}

// dx [n, width] (overwritten) and the weight gradient of a replicated latent norm (summed over TP).
void latent_norm_backward(BlockContext& ctx, int id, float* dx, const float* dout, const float* x, const float* rstd,
                          int n, int width) {
  const ValueUse use(ctx, id);
  ctx.backend().zero(dx, bytes(n) * width);
  if (ctx.pc.tp_size() == 1) {
    ctx.backend().rmsnorm_backward(dx, ctx.params.grad(id), dout, x, use.data(), rstd, n, width);
  } else {
    float* dw = ctx.scratch.alloc_f32(width);
    ctx.backend().zero(dw, bytes(width));
    ctx.backend().rmsnorm_backward(dx, dw, dout, x, use.data(), rstd, n, width);
    sp_add_shard_weight_grad(ctx, id, dw);
  }
  grad_ready(ctx, id);
}
}  // namespace

MlaBlock::MlaBlock(int layer, const ModelConfig& model, const ParallelContext& pc, ParamStore& params)
    : local_heads_(model.num_heads / pc.tp_size()),
      hidden_(model.hidden_size),
      q_lora_(model.mla.q_lora_rank),
      kv_lora_(model.mla.kv_lora_rank),
      nope_(model.mla.qk_nope_head_dim),
      rope_(model.mla.qk_rope_head_dim),
      v_(model.mla.v_head_dim),
      softmax_scale_(mla_softmax_scale(model)),
      head_(std::max(model.mla.qk_head_dim(), model.mla.v_head_dim)) {
  const int tp = pc.tp_size(), tp_rank = pc.coord.tp;
  const int64_t d = model.hidden_size, h = model.num_heads, qk = model.mla.qk_head_dim();
  const std::string prefix = fmt::format("layers.{}.", layer);
  const auto replicated = [&](const std::string& name, Shape shape, bool norm) {
    ParamInfo info{.name = prefix + name, .global_shape = std::move(shape), .tp_replicated = true, .layer = layer};
    if (norm) {
      info.init = ParamInit::kOnes;
      info.weight_decay = false;
    }
    return params.add(info);
  };
  const auto columns = [&](const std::string& name, int64_t in, int64_t out) {
    return params.add({.name = prefix + name, .global_shape = {in, out}, .shards = {{1, tp, tp_rank}}, .layer = layer});
  };
  norm_id_ = replicated("attn_norm.weight", {d}, true);
  if (q_lora_ > 0) {
    q_a_id_ = replicated("attn.q_a.weight", {d, q_lora_}, false);
    q_norm_id_ = replicated("attn.q_a_norm.weight", {q_lora_}, true);
    q_id_ = columns("attn.q_b.weight", q_lora_, h * qk);
  } else {
    q_id_ = columns("attn.q.weight", d, h * qk);
  }
  kv_a_id_ = replicated("attn.kv_a.weight", {d, kv_lora_ + rope_}, false);
  kv_norm_id_ = replicated("attn.kv_a_norm.weight", {kv_lora_}, true);
  kv_b_id_ = columns("attn.kv_b.weight", kv_lora_, h * (nope_ + v_));
  out_id_ = params.add({.name = prefix + "attn.out.weight", .global_shape = {h * v_, d}, .shards = {{0, tp, tp_rank}},
                        .init_std = 0.02f / std::sqrt(2.0f * model.num_layers), .layer = layer});
}

void MlaBlock::project_q(const float* xn, float* q, float* qa, float* qa_rstd, float* qan, int T,
                         BlockContext& ctx) const {
  const int lq = local_heads_ * (nope_ + rope_);
  if (q_lora_ == 0) {
    block_matmul_forward(ctx, {.labels = kQLabels, .weight_id = q_id_}, q, xn, T, hidden_, lq);
    return;
  }
  block_matmul_forward(ctx, {.labels = kQaLabels, .weight_id = q_a_id_}, qa, xn, T, hidden_, q_lora_);
  {
    const ValueUse w(ctx, q_norm_id_);
    ctx.backend().rmsnorm_forward(qan, qa_rstd, qa, w.data(), T, q_lora_, kLatentEps);
  }
  block_matmul_forward(ctx, {.labels = kQbLabels, .weight_id = q_id_}, q, qan, T, q_lora_, lq);
}

void MlaBlock::norm_latent(const float* kva, float* c, float* c_rstd, float* cn, int T, BlockContext& ctx) const {
  ctx.backend().copy_rows(c, bytes(kv_lora_), kva, bytes(kv_lora_ + rope_), bytes(kv_lora_), T);
  const ValueUse w(ctx, kv_norm_id_);
  ctx.backend().rmsnorm_forward(cn, c_rstd, c, w.data(), T, kv_lora_, kLatentEps);
}

void MlaBlock::gather_rotary(float* pe, const float* q, const float* kva, int T, BlockContext& ctx) const {
  const int lh = local_heads_, qk = nope_ + rope_;
  const size_t pitch = bytes((lh + 2) * rope_);
  for (int h = 0; h < lh; ++h)
    ctx.backend().copy_rows(pe + h * rope_, pitch, q + h * qk + nope_, bytes(lh * qk), bytes(rope_), T);
  ctx.backend().copy_rows(pe + lh * rope_, pitch, kva + kv_lora_, bytes(kv_lora_ + rope_), bytes(rope_), T);
}

void* MlaBlock::forward(const float* x_in, float* x_out, BlockContext& ctx) const {
  const int T = ctx.tokens(), n = ctx.shard_tokens(), d = hidden_, lh = local_heads_, hd = head_;
  const int qk = nope_ + rope_, kvw = kv_lora_ + rope_, kvb_w = nope_ + v_;
  const bool sharded = ctx.sequence_sharded();
  Backend& be = ctx.backend();
  Arena& keep = ctx.recompute == RecomputeGranularity::kFull ? ctx.scratch : ctx.saved;
  auto* s = keep.alloc<MlaSaved>(1);
  *s = {};
  s->rstd = keep.alloc_f32(n);
  s->xn = keep.alloc_f32(size_t(n) * d);
  if (q_lora_ > 0) {
    s->qa = keep.alloc_f32(size_t(T) * q_lora_);
    s->qa_rstd = keep.alloc_f32(T);
    s->qan = keep.alloc_f32(size_t(T) * q_lora_);
  }
  s->kva = keep.alloc_f32(size_t(T) * kvw);
  s->c = keep.alloc_f32(size_t(T) * kv_lora_);
  s->c_rstd = keep.alloc_f32(T);
  s->cn = keep.alloc_f32(size_t(T) * kv_lora_);
  s->qkv = keep.alloc_f32(size_t(T) * lh * 3 * hd);
  s->o = keep.alloc_f32(size_t(T) * lh * v_);
  const size_t probs_size = size_t(ctx.batch) * lh * ctx.seq * ctx.seq;
  s->probs = ctx.recompute == RecomputeGranularity::kSelective ? nullptr : keep.alloc_f32(probs_size);
  float* probs = s->probs ? s->probs : ctx.scratch.alloc_f32(probs_size);

  const float* xn = sp_norm_forward(ctx, s->xn, s->rstd, x_in, norm_id_, d);
  float* q = ctx.scratch.alloc_f32(size_t(T) * lh * qk);
  project_q(xn, q, s->qa, s->qa_rstd, s->qan, T, ctx);
  block_matmul_forward(ctx, {.labels = kKvaLabels, .weight_id = kv_a_id_}, s->kva, xn, T, d, kvw);
  norm_latent(s->kva, s->c, s->c_rstd, s->cn, T, ctx);
  float* kvb = ctx.scratch.alloc_f32(size_t(T) * lh * kvb_w);
  block_matmul_forward(ctx, {.labels = kKvbLabels, .weight_id = kv_b_id_}, kvb, s->cn, T, kv_lora_, lh * kvb_w);

  // The heads of the attention core: q = [q_nope, RoPE(q_rope)] pre-scaled, k = [k_nope, RoPE(kr)],
  // v, each zero-padded to hd.
  be.scale(q, float(softmax_scale_ * std::sqrt(double(hd))), int64_t(T) * lh * qk);
  float* pe = ctx.scratch.alloc_f32(size_t(T) * (lh + 2) * rope_);
  gather_rotary(pe, q, s->kva, T, ctx);
  be.rope_forward(pe, ctx.rope, ctx.batch, lh, 1);
  float* qkv = s->qkv;
  const size_t head3 = bytes(3 * hd), pe_pitch = bytes((lh + 2) * rope_), tok3 = bytes(lh * 3 * hd);
  be.zero(qkv, bytes(T) * lh * 3 * hd);
  be.copy_rows(qkv, head3, q, bytes(qk), bytes(nope_), size_t(T) * lh);
  be.copy_rows(qkv + hd, head3, kvb, bytes(kvb_w), bytes(nope_), size_t(T) * lh);
  be.copy_rows(qkv + 2 * hd, head3, kvb + nope_, bytes(kvb_w), bytes(v_), size_t(T) * lh);
  for (int h = 0; h < lh; ++h) {
    be.copy_rows(qkv + h * 3 * hd + nope_, tok3, pe + h * rope_, pe_pitch, bytes(rope_), T);
    be.copy_rows(qkv + h * 3 * hd + hd + nope_, tok3, pe + lh * rope_, pe_pitch, bytes(rope_), T);
  }
  float* attn = ctx.scratch.alloc_f32(size_t(T) * lh * hd);
  be.attention_forward(attn, probs, qkv, ctx.batch, ctx.seq, lh, lh, hd);
  be.copy_rows(s->o, bytes(v_), attn, bytes(hd), bytes(v_), size_t(T) * lh);

  float* partial = sharded ? ctx.scratch.alloc_f32(size_t(T) * d) : x_out;
  block_matmul_forward(ctx, {.labels = kOutLabels, .weight_id = out_id_}, partial, s->o, T, lh * v_, d);
  if (sharded)
    sp_reduce_scatter(ctx, partial, x_out, d);
  else if (ctx.pc.tp_size() > 1)
    ctx.pc.tp->all_reduce(x_out, size_t(T) * d);
  be.axpy(x_out, x_in, 1.0f, int64_t(n) * d);
  return s;
}

void MlaBlock::backward(float* dx, const float* x_in, const void* saved, BlockContext& ctx) const {
  const auto* s = static_cast<const MlaSaved*>(saved);
  const int T = ctx.tokens(), d = hidden_, lh = local_heads_, hd = head_;
  const int qk = nope_ + rope_, kvw = kv_lora_ + rope_, kvb_w = nope_ + v_;
  Backend& be = ctx.backend();
  const float* probs = s->probs;
  if (!probs) {  // selective recompute: rebuild the attention probabilities
    float* p = ctx.scratch.alloc_f32(size_t(ctx.batch) * lh * ctx.seq * ctx.seq);
    float* discard = ctx.scratch.alloc_f32(size_t(T) * lh * hd);
    be.attention_forward(discard, p, s->qkv, ctx.batch, ctx.seq, lh, lh, hd);
    probs = p;
  }
  const auto [dout, xn] = sp_gather_backward_inputs(ctx, dx, s->xn, d);
  float* d_o = ctx.scratch.alloc_f32(size_t(T) * lh * v_);
  block_matmul_backward(ctx, {.labels = kOutLabels, .weight_id = out_id_}, d_o, dout, s->o, T, lh * v_, d, false);
  float* dattn = ctx.scratch.alloc_f32(size_t(T) * lh * hd);
  be.zero(dattn, bytes(T) * lh * hd);
  be.copy_rows(dattn, bytes(hd), d_o, bytes(v_), bytes(v_), size_t(T) * lh);
  float* dqkv = ctx.scratch.alloc_f32(size_t(T) * lh * 3 * hd);
  float* att_scratch = ctx.scratch.alloc_f32(size_t(ctx.seq) * ctx.seq);
  be.attention_backward(dqkv, att_scratch, dattn, s->qkv, probs, ctx.batch, ctx.seq, lh, lh, hd);

  // Back through the head assembly: the rotary key's gradient sums over the heads.
  float* dq = ctx.scratch.alloc_f32(size_t(T) * lh * qk);
  float* dkvb = ctx.scratch.alloc_f32(size_t(T) * lh * kvb_w);
  float* dkva = ctx.scratch.alloc_f32(size_t(T) * kvw);
  float* dpe = ctx.scratch.alloc_f32(size_t(T) * (lh + 2) * rope_);
  float* dkr = ctx.scratch.alloc_f32(size_t(T) * rope_);
  float* dkr_head = ctx.scratch.alloc_f32(size_t(T) * rope_);
  const size_t head3 = bytes(3 * hd), pe_pitch = bytes((lh + 2) * rope_), tok3 = bytes(lh * 3 * hd);
  be.copy_rows(dq, bytes(qk), dqkv, head3, bytes(nope_), size_t(T) * lh);
  be.copy_rows(dkvb, bytes(kvb_w), dqkv + hd, head3, bytes(nope_), size_t(T) * lh);
  be.copy_rows(dkvb + nope_, bytes(kvb_w), dqkv + 2 * hd, head3, bytes(v_), size_t(T) * lh);
  be.zero(dkr, bytes(T) * rope_);
  for (int h = 0; h < lh; ++h) {
    be.copy_rows(dpe + h * rope_, pe_pitch, dqkv + h * 3 * hd + nope_, tok3, bytes(rope_), T);
    be.copy_rows(dkr_head, bytes(rope_), dqkv + h * 3 * hd + hd + nope_, tok3, bytes(rope_), T);
    be.axpy(dkr, dkr_head, 1.0f, int64_t(T) * rope_);
  }
  be.copy_rows(dpe + lh * rope_, pe_pitch, dkr, bytes(rope_), bytes(rope_), T);
  be.rope_backward(dpe, ctx.rope, ctx.batch, lh, 1);
  for (int h = 0; h < lh; ++h)
    be.copy_rows(dq + h * qk + nope_, bytes(lh * qk), dpe + h * rope_, pe_pitch, bytes(rope_), T);
  be.copy_rows(dkva + kv_lora_, bytes(kvw), dpe + lh * rope_, pe_pitch, bytes(rope_), T);
  be.scale(dq, float(softmax_scale_ * std::sqrt(double(hd))), int64_t(T) * lh * qk);

  // Key/value path: kv_b (column-parallel), the latent norm and kv_a (replicated).
  float* dcn = ctx.scratch.alloc_f32(size_t(T) * kv_lora_);
  block_matmul_backward(ctx, {.labels = kKvbLabels, .weight_id = kv_b_id_}, dcn, dkvb, s->cn, T, kv_lora_, lh * kvb_w,
                        false);
  float* dc = ctx.scratch.alloc_f32(size_t(T) * kv_lora_);
  latent_norm_backward(ctx, kv_norm_id_, dc, dcn, s->c, s->c_rstd, T, kv_lora_);
  be.copy_rows(dkva, bytes(kvw), dc, bytes(kv_lora_), bytes(kv_lora_), T);
  float* dxn = ctx.scratch.alloc_f32(size_t(T) * d);
  replicated_matmul_backward(ctx, {.labels = kKvaLabels, .weight_id = kv_a_id_}, dxn, dkva, xn, T, d, kvw, false);
  // Query path.
  if (q_lora_ > 0) {
    float* dqan = ctx.scratch.alloc_f32(size_t(T) * q_lora_);
    block_matmul_backward(ctx, {.labels = kQbLabels, .weight_id = q_id_}, dqan, dq, s->qan, T, q_lora_, lh * qk,
                          false);
    float* dqa = ctx.scratch.alloc_f32(size_t(T) * q_lora_);
    latent_norm_backward(ctx, q_norm_id_, dqa, dqan, s->qa, s->qa_rstd, T, q_lora_);
    replicated_matmul_backward(ctx, {.labels = kQaLabels, .weight_id = q_a_id_}, dxn, dqa, xn, T, d, q_lora_, true);
  } else {
    block_matmul_backward(ctx, {.labels = kQLabels, .weight_id = q_id_}, dxn, dq, xn, T, d, lh * qk, true);
  }
  // Every contribution to dxn came through this rank's heads: a partial sum over TP.
  dxn = sp_reduce_input_gradient(ctx, dxn, d);
  sp_norm_backward(ctx, dx, norm_id_, dxn, x_in, s->rstd, d);
  grad_ready(ctx, norm_id_);
}

}  // namespace moe4d
