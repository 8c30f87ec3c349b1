#include "model/lm_head.h"

#include <cmath>

#include "backend/backend.h"
#include "model/block_matmul.h"
#include "model/param_store.h"
#include "model/sequence_shard.h"

namespace moe4d {
namespace {
struct HeadSaved {
  float* rstd;    // [n] (n = T, or T / tp: this rank's sequence shard under sequence parallelism)
  float* xn;      // [n, d]; the full [T, d] is gathered again in backward
  float* logits;  // [T, vocab_local]
  float* max;     // [T] global row max
  float* sumexp;  // [T] global sum of exp(logit - max)
};
constexpr GemmLabels kHeadLabels{"final_norm output", "logits"};
}  // namespace

TokenEmbedding::TokenEmbedding(const ModelConfig& model, const ParallelContext& pc, ParamStore& params,
                               bool tied_copy)
    : hidden_(model.hidden_size),
      vocab_start_(model.vocab_size / pc.tp_size() * pc.coord.tp),
      vocab_local_(model.vocab_size / pc.tp_size()) {
  id_ = params.add({.name = "embed.weight",
                    .global_shape = {model.vocab_size, model.hidden_size},
                    .shards = {{0, pc.tp_size(), pc.coord.tp}},
                    // The last stage's copy is used by the head, so its gradient is final with the head's.
                    .layer = tied_copy ? model.num_layers : -1,
                    .is_tied_copy = tied_copy});
}

void TokenEmbedding::forward(const int* tokens, float* out, BlockContext& ctx) const {
  const int T = ctx.tokens();
  // Each TP rank looks up only its vocabulary rows: the partial lookups are summed over TP, or under
  // sequence parallelism summed and scattered along the sequence (Megatron's reduce-scatter).
  if (ctx.sequence_sharded()) {
    float* partial = ctx.scratch.alloc_f32(size_t(T) * hidden_);
    ctx.backend().embedding_forward(partial, ValueUse(ctx, id_).data(), tokens, T, hidden_, vocab_start_, vocab_local_);
    sp_reduce_scatter(ctx, partial, out, hidden_);
    return;
  }
  ctx.backend().embedding_forward(out, ValueUse(ctx, id_).data(), tokens, T, hidden_, vocab_start_, vocab_local_);
  if (ctx.pc.tp_size() > 1) ctx.pc.tp->all_reduce(out, size_t(T) * hidden_);
}

void TokenEmbedding::backward(const int* tokens, const float* dout, BlockContext& ctx) const {
  const float* full = dout;
  if (ctx.sequence_sharded()) {  // the backward of the reduce-scatter: gather the shards' gradients
    float* gathered = ctx.scratch.alloc_f32(size_t(ctx.tokens()) * hidden_);
    sp_all_gather(ctx, dout, gathered, hidden_);
    full = gathered;
  }
  // Row blocks from the last one down that end at the grad hooks' cuts: each block adds the rows of
  // its tokens only (the same additions in the same order as one call) and is reported at once.
  float* table = ctx.params.grad(id_);
  for_each_grad_block(ctx, id_, 0, size_t(vocab_local_), size_t(hidden_), true, [&](size_t r0, size_t r1) {
    ctx.backend().embedding_backward(table + r0 * size_t(hidden_), full, tokens, ctx.tokens(), hidden_,
                                     vocab_start_ + int(r0), int(r1 - r0));
  });
}

LmHead::LmHead(const ModelConfig& model, const ParallelContext& pc, ParamStore& params, const TokenEmbedding* tied)
    : tied_(tied != nullptr),
      hidden_(model.hidden_size),
      vocab_(model.vocab_size),
      vocab_start_(model.vocab_size / pc.tp_size() * pc.coord.tp),
      vocab_local_(model.vocab_size / pc.tp_size()) {
  const int64_t d = model.hidden_size;
  norm_id_ = params.add({.name = "final_norm.weight", .global_shape = {d}, .init = ParamInit::kOnes,
                         .weight_decay = false, .tp_replicated = true, .layer = model.num_layers});
  head_id_ = tied ? tied->param_id()
                  : params.add({.name = "head.weight", .global_shape = {d, model.vocab_size},
                                .shards = {{1, pc.tp_size(), pc.coord.tp}}, .layer = model.num_layers});
}

void LmHead::project(const float* xn, float* logits, int rows, BlockContext& ctx) const {
  // Tied: logits = xn @ embed_shard^T, embed_shard [vocab_local, d]. The logits stay fp32 accumulations
  // in every precision: the cross-entropy reads them in fp32 (docs/precision.md).
  block_matmul_forward(ctx, {.labels = kHeadLabels, .weight_id = head_id_, .weight_transposed = tied_}, logits, xn,
                       rows, hidden_, vocab_local_, /*round_output=*/false);
}

void* LmHead::forward(const float* x, const int* targets, BlockContext& ctx, HeadOutput* out) const {
  const int T = ctx.tokens(), n = ctx.shard_tokens(), d = hidden_, V = vocab_local_;
  Arena& keep = ctx.saved;
  auto* s = keep.alloc<HeadSaved>(1);
  s->rstd = keep.alloc_f32(n);
  s->xn = keep.alloc_f32(size_t(n) * d);
  s->logits = keep.alloc_f32(size_t(T) * V);
  s->max = keep.alloc_f32(T);
  s->sumexp = keep.alloc_f32(T);
  ctx.backend().rmsnorm_forward(s->xn, s->rstd, x, ValueUse(ctx, norm_id_).data(), n, d, float(ctx.model.norm_eps));
  // The final norm runs on the sequence shard; the vocab-parallel head sees the gathered sequence (as
  // Megatron's output layer), so the loss and its three all-reduces are those of the TP run.
  const float* xn = s->xn;
  if (ctx.sequence_sharded()) {
    float* full = ctx.scratch.alloc_f32(size_t(T) * d);
    sp_all_gather(ctx, s->xn, full, d);
    xn = full;
  }
  project(xn, s->logits, T, ctx);

  Communicator* tp = ctx.pc.tp_size() > 1 ? ctx.pc.tp.get() : nullptr;
  ctx.backend().ce_row_max(s->max, s->logits, T, V);
  if (tp) tp->all_reduce(s->max, T, ReduceOp::kMax);
  ctx.backend().ce_row_sumexp(s->sumexp, s->logits, s->max, T, V);
  float* target_logit = ctx.scratch.alloc_f32(T);
  ctx.backend().ce_target_logit(target_logit, s->logits, targets, T, V, vocab_start_);
  if (tp) {  // one all-reduce for both sums
    float* both = ctx.scratch.alloc_f32(2 * size_t(T));
    ctx.backend().copy(both, s->sumexp, sizeof(float) * T);
    ctx.backend().copy(both + T, target_logit, sizeof(float) * T);
    tp->all_reduce(both, 2 * size_t(T));
    ctx.backend().copy(s->sumexp, both, sizeof(float) * T);
    ctx.backend().copy(target_logit, both + T, sizeof(float) * T);
  }
  float* loss = ctx.scratch.alloc_f32(T);
  ctx.backend().ce_loss(loss, s->max, s->sumexp, target_logit, T);
  if (out) {
    ctx.backend().synchronize();  // the host reads the per-token losses
    double sum = 0;
    for (int t = 0; t < T; ++t) sum += loss[t];
    out->loss_sum += sum;
    out->tokens += T;
  }
  return s;
}

void LmHead::backward(float* dx, const float* x, const int* targets, const void* saved, BlockContext& ctx) const {
  const auto* s = static_cast<const HeadSaved*>(saved);
  const int T = ctx.tokens(), n = ctx.shard_tokens(), d = hidden_, V = vocab_local_;
  const bool sharded = ctx.sequence_sharded();
  const float* xn = s->xn;
  if (sharded) {
    float* full = ctx.scratch.alloc_f32(size_t(T) * d);
    sp_all_gather(ctx, s->xn, full, d);
    xn = full;
  }
  // d(grad_scale * mean CE) / d logits, in place over the saved logits (they are not needed again).
  ctx.backend().ce_backward(s->logits, s->logits, s->max, s->sumexp, targets, ctx.grad_scale / T, T, V, vocab_start_);
  const float* dlogits = s->logits;
  float* dxn = ctx.scratch.alloc_f32(size_t(T) * d);
  // Tied: logits = xn W^T with W [V, d]: dxn = dlogits W, dW += dlogits^T xn.
  block_matmul_backward(ctx, {.labels = kHeadLabels, .weight_id = head_id_, .weight_transposed = tied_}, dxn, dlogits,
                        xn, T, d, V, false);
  if (sharded) {
    float* dxn_shard = ctx.scratch.alloc_f32(size_t(n) * d);
    sp_reduce_scatter(ctx, dxn, dxn_shard, d);
    dxn = dxn_shard;
  } else if (ctx.pc.tp_size() > 1) {
    ctx.pc.tp->all_reduce(dxn, size_t(T) * d);
  }
  ctx.backend().zero(dx, sizeof(float) * size_t(n) * d);
  sp_norm_backward(ctx, dx, norm_id_, dxn, x, s->rstd, d);
  grad_ready(ctx, norm_id_);
}

void LmHead::logits_at(const float* x, int position, float* out, BlockContext& ctx) const {
  const int B = ctx.batch, S = ctx.seq, d = hidden_, V = vocab_local_;
  MOE4D_CHECK(position >= 0 && position < S);
  float* last = ctx.scratch.alloc_f32(size_t(B) * d);
  ctx.backend().copy_rows(last, sizeof(float) * d, x + size_t(position) * d, sizeof(float) * size_t(S) * d,
                          sizeof(float) * d, size_t(B));
  float* rstd = ctx.scratch.alloc_f32(B);
  float* xn = ctx.scratch.alloc_f32(size_t(B) * d);
  ctx.backend().rmsnorm_forward(xn, rstd, last, ValueUse(ctx, norm_id_).data(), B, d, float(ctx.model.norm_eps));
  float* local = ctx.scratch.alloc_f32(size_t(B) * V);
  project(xn, local, B, ctx);
  if (ctx.pc.tp_size() == 1) {
    ctx.backend().copy(out, local, sizeof(float) * size_t(B) * V);
    return;
  }
  // Gather the vocab shards: gathered[r][b][v] -> out[b][r * V + v].
  float* gathered = ctx.scratch.alloc_f32(size_t(ctx.pc.tp_size()) * B * V);
  ctx.pc.tp->all_gather(local, gathered, size_t(B) * V, DType::kF32);
  for (int r = 0; r < ctx.pc.tp_size(); ++r)
    ctx.backend().copy_rows(out + size_t(r) * V, sizeof(float) * vocab_, gathered + size_t(r) * B * V,
                            sizeof(float) * V, sizeof(float) * V, size_t(B));
}

}  // namespace moe4d
