// bench/moe/dispatch_bytes.h — inter-node bytes of one micro-batch's expert exchange (forward and
// backward moves), flat (ExpertExchange) vs node-aware (HierarchicalExchange + ExpertExchange inside
// the node), on uniform random top-k routing. Shared by dispatch_bytes_bench (JSON) and
// tests/moe/dispatch_bytes_test (assertions).
//
// Every rank routes `tokens` tokens, each to k distinct experts drawn uniformly (dropless), with
// random positive weights. The "experts" scale their rows by 1 + expert / 8, so that the forward
// output of both exchanges, out[t] = sum_j w_j (1 + e_j / 8) x[t], can be compared. The backward moves
// are run as the MoE block runs them (flat: dispatch + combine of [rows, d]; node-aware: the output
// gradient out, the intra-node dispatch + combine, the weight and input gradients back), on the same
// buffers: only their bytes matter here. Bytes are this rank's sends to ranks on other nodes
// (CommStats::Entry::bytes_inter_node of the EP group's all_to_all_v).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "backend/cpu_backend.h"
#include "comm/communicator.h"
#include "core/arena.h"
#include "core/rng.h"
#include "model/expert_exchange.h"
#include "model/hierarchical_exchange.h"

namespace moe4d::bench {

struct DispatchBytes {
  int64_t flat_inter = 0;     // bytes this rank sent to other nodes, flat exchange
  int64_t hier_inter = 0;     // the same, node-aware exchange
  int64_t remote_pairs = 0;   // (token, other node) pairs of this rank's routing
  int64_t remote_copies = 0;  // this rank's routed copies to experts on other nodes
  double max_diff = 0;        // forward output, node-aware vs flat: max abs difference / max abs value
};

namespace detail {

inline int64_t inter_bytes(Communicator& ep) { return ep.stats()[CommOp::kAllToAllV].bytes_inter_node; }

// rows [rows, d] of the expert layout, local expert e at [offsets[e], offsets[e + 1]), scaled in place.
inline void run_experts(float* rows, const int* offsets, int local_experts, int first_expert, int d) {
  for (int e = 0; e < local_experts; ++e)
    for (int64_t i = int64_t(offsets[e]) * d; i < int64_t(offsets[e + 1]) * d; ++i)
      rows[i] *= 1.0f + float(first_expert + e) / 8.0f;
}

// The flat exchange's moves of a micro-batch on `route`: returns the combined rows [route.rows, d].
inline std::vector<float> exchange_rows(Communicator& ep, int experts, const int* slot_offsets, const float* xp,
                                        int rows, int d, Arena& arena) {
  CpuBackend& backend = thread_cpu_backend();
  ExpertExchange exchange(ep, experts, 1);
  const ExpertExchangePlan plan = exchange.plan(slot_offsets, arena);
  std::vector<float> xr(size_t(plan.recv_rows) * d), y(size_t(rows) * d);
  exchange.dispatch(xp, xr.data(), d, plan, arena, &backend);
  run_experts(xr.data(), plan.expert_offsets, plan.local_experts, ep.rank() * plan.local_experts, d);
  exchange.combine(xr.data(), y.data(), d, plan, arena, &backend);
  // Backward's moves (the output gradients in, the input gradients out), on other buffers: same sizes.
  std::vector<float> g(xr.size()), back(y.size());
  exchange.dispatch(y.data(), g.data(), d, plan, arena, &backend);
  exchange.combine(g.data(), back.data(), d, plan, arena, &backend);
  return y;
}

}  // namespace detail

// Collective over `ep`. rank_node: the node of each EP rank.
inline DispatchBytes measure_dispatch_bytes(Communicator& ep, const std::vector<int>& rank_node, int experts, int k,
                                            int tokens, int d, uint64_t seed) {
  const int me = ep.rank(), T = tokens, E = experts;
  const int per_rank = E / ep.size();
  CpuBackend& backend = thread_cpu_backend();
  Arena arena;
  // Uniform top-k: a partial Fisher-Yates shuffle per token.
  std::vector<int> idx(size_t(T) * k), order(static_cast<size_t>(E));
  std::vector<float> w(size_t(T) * k), x(size_t(T) * d);
  CounterRng rng(hash_combine(seed, uint64_t(me)));
  for (int t = 0; t < T; ++t) {
    for (int e = 0; e < E; ++e) order[size_t(e)] = e;
    for (int j = 0; j < k; ++j) {
      const int pick = j + int(rng.next_u64() % uint64_t(E - j));
      std::swap(order[size_t(j)], order[size_t(pick)]);
      idx[size_t(t) * k + j] = order[size_t(j)];
      w[size_t(t) * k + j] = float(0.1 + rng.next_uniform());
    }
  }
  for (size_t i = 0; i < x.size(); ++i) x[i] = normal_at(hash_combine(seed + 1, uint64_t(me)), i);

  DispatchBytes out;
  for (int t = 0; t < T; ++t) {
    std::vector<int> hit;
    for (int j = 0; j < k; ++j) {
      const int node = rank_node[size_t(idx[size_t(t) * k + j] / per_rank)];
      if (node == rank_node[size_t(me)]) continue;
      ++out.remote_copies;
      if (std::find(hit.begin(), hit.end(), node) == hit.end()) hit.push_back(node);
    }
    out.remote_pairs += int64_t(hit.size());
  }

  std::vector<int> offsets(size_t(E) + 1), row_slot(size_t(T) * k), slot_row(size_t(T) * k), scratch(size_t(T) * k);
  const int rows = backend.moe_route_plan(offsets.data(), row_slot.data(), slot_row.data(), scratch.data(), idx.data(),
                                          w.data(), T, E, k, -1);
  std::vector<float> xp(size_t(rows) * d), flat(size_t(T) * d), hier(size_t(T) * d);

  // Flat.
  int64_t before = detail::inter_bytes(ep);
  backend.moe_permute_forward(xp.data(), x.data(), row_slot.data(), rows, k, d);
  std::vector<float> y = detail::exchange_rows(ep, E, offsets.data(), xp.data(), rows, d, arena);
  backend.moe_unpermute_forward(flat.data(), y.data(), slot_row.data(), w.data(), T, k, d);
  out.flat_inter = detail::inter_bytes(ep) - before;

  // Node-aware.
  before = detail::inter_bytes(ep);
  HierarchicalExchange relays(ep, rank_node, E);
  const RowRouting source{.tokens = T, .k = k, .rows = rows, .row_slot = row_slot.data(), .slot_row = slot_row.data(),
                          .weights = w.data(), .slot_offsets = offsets.data()};
  const NodeRelayPlan plan = relays.plan(source, arena, backend);
  const RowRouting& relay = plan.relay;
  std::vector<float> xu(size_t(relay.tokens) * d), xpu(size_t(relay.rows) * d), sums(size_t(relay.tokens) * d);
  relays.scatter(x.data(), xu.data(), d, plan, arena, backend);
  backend.moe_permute_forward(xpu.data(), xu.data(), relay.row_slot, relay.rows, k, d);
  std::vector<float> yu = detail::exchange_rows(ep, E, relay.slot_offsets, xpu.data(), relay.rows, d, arena);
  backend.moe_unpermute_forward(sums.data(), yu.data(), relay.slot_row, relay.weights, relay.tokens, k, d);
  relays.gather_sum(sums.data(), hier.data(), d, plan, arena, backend);
  // Backward's stage-1 moves: the output gradient out, the weight and input gradients back.
  std::vector<float> dw(size_t(T) * k), dwu(size_t(relay.tokens) * k, 0.0f), dx(size_t(T) * d);
  relays.scatter(hier.data(), xu.data(), d, plan, arena, backend);
  relays.gather_sum(dwu.data(), dw.data(), k, plan, arena, backend);
  relays.gather_sum(sums.data(), dx.data(), d, plan, arena, backend);
  out.hier_inter = detail::inter_bytes(ep) - before;

  double scale = 0;
  for (size_t i = 0; i < flat.size(); ++i) {
    out.max_diff = std::max(out.max_diff, double(std::fabs(flat[i] - hier[i])));
    scale = std::max(scale, double(std::fabs(flat[i])));
  }
  if (scale > 0) out.max_diff /= scale;
  return out;
}

}  // namespace moe4d::bench
