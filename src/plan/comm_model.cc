// plan/comm_model.cc — alpha-beta collective costs per link tier (formulas in plan/comm_model.h).
#include "plan/comm_model.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace moe4d {

double ring_all_reduce_seconds(int n, double bytes, double latency, double bandwidth) {
  if (n <= 1) return 0;
  return 2.0 * (n - 1) * latency + 2.0 * (n - 1) / n * bytes / bandwidth;
}

double ring_gather_seconds(int n, double bytes, double latency, double bandwidth) {
  if (n <= 1) return 0;
  return (n - 1) * latency + static_cast<double>(n - 1) / n * bytes / bandwidth;
}

double all_to_all_seconds(int n, double bytes, double latency, double bandwidth) {
  if (n <= 1) return 0;
  return (n - 1) * latency + static_cast<double>(n - 1) / n * bytes / bandwidth;
}

double send_recv_seconds(double bytes, double latency, double bandwidth) { return latency + bytes / bandwidth; }

double scalar_all_reduce_seconds(const ClusterSpec& c, int ranks) {
  if (ranks <= 1) return 0;
  const int per_node = std::min(ranks, c.devices_per_node);
  const int nodes = (ranks + per_node - 1) / per_node;
  return 2 * (std::ceil(std::log2(nodes)) * c.inter.latency + std::ceil(std::log2(per_node)) * c.intra.latency);
}

double straggler_factor(double sigma, int ranks) {
  if (sigma <= 0 || ranks <= 1) return 1;
  return 1 + sigma * std::sqrt(2 * std::log(static_cast<double>(ranks)));
}

double intra_node_bandwidth(const ClusterSpec& cluster, int n) {
  if (cluster.intra.kind == LinkKind::kFullMesh) return cluster.intra.bandwidth * std::max(1, n - 1);
  return cluster.intra.bandwidth;
}

double bus_factor(Collective collective, int n) {
  if (n <= 1) return 0;
  switch (collective) {
    case Collective::kAllReduce: return 2.0 * (n - 1) / n;
    case Collective::kReduceScatter:
    case Collective::kAllGather:
    case Collective::kAllToAll: return static_cast<double>(n - 1) / n;
    case Collective::kSendRecv: return 1;
  }
  return 1;
}

namespace {

// The regime of group size `ranks` that holds for `bytes`: the last with min_bytes <= bytes (the
// first when bytes is below them all). `begin` is the first sample of that group size.
const CollectiveSample& regime(const std::vector<CollectiveSample>& table, size_t begin, double bytes) {
  size_t pick = begin;
  for (size_t i = begin; i < table.size() && table[i].ranks == table[begin].ranks; ++i)
    if (table[i].min_bytes <= bytes) pick = i;
  return table[pick];
}

// Measured time at group size n: each neighbouring measured group size's regime for `bytes`, latency
// and bus bandwidth interpolated linearly in n between them (clamped at the ends of the table).
double measured_seconds(const std::vector<CollectiveSample>& table, Collective collective, int n, double bytes) {
  size_t lo = 0, hi = 0;  // first samples of the bracketing group sizes
  for (size_t i = 0; i < table.size(); ++i) {
    if (i > 0 && table[i].ranks == table[i - 1].ranks) continue;
    if (table[i].ranks <= n) lo = hi = i;
    if (table[i].ranks >= n) {
      hi = i;
      break;
    }
  }
  if (n <= table.front().ranks) lo = hi = 0;
  const CollectiveSample& a = regime(table, lo, bytes);
  const CollectiveSample& b = regime(table, hi, bytes);
  double w = 0;
  if (b.ranks != a.ranks) w = static_cast<double>(n - a.ranks) / (b.ranks - a.ranks);
  const double latency = a.latency + w * (b.latency - a.latency);
  const double bus = a.bus_bandwidth + w * (b.bus_bandwidth - a.bus_bandwidth);
  return latency + bus_factor(collective, n) * bytes / bus;
}

const std::vector<CollectiveSample>& table(const ClusterSpec& c, LinkTier tier, Collective coll) {
  return c.measured[static_cast<int>(tier)][static_cast<int>(coll)];
}

// One tier, one flat collective of n ranks.
double flat_seconds(const ClusterSpec& c, LinkTier tier, Collective coll, int n, double bytes) {
  if (n <= 1) return 0;
  const auto& measured = table(c, tier, coll);
  if (!measured.empty()) return measured_seconds(measured, coll, n, bytes);
  const bool intra = tier == LinkTier::kIntraNode;
  const double latency = intra ? c.intra.latency : c.inter.latency;
  const double bandwidth = intra ? intra_node_bandwidth(c, n) : c.inter.nic_bandwidth;
  switch (coll) {
    case Collective::kAllReduce: return ring_all_reduce_seconds(n, bytes, latency, bandwidth);
    case Collective::kReduceScatter:
    case Collective::kAllGather: return ring_gather_seconds(n, bytes, latency, bandwidth);
    case Collective::kAllToAll: return all_to_all_seconds(n, bytes, latency, bandwidth);
    case Collective::kSendRecv: return send_recv_seconds(bytes, latency, bandwidth);
  }
  return 0;
}

}  // namespace

