// model/hierarchical_exchange.cc — stage 1 of the node-aware expert exchange: one row per
// (token, destination node) to that node's relay, and the partial sums back.
#include "model/hierarchical_exchange.h"

#include <algorithm>
#include <cstring>

#include "backend/backend.h"
#include "core/check.h"

namespace moe4d {

HierarchicalExchange::HierarchicalExchange(Communicator& ep_group, const std::vector<int>& rank_node, int slots)
    : group_(ep_group), slots_(slots), slots_per_rank_(slots / ep_group.size()) {
  const int ep = ep_group.size(), me = ep_group.rank();
  MOE4D_CHECK_EQ(slots % ep, 0);
  MOE4D_CHECK(rank_node.empty() || int(rank_node.size()) == ep);
  // Dense node indices in order of first appearance, and each node's EP ranks in rank order.
  std::vector<int> ids;
  std::vector<std::vector<int>> members;
  node_index_.resize(size_t(ep));
  for (int r = 0; r < ep; ++r) {
    const int id = rank_node.empty() ? 0 : rank_node[size_t(r)];
    const auto it = std::find(ids.begin(), ids.end(), id);
    const int n = int(it - ids.begin());
    if (it == ids.end()) ids.push_back(id), members.emplace_back();
    members[size_t(n)].push_back(r);
    node_index_[size_t(r)] = n;
  }
  const std::vector<int>& mine = members[size_t(node_index_[size_t(me)])];
  const int local = int(std::find(mine.begin(), mine.end(), me) - mine.begin());
  for (const std::vector<int>& m : members) relay_.push_back(m[size_t(local) % m.size()]);
}

NodeRelayPlan HierarchicalExchange::plan(const RowRouting& source, Arena& memory, Backend& backend) const {
  const int ep = group_.size(), me = group_.rank(), T = source.tokens, k = source.k, S = slots_;
  const int nodes = int(relay_.size());
  NodeRelayPlan plan;
  plan.source_tokens = T;
  plan.send_rows = memory.alloc<size_t>(4 * size_t(ep));
  plan.send_first = plan.send_rows + ep;
  plan.recv_rows = plan.send_rows + 2 * ep;
  plan.recv_first = plan.send_rows + 3 * ep;

  // The node of each kept pick (-1: dropped), from the row's slot in the token layout.
  int* pick_node = memory.alloc_i32(size_t(T) * k);
  int* pick_slot = memory.alloc_i32(size_t(T) * k);
  for (int i = 0; i < T * k; ++i) {
    const int r = source.slot_row[i];
    pick_node[i] = pick_slot[i] = -1;
    if (r < 0) continue;
    const int s = int(std::upper_bound(source.slot_offsets, source.slot_offsets + S + 1, r) - source.slot_offsets) - 1;
    pick_slot[i] = s;
    pick_node[i] = node_index_[size_t(s / slots_per_rank_)];
  }
  // Rows per relay peer: one per (token, node hit).
  auto hits = [&](int t, int n) {
    for (int j = 0; j < k; ++j)
      if (pick_node[t * k + j] == n) return true;
    return false;
  };
  int* counts = memory.alloc_i32(ep);
  std::fill(counts, counts + ep, 0);
  for (int t = 0; t < T; ++t)
    for (int n = 0; n < nodes; ++n)
      if (hits(t, n)) ++counts[relay_[size_t(n)]];
  int* all_counts = memory.alloc_i32(size_t(ep) * ep);
  group_.all_gather(counts, all_counts, size_t(ep), DType::kI32);
  size_t sent = 0, received = 0;
  for (int p = 0; p < ep; ++p) {
    plan.send_first[p] = sent;
    plan.send_rows[p] = size_t(counts[p]);
    sent += plan.send_rows[p];
    plan.recv_first[p] = received;
    plan.recv_rows[p] = size_t(all_counts[p * ep + me]);
    received += plan.recv_rows[p];
    if (node_index_[size_t(p)] != node_index_[size_t(me)]) plan.remote_rows += counts[p];
  }
  plan.sent = int(sent);

  // The sent rows, by peer then token; with each its k pick slots (-1 for picks not on that node).
  plan.sent_token = memory.alloc_i32(sent);
  int* sent_slots = memory.alloc_i32(sent * k);
  size_t* fill = memory.alloc<size_t>(ep);
  std::copy(plan.send_first, plan.send_first + ep, fill);
  for (int t = 0; t < T; ++t) {
    for (int n = 0; n < nodes; ++n) {
      if (!hits(t, n)) continue;
      const size_t i = fill[relay_[size_t(n)]]++;
      plan.sent_token[i] = t;
      for (int j = 0; j < k; ++j) sent_slots[i * k + j] = pick_node[t * k + j] == n ? pick_slot[t * k + j] : -1;
    }
  }

  RowRouting& relay = plan.relay;
  relay.tokens = int(received);
  relay.k = k;
  int* slots = memory.alloc_i32(received * k);
  move(sent_slots, plan.send_rows, plan.send_first, slots, plan.recv_rows, plan.recv_first, k, DType::kI32, memory);
  relay.weights = memory.alloc_f32(received * k);
  {
    float* packed = memory.alloc_f32(sent * k);  // row i: the k pick weights of token sent_token[i]
    backend.moe_permute_forward(packed, source.weights, plan.sent_token, plan.sent, 1, k);
    move(packed, plan.send_rows, plan.send_first, relay.weights, plan.recv_rows, plan.recv_first, k, DType::kF32,
         memory);
  }

  // The relay's token layout by physical slot: picks of slot s in (source rank, token, pick) order.
  relay.slot_offsets = memory.alloc_i32(S + 1);
  std::fill(relay.slot_offsets, relay.slot_offsets + S + 1, 0);
  const int mine_node = node_index_[size_t(me)];
  for (size_t i = 0; i < received * k; ++i) {
    if (slots[i] < 0) continue;
    MOE4D_CHECK(slots[i] < S && node_index_[size_t(slots[i] / slots_per_rank_)] == mine_node);
    ++relay.slot_offsets[slots[i] + 1];
  }
  for (int s = 0; s < S; ++s) relay.slot_offsets[s + 1] += relay.slot_offsets[s];
  relay.rows = relay.slot_offsets[S];
  relay.row_slot = memory.alloc_i32(size_t(relay.rows));
  relay.slot_row = memory.alloc_i32(received * k);
  int* next = memory.alloc_i32(S);
  std::copy(relay.slot_offsets, relay.slot_offsets + S, next);
  for (size_t i = 0; i < received * k; ++i) {
    relay.slot_row[i] = -1;
    if (slots[i] < 0) continue;
    const int r = next[slots[i]]++;
    relay.row_slot[r] = int(i);
    relay.slot_row[i] = r;
  }
  return plan;
}

void HierarchicalExchange::move(const void* src, const size_t* send_rows, const size_t* send_first, void* dst,
                                const size_t* recv_rows, const size_t* recv_first, int width, DType dtype,
                                Arena& scratch) const {
  const int ep = group_.size();
  const size_t w = size_t(width);
  size_t* counts = scratch.alloc<size_t>(4 * size_t(ep));
  for (int p = 0; p < ep; ++p) {
    counts[p] = send_rows[p] * w;
    counts[ep + p] = send_first[p] * w;
    counts[2 * ep + p] = recv_rows[p] * w;
    counts[3 * ep + p] = recv_first[p] * w;
  }
  group_.all_to_all_v(src, counts, counts + ep, dst, counts + 2 * ep, counts + 3 * ep, dtype);
}

void HierarchicalExchange::scatter(const float* x, float* relayed, int width, const NodeRelayPlan& plan,
                                   Arena& scratch, Backend& backend) const {
  float* packed = scratch.alloc_f32(size_t(plan.sent) * width);
  backend.moe_permute_forward(packed, x, plan.sent_token, plan.sent, 1, width);
  move(packed, plan.send_rows, plan.send_first, relayed, plan.recv_rows, plan.recv_first, width, DType::kF32, scratch);
}

void HierarchicalExchange::gather_sum(const float* relayed, float* out, int width, const NodeRelayPlan& plan,
                                      Arena& scratch, Backend& backend) const {
  float* packed = scratch.alloc_f32(size_t(plan.sent) * width);
  move(relayed, plan.recv_rows, plan.recv_first, packed, plan.send_rows, plan.send_first, width, DType::kF32, scratch);
  backend.zero(out, sizeof(float) * size_t(plan.source_tokens) * width);
  backend.moe_permute_backward(out, packed, plan.sent_token, plan.sent, 1, width);
}

}  // namespace moe4d
