// parallel/rank_grid.h — the single source of topology: world = DP x EP x TP x PP.
//
// Every process group in moe4d is cut from one RankGrid (picotron's `arange(world).view(...)`):
// a grid position is a coordinate (dp, ep, tp, pp); positions are numbered with the first
// dimension of `order` varying fastest (default "tp-ep-dp-pp", Megatron's order, so with 8 ranks
// per node TP4 groups are {0-3}, {4-7}); position i runs on world rank device_list[i] (identity
// when no device list is given). Pure arithmetic: no MPI, testable anywhere. Immutable, thread-safe.
//
// Two grids over the ranks of a stage (docs/config.md): the MoE grid dp x ep x tp (experts over EP,
// their gradients over DP), and the dense grid tp x cp x DP_dense. Context parallelism is carved out
// of the data replicas: replica index dp * EP + ep (EP fastest), CP rank = replica % cp, dense
// replica = replica / cp, so a CP group is cp consecutive replicas of the same (tp, pp), and the
// DP x EP group is the dense grid's DP_dense x CP (where the dense gradients are reduced).
#pragma once

#include <initializer_list>
#include <string>
#include <vector>

namespace moe4d {

enum class ParallelDim { kTP, kEP, kDP, kPP };
const char* parallel_dim_name(ParallelDim dim);  // "tp", "ep", "dp", "pp"

struct GridCoord {
  int dp = 0;
  int ep = 0;
  int tp = 0;
  int pp = 0;
  int get(ParallelDim dim) const;
  void set(ParallelDim dim, int value);
  bool operator==(const GridCoord&) const = default;
};

class RankGrid {
 public:
  // Throws moe4d::Error for a non-positive size, an order string that is not a permutation of
  // tp/ep/dp/pp, or a device list that is not a permutation of [0, world_size).
  // ... and a context-parallel size cp that does not divide dp x ep.
  RankGrid(int dp, int ep, int tp, int pp, const std::string& order = "tp-ep-dp-pp", std::vector<int> device_list = {},
           int cp = 1);

  int world_size() const { return world_size_; }
  int size(ParallelDim dim) const;
  const std::string& order() const { return order_string_; }

  GridCoord coord(int rank) const;
  int rank(const GridCoord& coord) const;

  // World ranks of `rank`'s group along `dims` (all other coordinates fixed), ordered by the group's
  // own coordinates with the first listed dim varying fastest. group(r, {kTP}) is r's TP group.
  std::vector<int> group(int rank, std::initializer_list<ParallelDim> dims) const;
  // Position of `rank` inside group(rank, dims).
  int group_rank(int rank, std::initializer_list<ParallelDim> dims) const;
  // Every group along `dims` (a partition of the world), ordered by their smallest member.
  std::vector<std::vector<int>> groups(std::initializer_list<ParallelDim> dims) const;

  // Context parallelism (the dense grid): cp size, the data replica of a rank (dp * EP + ep), its
  // CP rank and dense replica; its CP group (ordered by CP rank) and its dense data-parallel group
  // (the ranks of the same CP rank in the other dense replicas, ordered by dense replica).
  int context_parallel() const { return cp_; }
  int data_replica(int rank) const;
  int cp_rank(int rank) const { return data_replica(rank) % cp_; }
  int dense_replica(int rank) const { return data_replica(rank) / cp_; }
  std::vector<int> cp_group(int rank) const;
  std::vector<int> dense_dp_group(int rank) const;
  // Every CP group (a partition of the world), ordered by their smallest member.
  std::vector<std::vector<int>> cp_groups() const;

  // Nodes hold `ranks_per_node` consecutive world ranks.
  static int node_of(int rank, int ranks_per_node) { return rank / ranks_per_node; }
  static bool spans_nodes(const std::vector<int>& group, int ranks_per_node);

  // Human-readable placement map: for each node, its ranks and their (dp, ep, tp, pp) coordinates,
  // and the groups of each dimension.
  std::string describe(int ranks_per_node) const;

 private:
  int sizes_[4];                 // indexed by ParallelDim
  ParallelDim order_[4];         // fastest first
  std::string order_string_;
  std::vector<int> device_list_;  // position -> world rank
  std::vector<int> position_of_;  // world rank -> position
  int world_size_ = 0;
  int cp_ = 1;
  // The ranks of `rank`'s (tp, pp) whose data replica is first + i * stride, i < count.
  std::vector<int> replicas(int rank, int first, int stride, int count) const;
};

}  // namespace moe4d