double collective_seconds(const ClusterSpec& c, Collective coll, const GroupSpan& group, double bytes) {
  const int n = group.size;
  if (coll != Collective::kSendRecv && n <= 1) return 0;
  if (!group.crosses_nodes()) return flat_seconds(c, LinkTier::kIntraNode, coll, std::max(n, 2), bytes);
  const int g = std::max(1, group.per_node);
  const int nodes = group.nodes;
  const double flat = flat_seconds(c, LinkTier::kInterNode, coll, n, bytes);
  switch (coll) {
    case Collective::kAllReduce: {
      if (g == 1) return flat;
      const double hier = flat_seconds(c, LinkTier::kIntraNode, Collective::kReduceScatter, g, bytes) +
                          flat_seconds(c, LinkTier::kInterNode, Collective::kAllReduce, nodes, bytes / g) +
                          flat_seconds(c, LinkTier::kIntraNode, Collective::kAllGather, g, bytes);
      return std::min(flat, hier);
    }
    case Collective::kReduceScatter:
    case Collective::kAllGather: {
      if (g == 1) return flat;
      const double two_level = flat_seconds(c, LinkTier::kIntraNode, coll, g, bytes) +
                               flat_seconds(c, LinkTier::kInterNode, coll, nodes, bytes / g);
      return std::min(flat, two_level);
    }
    case Collective::kAllToAll: {
      if (!table(c, LinkTier::kInterNode, coll).empty()) return flat;
      const double latency = (n - 1) * c.inter.latency;
      const double intra = g > 1 ? bytes * (g - 1) / n / intra_node_bandwidth(c, g) : 0;
      const double inter = bytes * static_cast<double>(n - g) / n / c.inter.nic_bandwidth;
      return latency + std::max(intra, inter);
    }
    case Collective::kSendRecv: return flat;
  }
  return flat;
}

// Group-limited routing's reach (formulas in plan/comm_model.h).
RoutedNodes routed_nodes_per_token(int top_k, int num_groups, int group_topk, int ep_nodes) {
  const int n = std::max(1, ep_nodes);
  // Expected distinct nodes hit by k uniform picks over `eligible` nodes (with replacement).
  auto spread = [&](int eligible) { return eligible * (1 - std::pow(1 - 1.0 / eligible, top_k)); };
  double distinct = spread(n);
  int most = std::min(top_k, n);
  if (num_groups > 1 && num_groups % n == 0) {
    // Whole groups per node: the token's min(group_topk, k) groups on distinct nodes out of n.
    const int g = num_groups, per_node = g / n, m = std::min(group_topk, top_k);
    double none_on_node = 1;  // P(a given node holds none of the m groups) = C(g - per_node, m) / C(g, m)
    for (int i = 0; i < m; ++i) none_on_node *= std::max(0.0, double(g - per_node - i) / (g - i));
    distinct = n * (1 - none_on_node);
    most = std::min(most, m);
  } else if (num_groups > 1 && n % num_groups == 0) {
    // A group spans n / num_groups nodes: the picks spread over group_topk of those spans.
    const int eligible = group_topk * (n / num_groups);
    distinct = spread(eligible);
    most = std::min(most, eligible);
  }
  return {most, distinct * (n - 1) / n};
}

double expected_remote_nodes(int experts, int top_k, int nodes) {
  if (nodes <= 1) return 0;
  const int elsewhere = experts - experts / nodes;
  // C(elsewhere, k) / C(E, k) = prod_{i<k} (elsewhere - i) / (E - i), 0 once k > elsewhere.
  double miss = 1;
  for (int i = 0; i < top_k; ++i) miss *= std::max(0, elsewhere - i) / double(experts - i);
  return (nodes - 1) * (1 - miss);
}

double hierarchical_pair_bytes(int hidden, int top_k, double value_bytes) {
  return 4.0 * hidden * value_bytes + 3.0 * top_k * 4;
}

}  // namespace moe4d
