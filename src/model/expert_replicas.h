// model/expert_replicas.h — the replica slots of one MoE layer (moe.redundant_experts = R > 0):
// where each slot's weights come from, how a logical expert's rows are split over its copies, and
// how replica gradients get back to the expert's home (docs/expert_replication.md).
//
// Ownership: the logical experts stay exactly as without replication — expert g's parameters,
// gradient and optimizer state live on its home EP rank g / (E / ep) in the ParamStore, so the
// optimizer, ZeRO, gradient sync and checkpoints never see a replica. Each EP rank additionally
// holds R / ep replica slots (expert_placement/expert_placement.h) as plain buffers:
//   weights  — one all_to_all_v over the EP group copies every replica slot's W1, W3, W2 shard
//              (3 d f / tp floats) from its home, once per step: weights change only in the
//              optimizer step, so the copy stays valid for every micro-batch, recomputation and
//              backward until invalidate() (the trainer calls it at the start of every step and
//              evaluation). The trainer starts it with prefetch() before the step's first forward,
//              overlapping the layers in front of this one, when the homes' values are resident
//              (ZeRO 0-2); otherwise (ZeRO-3 gathers them only around the layer) the layer's first
//              forward starts it right after the router. weights_ready() waits for it before the
//              expert GEMMs.
//   backward — the replica slots' weight GEMMs run first, into local buffers that accumulate over
//              the step's micro-batches; when the homes' gradients are about to be reduced (the
//              block is told by BlockContext::grads_final: the last backward of the step under
//              ZeRO 0/1, every backward under ZeRO-2/3, which reduce each micro-batch) they go home
//              in one all_to_all_v and return_grads_finish adds them into the home's gradient in
//              EP-rank order before the home experts' own weight GEMMs report their ranges ready
//              (model/block_matmul.h): the sum over all copies is then complete.
// Bytes per step and EP rank: 3 d f / tp x (R / ep) x 4 received once (the fetch) and the same sent
// once per gradient return (1 per step under ZeRO 0/1, micro_batch_num under ZeRO-2/3).
// Memory: the fetched weights and the gradient buffer, 2 x 4 x 3 d f / tp x (R / ep) bytes, plus
// the send / receive staging of the slots this rank is home to.
//
// Rows: split_rows turns the token layout grouped by logical expert (kernels/moe_dispatch.h) into one
// grouped by physical slot, with the node-preferring, balance-preserving split of
// expert_placement/expert_dispatch.h: the same choice on every rank, independent of timing.
// Capacity was already applied per logical expert before the split.
//
// Collective order: every EP rank of the group makes the same prefetch / forward / backward calls
// in the same order (they run the same schedule), so the fetches and returns match up. Not thread-safe.
#pragma once

#include <memory>
#include <utility>
#include <vector>

#include "comm/communicator.h"
#include "core/arena.h"
#include "expert_placement/expert_dispatch.h"
#include "expert_placement/expert_placement.h"
#include "parallel/parallel_context.h"

namespace moe4d {

class Backend;
class ParamStore;

struct ReplicaWeights {
  int w1_id, w3_id, w2_id;  // the layer's expert parameters [E_local, d, f], [E_local, d, f], [E_local, f, d]
  int hidden, local_ffn;    // d, f / tp
};

class ExpertReplicas {
 public:
  // rank_node: the node of each EP rank (ep_rank_nodes); empty: one node.
  ExpertReplicas(Communicator& ep_group, ExpertPlacement placement, ReplicaWeights weights,
                 std::vector<int> rank_node = {});

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

  // Weights: invalidate() marks the fetched copy stale (the homes' values may have changed);
  // prefetch() starts the fetch if it is stale and none is in flight; weights_ready() waits for it
  // (starting it first if nobody did).
  void invalidate();
  // Whether prefetch() would start the fetch now, reading the homes' weights.
  bool fetch_needed() const { return !fresh_ && !fetching_; }
  // The weights are packed for sending on `backend`.
  void prefetch(const ParamStore& params, Backend& backend);
  void weights_ready(const ParamStore& params, Backend& backend);
  // Gradients: the replica gradients accumulated since the last return go home (begin), and are
  // added into the homes' gradients (finish); the buffers then restart from zero.
  void return_grads_begin();
  void return_grads_finish(ParamStore& params, Backend& backend);

  // Rows each EP rank processes with this placement / without replication, from the exchange's
  // [ep, E + R] count matrix (rows of each source for each physical slot).
  void rank_rows(const int* slot_counts, std::vector<double>& with, std::vector<double>& without) const;
  // Rows sent to an EP rank on another node, with this placement and without replication.
  std::pair<double, double> cross_node_rows(const int* slot_counts) const;
  // Floats received per fetch (and sent per gradient return) by this rank.
  size_t replica_floats() const { return size_t(placement_.redundant / placement_.ep) * block_floats_; }
  // Floats this rank received (fetches) and sent (gradient returns) since the last call.
  size_t take_moved_floats() { return std::exchange(moved_floats_, 0); }
  // Bytes of this rank's replica buffers: fetched weights, gradients and the staging of the slots
  // this rank is home to.
  size_t buffer_bytes() const {
    return sizeof(float) * (values_.size() + grads_.size() + send_.size() + home_grads_.size());
  }

 private:
  void layout();  // buffer positions, per-peer counts and the row split of the current placement
  void fetch_begin(const ParamStore& params, Backend& backend);

  Communicator& group_;
  ExpertPlacement placement_;
  ReplicaWeights w_;
  int me_, ep_;
  size_t block_floats_;            // 3 d f_local
  std::vector<int> rank_node_;     // [ep] node of each EP rank
  ExpertDispatch dispatch_;
  std::vector<int> copy_index_;    // [E + R] which copy of its expert each physical slot is
  std::vector<int> position_;      // [free slots] position of replica slot j in the buffers (grouped by home)
  std::vector<size_t> recv_counts_, recv_displs_, send_counts_, send_displs_;  // [ep], floats
  std::vector<int> send_experts_;  // local index of my home experts to send, in peer-major order
  std::vector<float> values_, grads_, send_, home_grads_;
  std::unique_ptr<Work> fetching_, returning_;
  bool fresh_ = false;             // values_ hold the homes' current weights
  size_t moved_floats_ = 0;
};

// The node of every rank of pc's EP group, in EP-rank order (nodes hold pc.ranks_per_node
// consecutive world ranks: parallel/rank_grid.h).
std::vector<int> ep_rank_nodes(const ParallelContext& pc);

}  // namespace moe4d
