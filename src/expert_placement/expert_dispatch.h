// expert_placement/expert_dispatch.h — which copy of a replicated expert a source EP rank sends each
// of its rows to (docs/expert_replication.md §3): copies on the source's own node first, without
// changing the share of the expert's rows each copy is expected to get.
//
// The placement (expert_placement.h) balances the EP ranks assuming every copy of an expert with m
// copies gets 1/m of its rows. Sending each source's rows only to the copies on its node whenever it
// has one would break that as soon as an expert's copies are spread unevenly over the nodes (two
// copies on node A, one on node B: B's copy would get half the rows, A's a quarter each). So the
// split is a transport plan with that balance as its constraint and intra-node traffic as its goal,
// under the assumption that every EP rank sources the same share of each expert's rows (they are
// data replicas reading i.i.d. batches, so this holds in expectation):
//   supply of node n   S_n = ranks_n * m    (one unit = 1 / (ep * m) of the expert's rows)
//   demand of node n   D_n = copies_n * ep  (each copy wants ep units: 1 / m of the rows)
//   kept on node n     I_n = min(S_n, D_n); surplus S_n - I_n, deficit D_n - I_n.
// A source on node n sends the fraction I_n / S_n of its rows to its node's copies and the surplus
// to the nodes with a deficit, in proportion to it. Inside a node the rows are split evenly over its
// copies, copy j taking chunk (j - source) mod copies_n (different sources start at different copies,
// so small counts spread too). Every copy then expects exactly 1/m of the rows (what the placement
// assumed), and the rows that stay on their node are the most any split with that property keeps.
// On one node this is exactly the even split over all m copies.
//
// Pure integer arithmetic on the placement and the node map: every rank computes the same split,
// independent of timing, and a source needs nobody else's counts.
#pragma once

#include <cstdint>
#include <vector>

#include "expert_placement/expert_placement.h"

namespace moe4d {

class ExpertDispatch {
 public:
  // rank_node[r]: the node of EP rank r (any integers, equal = same node); empty: one node.
  ExpertDispatch(const ExpertPlacement& placement, std::vector<int> rank_node);

  // The n rows (in their order) of logical expert `expert` on EP rank `source`: rows
  // [range[2 i], range[2 i + 1]) go to its i-th copy (ExpertPlacement::slots_of order); the ranges
  // are disjoint and cover [0, n).
  void split(int expert, int source, int n, std::vector<int>& range) const;

  // Expected fraction of a source's rows of `expert` that go to a copy on another node.
  double remote_fraction(int expert, int source) const;
  int nodes() const { return nodes_; }

 private:
  struct ExpertRoutes {
    std::vector<int> copy_node;                  // [m] node of each copy, slots_of order
    std::vector<std::vector<int>> node_copies;   // [nodes] copy indices on each node, in order
    std::vector<std::vector<int64_t>> weight;    // [source node][node] share of the rows sent there
  };
  int ep_, nodes_ = 1;
  std::vector<int> rank_node_;  // [ep] compacted to 0 .. nodes - 1 (first appearance order)
  std::vector<ExpertRoutes> routes_;
};

}  // namespace moe4d
