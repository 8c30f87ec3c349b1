// launch/launch_plan.h — which rank runs where: the worker/slot/layout checks and the placement table.
//
// msrun's numbers: worker_num ranks in all, local_worker_num on each host; rank r runs on host
// r / local_worker_num (OpenMPI --map-by slot over hosts given as host:local_worker_num), so the
// placement is exactly the one the trainer's node detection (MPI_COMM_TYPE_SHARED) finds. For a
// training job the plan also holds the rank grid of the config's parallel_config
// (parallel/rank_grid.h, the same grid the trainer cuts its groups from) and which process groups
// cross hosts. Pure arithmetic over the parsed hostfile and config; thread-safe.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "config/config.h"
#include "launch/hostfile.h"
#include "parallel/rank_grid.h"

namespace moe4d {

struct LaunchRequest {
  std::vector<HostEntry> hosts;  // empty: this machine ("localhost") only
  std::string hostfile;          // for messages ("" when no hostfile)
  int worker_num = 0;            // 0: hosts x local_worker_num (or the config's product)
  int local_worker_num = 0;      // 0: the hosts' common slot count, or worker_num / hosts
  bool oversubscribe = false;    // allow more ranks on a host than its slots (never past max_slots)
  bool allow_cross_node_tp = false;
};

struct RankPlacement {
  int rank = 0;
  int host_index = 0;
  int local_rank = 0;
  GridCoord coord;  // meaningful only when LaunchPlan::grid is set
};

// A process group dimension and its groups that span more than one host.
struct CrossingGroups {
  std::string dim;  // "tp", "ep", "dp", "dp x ep", "pp"
  int groups = 0;   // groups of this dimension
  std::vector<std::vector<int>> crossing;
};

struct LaunchPlan {
  std::vector<std::string> hosts;  // in rank order
  int worker_num = 0;
  int local_worker_num = 0;
  std::optional<RankGrid> grid;    // training jobs only
  std::vector<RankPlacement> ranks;
  std::vector<CrossingGroups> crossing;  // one entry per dimension of size > 1

  const std::string& host_of(int rank) const { return hosts[ranks[rank].host_index]; }
};

// Throws moe4d::Error, naming each factor, when: worker_num != hosts x local_worker_num; a host's
// slots are fewer than local_worker_num (unless oversubscribe) or its max_slots are; the numbers
// cannot be derived; parallel_config's dp x ep x tp x pp differs from worker_num, or its
// local_worker_num differs from the launcher's; a TP group crosses hosts and !allow_cross_node_tp.
// `parallel` is null for jobs that are not training runs (no grid); `config_source` names the config.
LaunchPlan plan_launch(const LaunchRequest& request, const ParallelConfig* parallel, const std::string& config_source);

// The table printed before a launch:
//   host -> ranks -> (dp, ep, tp, pp), then which groups cross hosts.
std::string placement_table(const LaunchPlan& plan);

}  // namespace moe4d
