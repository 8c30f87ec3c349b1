// plan/placement.h — where the groups of a layout land: which groups cross node boundaries.
//
// Ranks are laid out as RankGrid does (parallel/rank_grid.h): the first dimension of the rank order
// varies fastest and node i holds ranks [i * ranks_per_node, (i + 1) * ranks_per_node). For every
// dimension the planner needs the worst group (most nodes, fewest ranks per node), because all
// groups of a dimension communicate at the same time and the step waits for the slowest.
//
// compute_placement answers in closed form when the groups tile the nodes regularly (always the case
// for power-of-two sizes) and otherwise walks the ranks in RankGrid's numbering; tests check both
// against RankGrid's own groups (group_span_by_grid), which is too slow for the search's inner loop.
#pragma once

#include <string>

#include "plan/comm_model.h"
#include "plan/layout.h"

namespace moe4d {

struct Placement {
  int ranks_per_node = 1;
  GroupSpan tp;
  GroupSpan ep;
  GroupSpan dp;
  GroupSpan data;  // dp x ep: the gradient group of dense parameters
  GroupSpan pp;
  GroupSpan pp_hop;  // two neighbouring pipeline stages (2 ranks, 1 or 2 nodes)
  GroupSpan cp{1, 1, 1};  // context parallel: cp consecutive data replicas (parallel/rank_grid.h)
};

Placement compute_placement(const Layout& layout, int ranks_per_node);

// Worst span over all groups of `dims`, by walking the groups of a RankGrid (the reference for
// compute_placement's arithmetic).
GroupSpan group_span_by_grid(const Layout& layout, std::initializer_list<ParallelDim> dims, int ranks_per_node);

// RankGrid::describe for the layout: the node -> ranks -> coordinates map and each dimension's groups.
std::string describe_placement(const Layout& layout, int ranks_per_node);

}  // namespace moe4d
