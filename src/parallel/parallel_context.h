// parallel/parallel_context.h — this rank's place in the grid and one communicator per group.
//
// Built once at start-up from the world communicator and the parallel config; passed by reference to
// everything that communicates (no global process-group manager). Groups:
//   tp     — tensor parallel (activations all-reduced inside TP blocks)
//   ep     — expert parallel (token all-to-all)
//   dp     — data parallel among ranks holding the same experts (expert gradient sync)
//   dp_ep  — DP x EP: replicas of the dense parameters (dense gradient sync)
//   cp     — context parallel (parallel/rank_grid.h): the ranks holding chunks of the same sequences;
//            K/V all-gather in attention, the MoE router's statistics. dp_ep is DP_dense x CP.
//   pp     — pipeline stages (activation send/recv)
//   embed  — first and last pipeline stage of the same (dp, ep, tp) — tied-embedding gradient sync;
//            null when pipeline_parallel == 1 or this rank is on neither end
//   world  — everyone (global reductions: loss, norms, overflow flags)
// dp_sync / dp_ep_sync all-reduce over dp / dp_ep and are hierarchical (parallel/hierarchical_all_reduce.h)
// when the group has the same number (> 1) of members on each of several nodes; flat otherwise.
#pragma once

#include <memory>

#include "comm/communicator.h"
#include "parallel/hierarchical_all_reduce.h"
#include "parallel/rank_grid.h"

namespace moe4d {

struct ParallelConfig;

struct ParallelContext {
  RankGrid grid;
  int rank = 0;            // world rank
  GridCoord coord;         // grid coordinate of this rank
  int ranks_per_node = 1;  // for node-aware placement and hierarchical reductions

  std::unique_ptr<Communicator> world;
  std::unique_ptr<Communicator> tp;
  std::unique_ptr<Communicator> ep;
  std::unique_ptr<Communicator> dp;
  std::unique_ptr<Communicator> dp_ep;
  std::unique_ptr<Communicator> pp;
  std::unique_ptr<Communicator> cp;
  std::unique_ptr<Communicator> embed;
  // After the groups they reduce over (destroyed first).
  std::unique_ptr<HierarchicalAllReduce> dp_sync;
  std::unique_ptr<HierarchicalAllReduce> dp_ep_sync;

  int tp_size() const { return grid.size(ParallelDim::kTP); }
  int ep_size() const { return grid.size(ParallelDim::kEP); }
  int dp_size() const { return grid.size(ParallelDim::kDP); }
  int pp_size() const { return grid.size(ParallelDim::kPP); }
  bool is_first_stage() const { return coord.pp == 0; }
  bool is_last_stage() const { return coord.pp == pp_size() - 1; }
  // Index of this rank's data replica among the DP x EP replicas (which slice of the batch it reads).
  int data_replica() const { return coord.dp * ep_size() + coord.ep; }
  int cp_size() const { return grid.context_parallel(); }
  int cp_rank() const { return data_replica() % cp_size(); }
  // Index of this rank's dense replica (which sequences it reads; its CP group reads the same).
  int dense_replica() const { return data_replica() / cp_size(); }
};

// Cuts every group from the grid with world->split (collective over `world`). ranks_per_node <= 0
// means: detect from the communicator's node layout.
std::unique_ptr<ParallelContext> make_parallel_context(std::unique_ptr<Communicator> world, const ParallelConfig& config,
                                                       int ranks_per_node);

// A one-rank context on LocalCommunicators: single-process training, tests, generation.
std::unique_ptr<ParallelContext> make_single_rank_context();

}  // namespace moe4d
