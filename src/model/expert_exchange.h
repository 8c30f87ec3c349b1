// model/expert_exchange.h — the expert-parallel all-to-all: moves token rows to the ranks that hold
// their experts and brings the results back, optionally in slices that overlap expert compute.
//
// Each rank of an EP group holds experts [ep_rank * E_local, (ep_rank + 1) * E_local). Two row
// layouts meet here:
//   token layout  — a rank's own routed rows, grouped by global expert (kernels/moe_dispatch.h), so
//                   the rows bound for EP rank r are one contiguous block;
//   expert layout — the rows a rank's experts process, grouped by local expert, and inside an expert
//                   by source EP rank, then by the source's row order. Each local expert therefore
//                   runs its GEMMs over one contiguous block.
// `dispatch` moves token layout -> expert layout, `combine` is its exact inverse. Both are
// permutations, so each is the other's adjoint: backward uses the same two moves (dispatch for the
// output gradients, combine for the input gradients).
//
// Slices (moe.a2a_chunks = C): every local expert's rows are cut into C contiguous row ranges of the
// expert layout, range c = [N_e * c / C, N_e * (c + 1) / C) of its N_e rows. Slice c is range c of
// every expert; it moves as one all_to_all_v, so the expert GEMMs of slice c can run while slice c + 1
// is in flight. The expert layout is the same for every C (only the order in which its rows arrive
// changes), so C does not change which rows any expert sees nor their order. (Row-wise GEMMs run per
// slice, and BLAS picks its micro-kernels by shape, so a row's result may differ from C = 1 in the
// last bit; weight gradients are one GEMM per expert over its whole block, see model/moe_block.h.)
// To cut the same ranges on both ends, `plan` all-gathers the full [ep, E] row-count matrix (ep * E
// ints) instead of exchanging only this rank's counts.
//
// Collective order: every rank of the EP group calls plan, then begins the slices of a move in the
// same order (and finishes them), even with zero rows — each slice is one all_to_all_v on every rank.
// Rows are packed into (unpacked from) a contiguous per-peer buffer only where the pieces of a peer
// are not already adjacent; with C = 1 the token side never needs packing.
// Thread safety: none; one thread drives an exchange (like its communicator).
#pragma once

#include <cstddef>
#include <memory>

#include "comm/communicator.h"
#include "core/arena.h"

namespace moe4d {

class Backend;

// One side (token or expert layout) of one slice: for each (peer EP rank p, local-expert index e) a
// row range [start, start + rows) of the local layout. On the token side e indexes the local experts
// of destination p; on the expert side e is this rank's local expert and p the source rank.
struct ExchangeSide {
  int* start = nullptr;         // [ep * local_experts]
  int* rows = nullptr;          // [ep * local_experts]
  size_t* peer_rows = nullptr;  // [ep] rows exchanged with each peer in this slice
  int total_rows = 0;
  bool contiguous = false;      // every peer's pieces are adjacent in the layout: no packing needed
};

struct ExchangeSlice {
  ExchangeSide token;
  ExchangeSide expert;
  int* expert_begin = nullptr;  // [local_experts] this slice's rows of local expert e in the expert
  int* expert_end = nullptr;    //                 layout: [expert_begin[e], expert_end[e])
};

// Plain data in arena memory (it lives as long as the micro-batch's saved activations).
struct ExpertExchangePlan {
  int ep = 1;
  int local_experts = 0;
  int chunks = 1;
  int send_rows = 0;                // rows in this rank's token layout (its kept routed rows)
  int recv_rows = 0;                // rows in this rank's expert layout
  int* expert_offsets = nullptr;    // [local_experts + 1] expert layout offsets of each local expert
  const int* counts = nullptr;      // [ep * experts] rows each source EP rank sends to each expert
  ExchangeSlice* slices = nullptr;  // [chunks]
};

class ExpertExchange;

// A started move of one slice. finish() waits for the transfer and unpacks the received rows into
// the destination; the source rows must stay untouched until then. Move-only; destroying an
// unfinished transfer finishes it.
class ExchangeTransfer {
 public:
  ExchangeTransfer() = default;
  ExchangeTransfer(ExchangeTransfer&&) = default;
  ExchangeTransfer& operator=(ExchangeTransfer&& other) noexcept;
  ~ExchangeTransfer() { finish(); }

  void finish();
  bool pending() const { return work_ != nullptr; }

 private:
  friend class ExpertExchange;
  std::unique_ptr<Work> work_;
  Backend* backend_ = nullptr;               // unpacks on finish()
  const ExchangeSide* recv_side_ = nullptr;  // unpack map (null: received in place)
  const float* packed_ = nullptr;
  float* out_ = nullptr;
  int ep_ = 0, local_experts_ = 0, width_ = 0;
};

// Transfers started one after another and finished together, in start order (on finish_all() or
// destruction). Storage for `capacity` transfers comes from an arena that must outlive the queue.
class ExchangeTransferQueue {
 public:
  ExchangeTransferQueue(int capacity, Arena& memory);
  ~ExchangeTransferQueue() { finish_all(); }
  ExchangeTransferQueue(const ExchangeTransferQueue&) = delete;
  ExchangeTransferQueue& operator=(const ExchangeTransferQueue&) = delete;

  void push(ExchangeTransfer transfer);
  // Finishes the transfer pushed index-th (earlier ones need not be finished).
  void finish(int index);
  void finish_all();

 private:
  ExchangeTransfer* items_;
  int capacity_;
  int size_ = 0;
};

class ExpertExchange {
 public:
  // chunks: slices per move (moe.a2a_chunks, >= 1). Requires num_experts % ep_group.size() == 0.
  ExpertExchange(Communicator& ep_group, int num_experts, int chunks);

  int chunks() const { return chunks_; }

  // expert_offsets: [num_experts + 1] offsets of this rank's token layout by global expert.
  // Collective over the EP group (one all_gather). The plan's arrays are allocated from `memory`.
  ExpertExchangePlan plan(const int* expert_offsets, Arena& memory) const;

  // Starts moving slice `slice` from token_rows [send_rows, width] to expert_rows [recv_rows, width]
  // (dispatch) or back (combine). Only the slice's rows of the destination are written, at finish().
  // Temporaries come from `scratch`, which must outlive the transfer. Rows are packed and unpacked
  // on `backend` (borrowed; it must outlive the transfer).
  [[nodiscard]] ExchangeTransfer dispatch_begin(int slice, const float* token_rows, float* expert_rows, int width,
                                                const ExpertExchangePlan& plan, Arena& scratch,
                                                Backend& backend) const;
  [[nodiscard]] ExchangeTransfer combine_begin(int slice, const float* expert_rows, float* token_rows, int width,
                                               const ExpertExchangePlan& plan, Arena& scratch,
                                               Backend& backend) const;

  // Whole moves: every slice begun, then every slice finished (backend null: this thread's CPU backend).
  void dispatch(const float* token_rows, float* expert_rows, int width, const ExpertExchangePlan& plan,
                Arena& scratch, Backend* backend = nullptr) const;
  void combine(const float* expert_rows, float* token_rows, int width, const ExpertExchangePlan& plan,
               Arena& scratch, Backend* backend = nullptr) const;

 private:
  ExchangeTransfer move(const ExchangeSide& send, const ExchangeSide& recv, const float* src, float* dst, int width,
                        const ExpertExchangePlan& plan, Arena& scratch, Backend& backend) const;

  Communicator& group_;
  int num_experts_;
  int local_experts_;
  int chunks_;
};

}  // namespace moe4d
