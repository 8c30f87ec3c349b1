#include "model/qk_norm.h"

#include <fmt/format.h>

#include "backend/backend.h"
#include "model/block_matmul.h"
#include "model/param_store.h"

namespace moe4d {
namespace {
struct QkSaved {
  float* q;       // [tokens * heads, head_dim] before the norm
  float* k;       // [tokens * kv_heads, head_dim]
  float* rstd_q;  // [tokens * heads]
  float* rstd_k;  // [tokens * kv_heads]
};

// The query heads (or the key heads) of qkv as contiguous rows of head_dim, and back: per token and
// KV group, the group's g query heads are one run of g * head_dim floats, its key head the next.
struct QkvLayout {
  int tokens, heads, kv_heads, head_dim;
  int group() const { return heads / kv_heads; }
  size_t pitch() const { return sizeof(float) * size_t(group() + 2) * head_dim; }
  size_t run(bool query) const { return sizeof(float) * size_t(query ? group() : 1) * head_dim; }
  size_t offset(bool query) const { return query ? 0 : size_t(group()) * head_dim; }
  size_t runs() const { return size_t(tokens) * kv_heads; }
  int rows(bool query) const { return tokens * (query ? heads : kv_heads); }

  void gather(Backend& b, float* rows, const float* qkv, bool query) const {
    b.copy_rows(rows, run(query), qkv + offset(query), pitch(), run(query), runs());
  }
  void scatter(Backend& b, float* qkv, const float* rows, bool query) const {
    b.copy_rows(qkv + offset(query), pitch(), rows, run(query), run(query), runs());
  }
};
}  // namespace

QkNorm::QkNorm(int layer, const ModelConfig& model, ParamStore& params) : head_dim_(model.head_dim()) {
  if (!model.qk_norm) return;
  const auto weight = [&](const char* which) {
    return params.add({.name = fmt::format("layers.{}.attn.{}_norm.weight", layer, which),
                       .global_shape = {head_dim_}, .init = ParamInit::kOnes, .weight_decay = false,
                       .tp_replicated = true, .layer = layer});
  };
  q_id_ = weight("q");
  k_id_ = weight("k");
}

const void* QkNorm::forward(float* qkv, int tokens, int heads, int kv_heads, Arena& keep, BlockContext& ctx) const {
  if (!enabled()) return nullptr;
  const QkvLayout at{tokens, heads, kv_heads, head_dim_};
  Backend& b = ctx.backend();
  auto* s = keep.alloc<QkSaved>(1);
  float** pre[2] = {&s->q, &s->k};
  float** rstd[2] = {&s->rstd_q, &s->rstd_k};
  for (const bool query : {true, false}) {
    const int rows = at.rows(query);
    *pre[!query] = keep.alloc_f32(size_t(rows) * head_dim_);
    *rstd[!query] = keep.alloc_f32(rows);
    at.gather(b, *pre[!query], qkv, query);
    float* normed = ctx.scratch.alloc_f32(size_t(rows) * head_dim_);
    const ValueUse w(ctx, query ? q_id_ : k_id_);
    b.rmsnorm_forward(normed, *rstd[!query], *pre[!query], w.data(), rows, head_dim_, float(ctx.model.norm_eps));
    at.scatter(b, qkv, normed, query);
  }
  return s;
}

void QkNorm::backward(float* dqkv, int tokens, int heads, int kv_heads, const void* saved, BlockContext& ctx) const {
  if (!enabled()) return;
  const auto* s = static_cast<const QkSaved*>(saved);
  const QkvLayout at{tokens, heads, kv_heads, head_dim_};
  Backend& b = ctx.backend();
  for (const bool query : {true, false}) {
    const int rows = at.rows(query), id = query ? q_id_ : k_id_;
    float* dout = ctx.scratch.alloc_f32(size_t(rows) * head_dim_);
    float* dx = ctx.scratch.alloc_f32(size_t(rows) * head_dim_);
    float* dw = ctx.scratch.alloc_f32(head_dim_);
    b.zero(dx, sizeof(float) * rows * head_dim_);
    b.zero(dw, sizeof(float) * head_dim_);
    at.gather(b, dout, dqkv, query);
    {
      const ValueUse w(ctx, id);
      b.rmsnorm_backward(dx, dw, dout, query ? s->q : s->k, w.data(), query ? s->rstd_q : s->rstd_k, rows, head_dim_);
    }
    at.scatter(b, dqkv, dx, query);
    // This rank's heads only: the weight's gradient is the sum over the TP group's heads.
    if (ctx.pc.tp_size() > 1) ctx.pc.tp->all_reduce(dw, size_t(head_dim_));
    b.axpy(ctx.params.grad(id), dw, 1.0f, head_dim_);
    grad_ready(ctx, id);
  }
}

}  // namespace moe4d
