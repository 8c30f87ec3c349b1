#include "model/ffn_block.h"

#include <fmt/format.h>

#include <cmath>

#include "backend/backend.h"
#include "model/block_matmul.h"
#include "model/param_store.h"
#include "model/sequence_shard.h"

namespace moe4d {
namespace {
struct FfnSaved {
  float* rstd;  // [T]
  float* xn;    // [T, d]
  float* h1;    // [T, f_local]  xn W1
  float* h3;    // [T, f_local]  xn W3
  float* g;     // [T, f_local]  silu(h1) * h3; null under selective recompute
};
constexpr GemmLabels kW1Labels{"ffn input (ffn_norm output)", "ffn w1 projection"};
constexpr GemmLabels kW3Labels{"ffn input (ffn_norm output)", "ffn w3 projection"};
constexpr GemmLabels kW2Labels{"ffn swiglu output", "ffn output"};
}  // namespace

FfnBlock::FfnBlock(int layer, const ModelConfig& model, const ParallelContext& pc, ParamStore& params)
    : hidden_(model.hidden_size), local_ffn_(model.ffn_hidden_size / pc.tp_size()) {
  const int tp = pc.tp_size(), tp_rank = pc.coord.tp;
  const int64_t d = model.hidden_size, f = model.ffn_hidden_size;
  const std::string prefix = fmt::format("layers.{}.", layer);
  norm_id_ = params.add({.name = prefix + "ffn_norm.weight", .global_shape = {d}, .init = ParamInit::kOnes,
                         .weight_decay = false, .tp_replicated = true, .layer = layer});
  w1_id_ = params.add({.name = prefix + "ffn.w1.weight", .global_shape = {d, f}, .shards = {{1, tp, tp_rank}},
                       .layer = layer});
  w3_id_ = params.add({.name = prefix + "ffn.w3.weight", .global_shape = {d, f}, .shards = {{1, tp, tp_rank}},
                       .layer = layer});
  w2_id_ = params.add({.name = prefix + "ffn.w2.weight", .global_shape = {f, d}, .shards = {{0, tp, tp_rank}},
                       .init_std = 0.02f / std::sqrt(2.0f * model.num_layers), .layer = layer});
}

void* FfnBlock::forward(const float* x_in, float* x_out, BlockContext& ctx) const {
  const int T = ctx.tokens(), n = ctx.shard_tokens(), d = hidden_, f = local_ffn_;
  const bool sharded = ctx.sequence_sharded();
  Arena& keep = ctx.recompute == RecomputeGranularity::kFull ? ctx.scratch : ctx.saved;
  auto* s = keep.alloc<FfnSaved>(1);
  s->rstd = keep.alloc_f32(n);
  s->xn = keep.alloc_f32(size_t(n) * d);  // this rank's shard under sequence parallelism
  s->h1 = keep.alloc_f32(size_t(T) * f);
  s->h3 = keep.alloc_f32(size_t(T) * f);
  s->g = ctx.recompute == RecomputeGranularity::kSelective ? nullptr : keep.alloc_f32(size_t(T) * f);
  float* g = s->g ? s->g : ctx.scratch.alloc_f32(size_t(T) * f);

  const float* xn = sp_norm_forward(ctx, s->xn, s->rstd, x_in, norm_id_, d);
  block_matmul_forward(ctx, {.labels = kW1Labels, .weight_id = w1_id_}, s->h1, xn, T, d, f);
  block_matmul_forward(ctx, {.labels = kW3Labels, .weight_id = w3_id_}, s->h3, xn, T, d, f);
  ctx.backend().swiglu_forward(g, s->h1, s->h3, int64_t(T) * f);
  float* partial = sharded ? ctx.scratch.alloc_f32(size_t(T) * d) : x_out;
  block_matmul_forward(ctx, {.labels = kW2Labels, .weight_id = w2_id_}, partial, g, T, f, d);
  if (sharded)
    sp_reduce_scatter(ctx, partial, x_out, d);
  else if (ctx.pc.tp_size() > 1)
    ctx.pc.tp->all_reduce(x_out, size_t(T) * d);
  ctx.backend().axpy(x_out, x_in, 1.0f, int64_t(n) * d);
  return s;
}

void FfnBlock::backward(float* dx, const float* x_in, const void* saved, BlockContext& ctx) const {
  const auto* s = static_cast<const FfnSaved*>(saved);
  const int T = ctx.tokens(), d = hidden_, f = local_ffn_;
  const float* g = s->g;
  if (!g) {  // selective recompute: rebuild the gated activation
    float* rebuilt = ctx.scratch.alloc_f32(size_t(T) * f);
    ctx.backend().swiglu_forward(rebuilt, s->h1, s->h3, int64_t(T) * f);
    g = rebuilt;
  }
  const auto [dout, xn] = sp_gather_backward_inputs(ctx, dx, s->xn, d);
  float* dg = ctx.scratch.alloc_f32(size_t(T) * f);
  block_matmul_backward(ctx, {.labels = kW2Labels, .weight_id = w2_id_}, dg, dout, g, T, f, d, false);
  float* dh1 = ctx.scratch.alloc_f32(size_t(T) * f);
  float* dh3 = ctx.scratch.alloc_f32(size_t(T) * f);
  ctx.backend().swiglu_backward(dh1, dh3, dg, s->h1, s->h3, int64_t(T) * f);
  float* dxn = ctx.scratch.alloc_f32(size_t(T) * d);
  // Weight gradients in reverse flat order (w2, w3, w1, norm), so that ZeRO's buckets fill and are
  // reduced one after another (model/layer_hooks.h); the input gradient sums dh1 W1^T + dh3 W3^T as before.
  block_matmul_backward(ctx, {.labels = kW1Labels, .weight_id = w1_id_}, dxn, dh1, nullptr, T, d, f, false);
  block_matmul_backward(ctx, {.labels = kW3Labels, .weight_id = w3_id_}, dxn, dh3, xn, T, d, f, true);
  block_matmul_weight_grad(ctx, {.labels = kW1Labels, .weight_id = w1_id_}, dh1, xn, T, d, f);
  dxn = sp_reduce_input_gradient(ctx, dxn, d);
  sp_norm_backward(ctx, dx, norm_id_, dxn, x_in, s->rstd, d);
  grad_ready(ctx, norm_id_);
}

}  // namespace moe4d
