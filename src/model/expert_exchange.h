// model/expert_exchange.h — the expert-parallel all-to-all: moves token rows to the ranks that hold
// their experts and brings the results back.
//
// Each rank of an EP group holds experts [ep_rank * E_local, (ep_rank + 1) * E_local). Locally the
// routed rows are already grouped by global expert (kernels/moe_dispatch.h), so the rows bound for
// EP rank r are one contiguous block. `plan` exchanges the per-expert row counts; `dispatch` sends
// the rows (all_to_all_v) and regroups what arrives from every source rank by local expert, so each
// local expert runs one GEMM over a contiguous block; `combine` is the exact inverse. Backward uses
// the same two moves (dispatch for output gradients, combine for input gradients).
//
// Every rank of the EP group must call plan/dispatch/combine together, even with zero rows.
// With an EP group of one rank no data moves: dispatch/combine are plain copies.
#pragma once

#include <cstddef>
#include "comm/communicator.h"
#include "core/arena.h"

namespace moe4d {

// Plain data in arena memory (it lives as long as the micro-batch's saved activations).
struct ExpertExchangePlan {
  int ep = 1;
  int local_experts = 0;
  int send_rows = 0;               // rows this rank sends (= its kept routed rows)
  int recv_rows = 0;               // rows this rank's experts process
  size_t* send_counts = nullptr;   // [ep] rows to each EP rank
  size_t* send_displs = nullptr;   // [ep]
  size_t* recv_counts = nullptr;   // [ep] rows from each EP rank
  size_t* recv_displs = nullptr;   // [ep]
  int* recv_expert_rows = nullptr; // [ep * local_experts] rows from source s for local expert e
  int* expert_offsets = nullptr;   // [local_experts + 1] expert-major offsets after regrouping
};

class ExpertExchange {
 public:
  ExpertExchange(Communicator& ep_group, int num_experts);

  // expert_offsets: [num_experts + 1] offsets of this rank's permuted rows by global expert.
  // The plan's arrays are allocated from `memory`.
  ExpertExchangePlan plan(const int* expert_offsets, Arena& memory) const;

  // rows [send_rows, width] (grouped by global expert) -> out [recv_rows, width] (grouped by local expert).
  // scratch: temporaries (reset by the caller).
  void dispatch(const float* rows, float* out, int width, const ExpertExchangePlan& plan, Arena& scratch) const;

  // Inverse of dispatch: rows [recv_rows, width] -> out [send_rows, width].
  void combine(const float* rows, float* out, int width, const ExpertExchangePlan& plan, Arena& scratch) const;

 private:
  Communicator& group_;
  int num_experts_;
  int local_experts_;
};

}  // namespace moe4d
