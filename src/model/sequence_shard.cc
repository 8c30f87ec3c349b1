// model/sequence_shard.cc — sequence-parallel gather / reduce-scatter along the sequence.
#include "model/sequence_shard.h"

#include "backend/backend.h"
#include "model/block_matmul.h"
#include "model/param_store.h"

namespace moe4d {
namespace {

// The collectives move rank-major blocks [t][B][S/t][row]; the model's rows are [B][S][row]. With
// one sequence per micro-batch the two layouts coincide and no copy is needed. Rows of any element
// type: row_bytes is a row's size.
void rank_major_to_tokens(const BlockContext& ctx, const void* blocks, void* tokens, size_t row_bytes) {
  const int t = ctx.pc.tp_size(), B = ctx.batch, s = ctx.seq / t;
  const size_t piece = size_t(s) * row_bytes;
  for (int r = 0; r < t; ++r)  // B rows of `piece` bytes: sequence b's slice r
    ctx.backend().copy_rows(static_cast<char*>(tokens) + size_t(r) * s * row_bytes, size_t(ctx.seq) * row_bytes,
                            static_cast<const char*>(blocks) + size_t(r) * B * piece, piece, piece, size_t(B));
}

void tokens_to_rank_major(const BlockContext& ctx, const float* tokens, float* blocks, int d) {
  const int t = ctx.pc.tp_size(), B = ctx.batch, s = ctx.seq / t;
  const size_t piece = size_t(s) * d;
  for (int r = 0; r < t; ++r)
    ctx.backend().copy_rows(blocks + size_t(r) * B * piece, sizeof(float) * piece, tokens + size_t(r) * s * d,
                            sizeof(float) * size_t(ctx.seq) * d, sizeof(float) * piece, size_t(B));
}

}  // namespace

void sp_all_gather_rows(BlockContext& ctx, const void* shard, void* full, int row_len, DType dtype) {
  const size_t count = size_t(ctx.shard_tokens()) * row_len, row_bytes = size_t(row_len) * dtype_size(dtype);
  if (ctx.batch == 1) {
    ctx.pc.tp->all_gather(shard, full, count, dtype);
    return;
  }
  void* blocks = ctx.scratch.alloc_bytes(count * dtype_size(dtype) * ctx.pc.tp_size());
  ctx.pc.tp->all_gather(shard, blocks, count, dtype);
  rank_major_to_tokens(ctx, blocks, full, row_bytes);
}

void sp_all_gather(BlockContext& ctx, const float* shard, float* full, int d) {
  sp_all_gather_rows(ctx, shard, full, d, DType::kF32);
}

void sp_reduce_scatter(BlockContext& ctx, const float* partial, float* shard, int d) {
  const size_t count = size_t(ctx.shard_tokens()) * d;
  if (ctx.batch == 1) {
    ctx.pc.tp->reduce_scatter(partial, shard, count, DType::kF32);
    return;
  }
  float* blocks = ctx.scratch.alloc_f32(count * ctx.pc.tp_size());
  tokens_to_rank_major(ctx, partial, blocks, d);
  ctx.pc.tp->reduce_scatter(blocks, shard, count, DType::kF32);
}

const float* sp_norm_forward(BlockContext& ctx, float* xn, float* rstd, const float* x, int norm_id, int d) {
  const int n = ctx.shard_tokens();
  ctx.backend().rmsnorm_forward(xn, rstd, x, ValueUse(ctx, norm_id).data(), n, d, float(ctx.model.norm_eps));
  if (!ctx.sequence_sharded()) return xn;
  float* full = ctx.scratch.alloc_f32(size_t(ctx.tokens()) * d);
  sp_all_gather(ctx, xn, full, d);
  return full;
}

void sp_norm_backward(BlockContext& ctx, float* dx, int norm_id, const float* dout, const float* x, const float* rstd,
                      int d) {
  const int n = ctx.shard_tokens();
  const ValueUse use(ctx, norm_id);
  const float* w = use.data();
  if (!ctx.sequence_sharded()) {
    ctx.backend().rmsnorm_backward(dx, ctx.params.grad(norm_id), dout, x, w, rstd, n, d);
    return;
  }
  float* dw = ctx.scratch.alloc_f32(d);
  ctx.backend().zero(dw, sizeof(float) * d);
  ctx.backend().rmsnorm_backward(dx, dw, dout, x, w, rstd, n, d);
  sp_add_shard_weight_grad(ctx, norm_id, dw);
}

void sp_add_shard_weight_grad(BlockContext& ctx, int id, float* dw) {
  // This micro-batch's gradient alone is summed over TP (the accumulated gradient of earlier
  // micro-batches is already complete on every rank).
  const size_t numel = size_t(ctx.params.info(id).numel());
  ctx.pc.tp->all_reduce(dw, numel);
  ctx.backend().axpy(ctx.params.grad(id), dw, 1.0f, int64_t(numel));
}

float* sp_reduce_input_gradient(BlockContext& ctx, float* dxn, int d) {
  if (ctx.sequence_sharded()) {
    float* shard = ctx.scratch.alloc_f32(size_t(ctx.shard_tokens()) * d);
    sp_reduce_scatter(ctx, dxn, shard, d);
    return shard;
  }
  if (ctx.pc.tp_size() > 1) ctx.pc.tp->all_reduce(dxn, size_t(ctx.tokens()) * d);
  return dxn;
}

SpBackwardInputs sp_gather_backward_inputs(BlockContext& ctx, const float* dx, const float* xn, int d) {
  if (!ctx.sequence_sharded()) return {dx, xn};
  const size_t rows = size_t(ctx.batch) * ctx.seq;
  float* dout_full = ctx.scratch.alloc_f32(rows * d);
  sp_all_gather(ctx, dx, dout_full, d);
  float* xn_full = ctx.scratch.alloc_f32(rows * d);
  sp_all_gather(ctx, xn, xn_full, d);
  return {dout_full, xn_full};
}

}  // namespace moe4d
