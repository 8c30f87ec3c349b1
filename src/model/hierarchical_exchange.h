// model/hierarchical_exchange.h — the node-aware first stage of the expert exchange
// (moe.dispatcher: hierarchical; docs/moe.md §10).
//
// The flat exchange (model/expert_exchange.h) sends each routed copy of a token to its expert's
// rank: a token whose k picks sit on 3 ranks of another node crosses the inter-node link 3 times.
// Here a token crosses once per destination node:
//   stage 1 (this class) — each source rank sends, for every (token, node) pair with at least one
//     kept pick on that node, ONE row to that node's relay: the EP rank of that node with the same
//     local index as the source (the source itself for its own node). The row carries the token's
//     vector, its k pick weights and, for the picks on that node, their physical expert slots
//     (-1 for picks elsewhere or dropped).
//   stage 2 (ExpertExchange, unchanged, chunked as configured) — each relay runs the flat exchange
//     over the rows it received; every destination is now on its own node, so it moves only over
//     intra-node links.
// The relay treats its received rows as its own "tokens": it permutes them to its token layout by
// physical slot (RowRouting), and after the experts it forms each row's weighted sum over the picks
// on its node. `gather_sum` sends these partial sums back, one row per (token, node), and the source
// adds them up. Backward mirrors it: the output gradient goes out with `scatter` (one row per
// (token, node)); the relay forms the picks' output gradients and the weight gradients; the weight
// gradients and the input gradients (summed inside the node) come back with `gather_sum`.
// With the EP group on one node every relay is the source itself: stage 1 is a local copy.
//
// Nodes come from the rank grid's placement (ep_rank_nodes: the hosts MPI reports, as for the
// hierarchical all-reduce). Collective order: every EP rank calls plan, then the same sequence of
// scatter / gather_sum. Thread safety: none; one thread drives an exchange.
#pragma once

#include <vector>

#include "comm/communicator.h"
#include "core/arena.h"

namespace moe4d {

class Backend;

// The routed rows an exchange starts from: `tokens` token rows with k picks each. The token layout
// holds `rows` rows grouped by physical expert slot (slot_offsets [slots + 1]); row_slot[r] = t*k + j,
// slot_row[t*k + j] = its row or -1 (dropped / not here); weights [tokens * k] the pick weights.
struct RowRouting {
  int tokens = 0;
  int k = 0;
  int rows = 0;
  int* row_slot = nullptr;
  int* slot_row = nullptr;
  float* weights = nullptr;
  int* slot_offsets = nullptr;
};

// Plain data in arena memory (it lives as long as the micro-batch's saved activations).
struct NodeRelayPlan {
  RowRouting relay;               // the rows this rank relays, as its own tokens (weights included)
  int source_tokens = 0;          // T of the source side
  int sent = 0;                   // (token, node) rows this rank sends
  int* sent_token = nullptr;      // [sent] the source token of each, grouped by relay peer
  size_t* send_rows = nullptr;    // [ep] rows to each peer (non-zero only for this rank's relays)
  size_t* send_first = nullptr;   // [ep] first row of each peer's block
  size_t* recv_rows = nullptr;    // [ep] rows relayed for each source peer
  size_t* recv_first = nullptr;   // [ep]
  int64_t remote_rows = 0;        // of `sent`, rows to relays on other nodes
};

class HierarchicalExchange {
 public:
  // rank_node: the node of each EP rank (ep_rank_nodes); slots: physical expert slots of the layer
  // (experts + replicas), divisible by the group size.
  HierarchicalExchange(Communicator& ep_group, const std::vector<int>& rank_node, int slots);

  // Stage 1's plan from the source's routing (collective: one all_gather and two all_to_all_v, for
  // the pick slots and the weights). Reads the routing on the host.
  NodeRelayPlan plan(const RowRouting& source, Arena& memory, Backend& backend) const;

  // x [source_tokens, width] -> relayed [relay.tokens, width] (collective).
  void scatter(const float* x, float* relayed, int width, const NodeRelayPlan& plan, Arena& scratch,
               Backend& backend) const;
  // relayed [relay.tokens, width] -> out [source_tokens, width]: out[t] = the sum of t's rows over
  // the nodes (overwritten; zero for a token without kept picks). Collective.
  void gather_sum(const float* relayed, float* out, int width, const NodeRelayPlan& plan, Arena& scratch,
                  Backend& backend) const;

  int relay_of_node(int node) const { return relay_[size_t(node)]; }
  int node_of_rank(int rank) const { return node_index_[size_t(rank)]; }

 private:
  // One all_to_all_v of rows of `width` 4-byte elements.
  void move(const void* src, const size_t* send_rows, const size_t* send_first, void* dst, const size_t* recv_rows,
            const size_t* recv_first, int width, DType dtype, Arena& scratch) const;

  Communicator& group_;
  int slots_;
  int slots_per_rank_;
  std::vector<int> node_index_;  // [ep] dense node index of each EP rank
  std::vector<int> relay_;       // [nodes] this rank's relay on each node
};

}  // namespace moe4d
