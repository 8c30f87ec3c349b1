// plan/placement.cc — node spans of the groups of a layout.
#include "plan/placement.h"

#include <algorithm>
#include <map>

#include "parallel/rank_grid.h"

namespace moe4d {
namespace {

int position_in_order(const RankOrder& order, ParallelDim dim) {
  for (int i = 0; i < 4; ++i)
    if (order[i] == dim) return i;
  return -1;
}

std::string order_text(const Layout& layout) { return rank_order_string(layout.order); }

// The span of groups that are an arithmetic progression (stride s, n members) when the blocks of
// s * n ranks tile the nodes regularly; false when they do not.
bool regular_span(int stride, int n, int ranks_per_node, GroupSpan* out) {
  const int r = ranks_per_node;
  const long long block = static_cast<long long>(stride) * n;
  out->size = n;
  if (n == 1) {
    *out = GroupSpan{1, 1, 1};
    return true;
  }
  if (block <= r && r % block == 0) {
    *out = GroupSpan{n, 1, n};
    return true;
  }
  if (stride % r == 0) {
    *out = GroupSpan{n, n, 1};
    return true;
  }
  if (r % stride == 0 && block % r == 0) {
    *out = GroupSpan{n, static_cast<int>(block / r), r / stride};
    return true;
  }
  return false;
}

// Worst span over every group along `dims`, by walking the groups: O(world) integer work and no
// allocation beyond one counter per node. Ranks follow RankGrid's numbering (see the header).
GroupSpan span_by_walking(const Layout& layout, std::initializer_list<ParallelDim> dims, int ranks_per_node) {
  int stride[4];  // indexed by ParallelDim
  int size = 1;
  for (ParallelDim dim : layout.order) {
    stride[static_cast<int>(dim)] = size;
    size *= layout.size(dim);
  }
  const int world = size;
  bool in_group[4] = {false, false, false, false};
  int n = 1;
  for (ParallelDim dim : dims) {
    in_group[static_cast<int>(dim)] = true;
    n *= layout.size(dim);
  }
  // Offsets of the members relative to the group's first rank.
  std::vector<int> offsets(1, 0);
  for (ParallelDim dim : dims) {
    const int count = layout.size(dim);
    const size_t before = offsets.size();
    for (int c = 1; c < count; ++c)
      for (size_t i = 0; i < before; ++i) offsets.push_back(offsets[i] + c * stride[static_cast<int>(dim)]);
  }
  const int nodes_total = (world + ranks_per_node - 1) / ranks_per_node;
  std::vector<int> count(nodes_total, 0);
  GroupSpan worst{n, 1, n};
  bool first = true;
  // The groups' first ranks (coordinate 0 along every dimension of the group), enumerated directly over
  // the coordinates of the other dimensions: world / n of them, no per-rank test. A dimension whose
  // stride is a multiple of ranks_per_node only moves a group by whole nodes (the same span), so its
  // coordinate 0 stands for all of them.
  int others[4];
  int n_others = 0;
  for (int d = 0; d < 4; ++d)
    if (!in_group[d] && layout.size(static_cast<ParallelDim>(d)) > 1 && stride[d] % ranks_per_node != 0)
      others[n_others++] = d;
  int coord[4] = {0, 0, 0, 0};
  for (bool more = true; more;) {
    int base = 0;
    for (int i = 0; i < n_others; ++i) base += coord[i] * stride[others[i]];
    int next = 0;  // odometer over the other dimensions' coordinates
    while (next < n_others && ++coord[next] == layout.size(static_cast<ParallelDim>(others[next]))) coord[next++] = 0;
    more = next < n_others;
    int nodes = 0;
    for (int off : offsets)
      if (count[(base + off) / ranks_per_node]++ == 0) ++nodes;
    int fewest = n;
    for (int off : offsets) {
      int& c = count[(base + off) / ranks_per_node];
      if (c > 0) fewest = std::min(fewest, c);
    }
    for (int off : offsets) count[(base + off) / ranks_per_node] = 0;
    if (first || nodes > worst.nodes || (nodes == worst.nodes && fewest < worst.per_node)) {
      worst = GroupSpan{n, nodes, fewest};
      first = false;
    }
  }
  return worst;
}

GroupSpan span_of(const Layout& layout, std::initializer_list<ParallelDim> dims, int ranks_per_node) {
  // Positions of `dims` in the order; the group is an arithmetic progression when they are adjacent.
  int lo = 4;
  int hi = -1;
  int n = 1;
  for (ParallelDim dim : dims) {
    const int pos = position_in_order(layout.order, dim);
    lo = std::min(lo, pos);
    hi = std::max(hi, pos);
    n *= layout.size(dim);
  }
  if (n == 1) return GroupSpan{1, 1, 1};
  // Dimensions of size 1 between them do not break the progression.
  int covered = 1;
  for (int i = lo; i <= hi; ++i) covered *= layout.size(layout.order[i]);
  if (covered == n) {
    int stride = 1;
    for (int i = 0; i < lo; ++i) stride *= layout.size(layout.order[i]);
    GroupSpan span;
    if (regular_span(stride, n, ranks_per_node, &span)) return span;
  }
  return span_by_walking(layout, dims, ranks_per_node);
}

}  // namespace

namespace {

// The worst span among `groups` (most nodes, then fewest ranks per node).
GroupSpan worst_span(const std::vector<std::vector<int>>& groups, int ranks_per_node) {
  GroupSpan worst{1, 1, 1};
  bool first = true;
  for (const std::vector<int>& group : groups) {
    std::map<int, int> per_node;
    for (int rank : group) ++per_node[RankGrid::node_of(rank, ranks_per_node)];
    int fewest = static_cast<int>(group.size());
    for (const auto& entry : per_node) fewest = std::min(fewest, entry.second);
    const int nodes = static_cast<int>(per_node.size());
    if (first || nodes > worst.nodes || (nodes == worst.nodes && fewest < worst.per_node)) {
      worst = GroupSpan{static_cast<int>(group.size()), nodes, fewest};
      first = false;
    }
  }
  return worst;
}

RankGrid grid_of(const Layout& layout) {
  return RankGrid(layout.dp, layout.ep, layout.tp, layout.pp, order_text(layout), {}, layout.cp);
}

}  // namespace

GroupSpan group_span_by_grid(const Layout& layout, std::initializer_list<ParallelDim> dims, int ranks_per_node) {
  return worst_span(grid_of(layout).groups(dims), ranks_per_node);
}

Placement compute_placement(const Layout& layout, int ranks_per_node) {
  Placement p;
  p.ranks_per_node = ranks_per_node;
  p.tp = span_of(layout, {ParallelDim::kTP}, ranks_per_node);
  p.ep = span_of(layout, {ParallelDim::kEP}, ranks_per_node);
  p.dp = span_of(layout, {ParallelDim::kDP}, ranks_per_node);
  p.data = span_of(layout, {ParallelDim::kDP, ParallelDim::kEP}, ranks_per_node);
  p.pp = span_of(layout, {ParallelDim::kPP}, ranks_per_node);
  // Some pair of neighbouring stages sits on two nodes exactly when a pipeline group spans nodes.
  p.pp_hop = GroupSpan{2, p.pp.crosses_nodes() ? 2 : 1, 1};
  // CP groups are consecutive data replicas, not a grid dimension: walked (only when cp > 1).
  if (layout.cp > 1) p.cp = worst_span(grid_of(layout).cp_groups(), ranks_per_node);
  return p;
}

std::string describe_placement(const Layout& layout, int ranks_per_node) {
  return grid_of(layout).describe(ranks_per_node);
}

}  // namespace moe4d
