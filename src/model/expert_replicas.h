// model/expert_replicas.h — the replica slots of one MoE layer (moe.redundant_experts = R > 0):
// where each slot's weights come from, how a logical expert's rows are split over its copies, and
// how replica gradients get back to the expert's home (docs/expert_replication.md).
//
// Ownership: the logical experts stay exactly as without replication — expert g's parameters,
// gradient and optimizer state live on its home EP rank g / (E / ep) in the ParamStore, so the
// optimizer, ZeRO, gradient sync and checkpoints never see a replica. Each EP rank additionally
// holds R / ep replica slots (expert_placement/expert_placement.h) as plain buffers:
//   forward  — fetch_begin / fetch_finish: one all_to_all_v over the EP group copies every replica
//              slot's W1, W3, W2 shard (3 d f / tp floats) from its home. It starts right after the
//              router and overlaps the routing plan and the dispatch; the weights are the
//              home's current values, so replicas equal their expert in every forward.
//   backward — the replica slots' weight GEMMs run first, into local buffers; return_grads_begin
//              sends them home in one all_to_all_v (while the combine's return trip is in flight),
//              and return_grads_finish adds them into the home's gradient in EP-rank order before
//              the home experts' own weight GEMMs, which report the ranges ready to ZeRO-2/3's
//              bucket reduction (model/block_matmul.h): the sum over all copies is then complete.
// Bytes per micro-batch and EP rank: 3 d f / tp x (R / ep) x 4 received (forward; again under full
// recompute) and the same sent back (backward).
//
// Rows: split_rows turns the token layout grouped by logical expert (kernels/moe_dispatch.h) into one
// grouped by physical slot. A logical expert with n rows on this source and m copies gives chunk
// i = [n i / m, n (i + 1) / m) of its rows (in their order) to copy (i + source EP rank) mod m: the
// same choice on every rank, independent of timing, and different sources start at different copies
// so that small counts spread too. Capacity was already applied per logical expert before the split.
//
// Collective order: every EP rank calls fetch_begin/finish once per forward and
// return_grads_begin/finish once per backward of the layer, in the block's fixed order. Not thread-safe.
#pragma once

#include <memory>
#include <vector>

#include "comm/communicator.h"
#include "core/arena.h"
#include "expert_placement/expert_placement.h"

namespace moe4d {

class ParamStore;

struct ReplicaWeights {
  int w1_id, w3_id, w2_id;  // the layer's expert parameters [E_local, d, f], [E_local, d, f], [E_local, f, d]
  int hidden, local_ffn;    // d, f / tp
};

class ExpertReplicas {
 public:
  ExpertReplicas(Communicator& ep_group, ExpertPlacement placement, ReplicaWeights weights);

  const ExpertPlacement& placement() const { return placement_; }
  // Takes effect from the next forward (call between steps, the same placement on every EP rank).
  void set_placement(ExpertPlacement placement);

  int local_slots() const { return placement_.slots_per_rank(); }
  // Logical expert of this rank's local slot.
  int expert_of(int local_slot) const { return placement_.expert_at(me_, local_slot); }
  bool is_replica(int local_slot) const { return local_slot >= placement_.home_slots(); }
  // A replica slot's weights / gradient accumulators ([d, f], [d, f], [f, d]).
  const float* weight(int local_slot, int which) const;
  float* grad(int local_slot, int which);

  // Token layout by logical expert -> by physical slot. In: logical [E + 1] offsets; row_slot / slot_row
  // of moe_route_plan (rewritten in place). Out: physical [E + R + 1] offsets.
  void split_rows(const int* logical_offsets, int* row_slot, int* slot_row, int slots_total, int* physical_offsets,
                  Arena& scratch) const;

  void fetch_begin(const ParamStore& params);
  void fetch_finish();
  void zero_grads();
  void return_grads_begin();
  void return_grads_finish(ParamStore& params);

  // Rows each EP rank processes with this placement / without replication, from the exchange's
  // [ep, E + R] count matrix (rows of each source for each physical slot).
  void rank_rows(const int* slot_counts, std::vector<double>& with, std::vector<double>& without) const;
  // Floats received per fetch (and sent per gradient return) by this rank.
  size_t replica_floats() const { return size_t(placement_.redundant / placement_.ep) * block_floats_; }

 private:
  void layout();  // buffer positions and per-peer counts of the current placement

  Communicator& group_;
  ExpertPlacement placement_;
  ReplicaWeights w_;
  int me_, ep_;
  size_t block_floats_;            // 3 d f_local
  std::vector<int> copy_index_;    // [E + R] which copy of its expert each physical slot is
  std::vector<int> position_;      // [free slots] position of replica slot j in the buffers (grouped by home)
  std::vector<size_t> recv_counts_, recv_displs_, send_counts_, send_displs_;  // [ep], floats
  std::vector<int> send_experts_;  // local index of my home experts to send, in peer-major order
  std::vector<float> values_, grads_, send_, home_grads_;
  std::unique_ptr<Work> pending_;
};

}  // namespace moe4d
