// model/sequence_shard.h — the collectives of Megatron-style sequence parallelism (Korthikanti et
// al. 2022, "Reducing Activation Recomputation in Large Transformer Models").
//
// With parallel_config.sequence_parallel and TP = t > 1, the activations outside the TP regions (the
// residual stream, RMSNorm inputs and outputs, the blocks' outputs, the pipeline messages) hold only
// this TP rank's slice of every sequence: TP rank r keeps positions [r S/t, (r+1) S/t) of each of the
// B sequences of a micro-batch, as rows [B, S/t, d] (the token layout of the full activation is
// [B, S, d]; Megatron's is [S, B, d], where the same slices are contiguous). The TP regions see the
// whole sequence:
//   g  = sp_all_gather:     shard -> full, before a column-parallel GEMM (its backward: reduce-scatter);
//   g' = sp_reduce_scatter: partial full -> summed shard, after a row-parallel GEMM (backward: all-gather).
// Together they move the bytes of the all-reduce they replace (an all-reduce is a reduce-scatter
// plus an all-gather), so communication volume is unchanged and activation memory drops by ~t.
// Parameters used only on the shard (the RMSNorm weights, the MoE router) see a partial gradient:
// sp_add_shard_weight_grad completes it over TP each time it is computed.
#pragma once

#include "model/block_context.h"

namespace moe4d {

// full[B, S, d] = the TP ranks' shards [B, S/t, d] put back in sequence order. Needs ctx.scratch.
void sp_all_gather(BlockContext& ctx, const float* shard, float* full, int d);

// The same for rows of row_len elements of any type (e.g. the MoE router's top-k choices, int32).
void sp_all_gather_rows(BlockContext& ctx, const void* shard, void* full, int row_len, DType dtype);

// shard[B, S/t, d] = this rank's slice of the sum over TP ranks of partial[B, S, d]. Needs ctx.scratch.
void sp_reduce_scatter(BlockContext& ctx, const float* partial, float* shard, int d);

// What a block's backward starts from under sequence parallelism: the output gradient (the backward
// of the block's closing reduce-scatter) and its saved norm output, both gathered to the full
// sequence into ctx.scratch. Without a sequence shard both are returned as given.
struct SpBackwardInputs {
  const float* dout;
  const float* xn;
};
SpBackwardInputs sp_gather_backward_inputs(BlockContext& ctx, const float* dx, const float* xn, int d);

// The input gradient of a column-parallel region, a partial sum over TP ranks: summed over TP into
// this rank's sequence shard under sequence parallelism (the backward of the forward's all-gather,
// written to ctx.scratch), else all-reduced over TP in place. Returns where the result is.
float* sp_reduce_input_gradient(BlockContext& ctx, float* dxn, int d);

// Adds dw, this micro-batch's gradient of parameter `id` (a TP-replicated weight used on the
// sequence shard only) computed from this rank's shard, summed over the TP group, to the parameter's
// gradient. dw (the parameter's size) is used as the all-reduce buffer. Reports nothing to the grad
// hooks: the caller does when the parameter's gradient is complete.
void sp_add_shard_weight_grad(BlockContext& ctx, int id, float* dw);

// rmsnorm_forward over this rank's rows into xn / rstd (saved for the backward); returns the
// normalised input of the whole sequence: xn itself, or under sequence parallelism xn's shards
// all-gathered over TP into scratch (the input of the column-parallel GEMMs that follow).
const float* sp_norm_forward(BlockContext& ctx, float* xn, float* rstd, const float* x, int norm_id, int d);

// rmsnorm_backward over this rank's rows, with the weight gradient summed over the TP group when
// the rows are a sequence shard (each rank sees 1/t of the tokens).
void sp_norm_backward(BlockContext& ctx, float* dx, int norm_id, const float* dout, const float* x, const float* rstd,
                      int d);

}  // namespace moe4d
