// kernels/moe_dispatch.h — local MoE token permutation: group the routed (token, pick) slots by expert
// so each expert runs one GEMM over a contiguous block of rows, then combine the expert outputs back
// with the router weights. Expert parallelism (all-to-all between ranks) is built on top of these in
// model/; these kernels never communicate.
//
// Slot s = t * k + j is pick j of token t.
#pragma once

namespace moe4d {

// Plans the permutation. capacity < 0 means dropless; otherwise each expert keeps at most `capacity`
// slots, dropping the ones with the lowest router weight topk_w first (ties: the later token is
// dropped first). Kept rows are ordered by expert, and within an expert by slot index.
//   expert_offsets [experts + 1]: rows of expert e are [expert_offsets[e], expert_offsets[e+1])
//   row_slot [tokens * k]: slot held by each permuted row (only the first `kept` entries are valid)
//   slot_row [tokens * k]: permuted row of each slot, or -1 if the slot was dropped
//   scratch: at least tokens * k ints
// Returns the number of kept rows.
int moe_route_plan(int* expert_offsets, int* row_slot, int* slot_row, int* scratch, const int* topk_idx,
                   const float* topk_w, int tokens, int experts, int k, int capacity);

// xp[r, :] = x[row_slot[r] / k, :] for r < rows. xp: [rows, d]; x: [tokens, d].
void moe_permute_forward(float* xp, const float* x, const int* row_slot, int rows, int k, int d);

// dx[row_slot[r] / k, :] += dxp[r, :]  (accumulates into dx).
void moe_permute_backward(float* dx, const float* dxp, const int* row_slot, int rows, int k, int d);

// out[t, :] = sum_j topk_w[t, j] * y[slot_row[t*k + j], :], dropped slots contribute zero. out overwritten.
void moe_unpermute_forward(float* out, const float* y, const int* slot_row, const float* topk_w, int tokens, int k,
                           int d);

// dy[slot_row[s], :] = topk_w[s] * dout[s / k, :] (overwritten, rows of dropped slots untouched);
// dtopk_w[s] = dot(dout[s / k, :], y[slot_row[s], :]), 0 for dropped slots (overwritten).
void moe_unpermute_backward(float* dy, float* dtopk_w, const float* dout, const float* y, const int* slot_row,
                            const float* topk_w, int tokens, int k, int d);

}  // namespace moe4d
