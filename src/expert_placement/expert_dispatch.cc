// expert_placement/expert_dispatch.cc — the node-preferring, balance-preserving split of a source's
// rows over an expert's copies (see the header for the transport plan).
#include "expert_placement/expert_dispatch.h"

#include <algorithm>

#include "core/check.h"

namespace moe4d {

ExpertDispatch::ExpertDispatch(const ExpertPlacement& placement, std::vector<int> rank_node) : ep_(placement.ep) {
  if (rank_node.empty()) rank_node.assign(ep_, 0);
  MOE4D_CHECK_EQ(rank_node.size(), size_t(ep_));
  std::vector<int> ids;  // original node id of each compacted node
  rank_node_.resize(ep_);
  for (int r = 0; r < ep_; ++r) {
    auto it = std::find(ids.begin(), ids.end(), rank_node[r]);
    if (it == ids.end()) it = ids.insert(ids.end(), rank_node[r]);
    rank_node_[r] = int(it - ids.begin());
  }
  nodes_ = int(ids.size());
  std::vector<int64_t> ranks(nodes_, 0);
  for (int r = 0; r < ep_; ++r) ++ranks[rank_node_[r]];

  routes_.resize(placement.experts);
  for (int e = 0; e < placement.experts; ++e) {
    ExpertRoutes& route = routes_[e];
    const std::vector<int> slots = placement.slots_of(e);
    const int64_t m = int64_t(slots.size());
    route.node_copies.assign(nodes_, {});
    for (size_t i = 0; i < slots.size(); ++i) {
      const int node = rank_node_[placement.rank_of_slot(slots[i])];
      route.copy_node.push_back(node);
      route.node_copies[node].push_back(int(i));
    }
    // Units of 1 / (ep m) of the expert's rows: supply, demand, what stays, surplus and deficit.
    std::vector<int64_t> kept(nodes_), surplus(nodes_), deficit(nodes_);
    int64_t total_deficit = 0;
    for (int n = 0; n < nodes_; ++n) {
      const int64_t supply = ranks[n] * m, demand = int64_t(route.node_copies[n].size()) * ep_;
      kept[n] = std::min(supply, demand);
      surplus[n] = supply - kept[n];
      deficit[n] = demand - kept[n];
      total_deficit += deficit[n];
    }
    route.weight.assign(nodes_, std::vector<int64_t>(nodes_, 0));
    for (int n = 0; n < nodes_; ++n) {
      if (surplus[n] == 0) {  // everything this node's sources have stays on it
        route.weight[n][n] = 1;
        continue;
      }
      // Per source (the common factor 1 / (ranks_n total_deficit) dropped): kept, then the surplus
      // spread over the nodes short of rows in proportion to their deficit.
      route.weight[n][n] = kept[n] * total_deficit;
      for (int k = 0; k < nodes_; ++k)
        if (k != n) route.weight[n][k] = surplus[n] * deficit[k];
    }
  }
}

void ExpertDispatch::split(int expert, int source, int n, std::vector<int>& range) const {
  const ExpertRoutes& route = routes_[expert];
  const std::vector<int64_t>& w = route.weight[rank_node_[source]];
  const int m = int(route.copy_node.size());
  range.assign(2 * size_t(m), 0);
  int64_t total = 0;
  for (int64_t x : w) total += x;
  int64_t before = 0, assigned = 0;
  for (int k = 0; k < nodes_; ++k) {
    const int64_t begin = n * before / total;
    before += w[k];
    const int64_t q = n * before / total - begin;  // this node's chunk [begin, begin + q)
    const std::vector<int>& copies = route.node_copies[k];
    const int L = int(copies.size());
    if (q == 0 || L == 0) continue;
    for (int j = 0; j < L; ++j) {
      const int c = ((j - source) % L + L) % L;
      range[2 * size_t(copies[j])] = int(begin + q * c / L);
      range[2 * size_t(copies[j]) + 1] = int(begin + q * (c + 1) / L);
    }
    assigned += q;
  }
  MOE4D_CHECK_EQ(assigned, n);
}

double ExpertDispatch::remote_fraction(int expert, int source) const {
  const ExpertRoutes& route = routes_[expert];
  const int node = rank_node_[source];
  const std::vector<int64_t>& w = route.weight[node];
  int64_t total = 0;
  for (int64_t x : w) total += x;
  return total > 0 ? 1.0 - double(w[node]) / double(total) : 0.0;
}

}  // namespace moe4d
