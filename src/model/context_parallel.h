// model/context_parallel.h — context parallelism (parallel_config.context_parallel, CP = c): every
// sequence of a micro-batch is split over the c ranks of a CP group (parallel/rank_grid.h) in
// 2c causal load-balanced chunks of S / 2c positions, CP rank i holding chunks i and 2c - 1 - i (as
// Megatron-LM does), so each rank's queries see about the same number of causal keys. A rank's rows
// are [B, S / c, ...]: for each sequence its first chunk, then its second.
//
// Everything outside attention is per token and runs on these rows unchanged (norms, FFN, MoE, the
// head and the loss, each rank's mean over its own tokens). Attention needs the keys and values of
// the whole sequence: the q/k/v rows are all-gathered over the CP group into sequence order
// (cp_gather_sequence), RoPE and causal attention run on the whole sequence, and each rank keeps its
// own rows of the output (cp_take_local). Backward runs the whole-sequence attention backward from
// an output gradient that is zero outside the rank's rows (cp_put_local), so the q/k/v gradient is
// this rank's queries' share; summed over the CP group and scattered back to the owners
// (cp_reduce_scatter_sequence) it is exactly the unsplit sequence's. This is the all-gather form of
// Megatron's context parallelism: activations outside attention shrink by c; attention's own
// working set (q/k/v, probabilities) stays that of the whole sequence.
//
// The loss is each rank's token mean, weighted 1 / (data replicas x micro-batches) like a data
// replica's, which sums to the unsplit sequence's mean; the MoE router's statistics (the tokens per
// expert of the aux loss, the losses themselves) are summed over the CP group (model/moe_block.cc).
#pragma once

#include <vector>

#include "model/block_context.h"

namespace moe4d {

// Sequence position of row `local` (< seq / cp) of CP rank `rank`'s rows of one sequence of `seq`.
int cp_position(int local, int seq, int cp, int rank);

// tokens [batch, seq] (host, e.g. token ids) -> the first batch * seq / cp entries hold CP rank
// `rank`'s rows [batch, seq / cp], in place. cp == 1 leaves them unchanged.
void cp_keep_local_tokens(int* tokens, int batch, int seq, int cp, int rank);

// full [B, S, row] = every CP rank's rows [B, S / c, row] (local) put in sequence order. S = ctx.seq x c
// (ctx.seq is the rank's share). Needs ctx.scratch.
void cp_gather_sequence(BlockContext& ctx, const float* local, float* full, int row);

// local [B, S / c, row] = this rank's rows of the sum over the CP group of full [B, S, row]. Needs ctx.scratch.
void cp_reduce_scatter_sequence(BlockContext& ctx, const float* full, float* local, int row);

// local [B, S / c, row] = this rank's rows of full [B, S, row].
void cp_take_local(BlockContext& ctx, const float* full, float* local, int row);

// full [B, S, row] = this rank's rows from local, zero elsewhere.
void cp_put_local(BlockContext& ctx, const float* local, float* full, int row);

}  // namespace moe4d
