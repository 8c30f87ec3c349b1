// model/sequence_shard.cc — sequence-parallel gather / reduce-scatter along the sequence.
#include "model/sequence_shard.h"

#include <cstring>

#include "kernels/optimizer_kernels.h"
#include "kernels/rmsnorm.h"
#include "model/block_matmul.h"
#include "model/param_store.h"

namespace moe4d {
namespace {

// The collectives move rank-major blocks [t][B][S/t][d]; the model's rows are [B][S][d]. With one
// sequence per micro-batch the two layouts coincide and no copy is needed.
void rank_major_to_tokens(const BlockContext& ctx, const float* blocks, float* tokens, int d) {
  const int t = ctx.pc.tp_size(), B = ctx.batch, s = ctx.seq / t;
  const size_t piece = size_t(s) * d;
  for (int r = 0; r < t; ++r)
    for (int b = 0; b < B; ++b)
      std::memcpy(tokens + (size_t(b) * ctx.seq + size_t(r) * s) * d, blocks + (size_t(r) * B + b) * piece,
                  sizeof(float) * piece);
}

void tokens_to_rank_major(const BlockContext& ctx, const float* tokens, float* blocks, int d) {
  const int t = ctx.pc.tp_size(), B = ctx.batch, s = ctx.seq / t;
  const size_t piece = size_t(s) * d;
  for (int r = 0; r < t; ++r)
    for (int b = 0; b < B; ++b)
      std::memcpy(blocks + (size_t(r) * B + b) * piece, tokens + (size_t(b) * ctx.seq + size_t(r) * s) * d,
                  sizeof(float) * piece);
}

}  // namespace

void sp_all_gather(BlockContext& ctx, const float* shard, float* full, int d) {
  const size_t count = size_t(ctx.shard_tokens()) * d;
  if (ctx.batch == 1) {
    ctx.pc.tp->all_gather(shard, full, count, DType::kF32);
    return;
  }
  float* blocks = ctx.scratch.alloc_f32(count * ctx.pc.tp_size());
  ctx.pc.tp->all_gather(shard, blocks, count, DType::kF32);
  rank_major_to_tokens(ctx, blocks, full, d);
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

void sp_take_shard(const BlockContext& ctx, const float* full, float* shard, int d) {
  const int t = ctx.pc.tp_size(), r = ctx.pc.coord.tp, s = ctx.seq / t;
  const size_t piece = size_t(s) * d;
  for (int b = 0; b < ctx.batch; ++b)
    std::memcpy(shard + size_t(b) * piece, full + (size_t(b) * ctx.seq + size_t(r) * s) * d, sizeof(float) * piece);
}

void sp_norm_backward(BlockContext& ctx, float* dx, int norm_id, const float* dout, const float* x, const float* rstd,
                      int d) {
  const int n = ctx.shard_tokens();
  const ValueUse use(ctx, norm_id);
  const float* w = use.data();
  if (!ctx.sequence_sharded()) {
    rmsnorm_backward(dx, ctx.params.grad(norm_id), dout, x, w, rstd, n, d);
    return;
  }
  // This micro-batch's weight gradient alone is summed over TP (the accumulated gradient of earlier
  // micro-batches is already complete on every rank).
  float* dw = ctx.scratch.alloc_f32(d);
  std::memset(dw, 0, sizeof(float) * d);
  rmsnorm_backward(dx, dw, dout, x, w, rstd, n, d);
  ctx.pc.tp->all_reduce(dw, size_t(d));
  axpy(ctx.params.grad(norm_id), dw, 1.0f, d);
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
