// parallel/parallel_context.cc — cuts every process group from the rank grid (see the header).
#include "parallel/parallel_context.h"

#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "comm/local_communicator.h"
#include "config/config.h"
#include "core/check.h"
#include "core/error.h"
#include "core/log.h"
#include "parallel/layout_check.h"

namespace moe4d {
namespace {

constexpr ParallelDim kNameOrder[] = {ParallelDim::kDP, ParallelDim::kEP, ParallelDim::kTP, ParallelDim::kPP};

// "tp[dp=0,ep=1,pp=0]": the group's prefix and the coordinates it holds fixed.
std::string group_name(const char* prefix, const GridCoord& coord, std::initializer_list<ParallelDim> dims) {
  std::vector<std::string> fixed;
  for (ParallelDim dim : kNameOrder)
    if (std::find(dims.begin(), dims.end(), dim) == dims.end())
      fixed.push_back(fmt::format("{}={}", parallel_dim_name(dim), coord.get(dim)));
  return fmt::format("{}[{}]", prefix, fmt::join(fixed, ","));
}

int index_of_group(const std::vector<std::vector<int>>& groups, int rank) {
  for (size_t i = 0; i < groups.size(); ++i)
    if (std::find(groups[i].begin(), groups[i].end(), rank) != groups[i].end()) return static_cast<int>(i);
  MOE4D_CHECK_MSG(false, "rank {} is in no group", rank);
  return -1;
}

// Collective over `world`: color = index of this rank's group among all groups along `dims`,
// key = its position in the group, so the communicator's ranks follow the grid's group order.
std::unique_ptr<Communicator> cut_group(Communicator& world, const RankGrid& grid, int rank, const char* prefix,
                                        std::initializer_list<ParallelDim> dims) {
  std::vector<int> members = grid.group(rank, dims);
  int color = index_of_group(grid.groups(dims), rank);
  int key = grid.group_rank(rank, dims);
  std::unique_ptr<Communicator> comm = world.split(color, key, group_name(prefix, grid.coord(rank), dims));
  MOE4D_CHECK(comm != nullptr);
  MOE4D_CHECK_EQ(comm->rank(), key);
  MOE4D_CHECK_MSG(comm->world_ranks() == members, "group {} has world ranks {} but the grid says {}", comm->name(),
                  fmt::join(comm->world_ranks(), ","), fmt::join(members, ","));
  return comm;
}

// The CP group (not a grid dimension: cp consecutive data replicas), named by the coordinates and
// the dense replica it holds fixed, its members ordered by CP rank.
std::unique_ptr<Communicator> cut_cp_group(Communicator& world, const RankGrid& grid, int rank) {
  const std::vector<int> members = grid.cp_group(rank);
  const auto all = grid.cp_groups();
  const int color = static_cast<int>(std::find(all.begin(), all.end(), members) - all.begin());
  const GridCoord c = grid.coord(rank);
  std::unique_ptr<Communicator> comm =
      world.split(color, grid.cp_rank(rank),
                  fmt::format("cp[tp={},pp={},dense_replica={}]", c.tp, c.pp, grid.dense_replica(rank)));
  MOE4D_CHECK(comm != nullptr);
  MOE4D_CHECK_MSG(comm->world_ranks() == members, "group {} has world ranks {} but the grid says {}", comm->name(),
                  fmt::join(comm->world_ranks(), ","), fmt::join(members, ","));
  return comm;
}

// TP all-reduces sit on the critical path of every layer; across nodes they are an order of
// magnitude slower. Said once, by world rank 0, with every offending group.
void warn_if_tp_spans_nodes(const RankGrid& grid, int ranks_per_node) {
  if (grid.size(ParallelDim::kTP) == 1) return;
  std::vector<std::string> spanning;
  for (const auto& g : grid.groups({ParallelDim::kTP}))
    if (RankGrid::spans_nodes(g, ranks_per_node)) spanning.push_back(fmt::format("{{{}}}", fmt::join(g, ",")));
  if (spanning.empty()) return;
  log_warn("{} of {} tensor-parallel groups span nodes ({} ranks per node): {}. Every attention and FFN block "
           "all-reduces activations inside its TP group, so these groups run at inter-node bandwidth and will be "
           "several times slower. Put TP first in rank_order (tp-ep-dp-pp) and keep tensor_parallel <= ranks per node "
           "(and dividing it).",
           spanning.size(), grid.groups({ParallelDim::kTP}).size(), ranks_per_node, fmt::join(spanning, " "));
}

int resolve_ranks_per_node(Communicator& world, const ParallelConfig& config, int ranks_per_node) {
  if (ranks_per_node > 0) return ranks_per_node;
  if (config.local_worker_num > 0) return config.local_worker_num;
  return world.detect_ranks_per_node();  // one node where the backend has no node information
}

// parallel_config.collective_timeout is the deadline of every group: set it on the world before
// the groups are split from it (they inherit it).
void apply_timeout(Communicator& world, const ParallelConfig& config) {
  if (config.collective_timeout <= 0)
    fail("collective_timeout is {}; it must be > 0 seconds", config.collective_timeout);
  world.set_timeout_seconds(config.collective_timeout);
}

std::unique_ptr<ParallelContext> new_context(RankGrid grid) {
  return std::unique_ptr<ParallelContext>(new ParallelContext{.grid = std::move(grid)});
}

}  // namespace

std::unique_ptr<ParallelContext> make_parallel_context(std::unique_ptr<Communicator> world, const ParallelConfig& config,
                                                       int ranks_per_node) {
  MOE4D_CHECK(world != nullptr);
  validate_parallel_size(config, world->size());
  apply_timeout(*world, config);
  auto ctx = new_context(RankGrid(config.data_parallel, config.expert_parallel, config.tensor_parallel,
                                  config.pipeline_parallel, config.rank_order, config.device_list,
                                  config.context_parallel));
  const RankGrid& grid = ctx->grid;
  ctx->rank = world->rank();
  ctx->coord = grid.coord(ctx->rank);
  ctx->ranks_per_node = resolve_ranks_per_node(*world, config, ranks_per_node);

  using D = ParallelDim;
  ctx->tp = cut_group(*world, grid, ctx->rank, "tp", {D::kTP});
  ctx->ep = cut_group(*world, grid, ctx->rank, "ep", {D::kEP});
  ctx->dp = cut_group(*world, grid, ctx->rank, "dp", {D::kDP});
  // EP fastest, so the group rank equals ParallelContext::data_replica().
  ctx->dp_ep = cut_group(*world, grid, ctx->rank, "dp_ep", {D::kEP, D::kDP});
  ctx->pp = cut_group(*world, grid, ctx->rank, "pp", {D::kPP});
  ctx->cp = cut_cp_group(*world, grid, ctx->rank);
  if (ctx->pp_size() > 1) {
    bool on_end = ctx->is_first_stage() || ctx->is_last_stage();
    int color = on_end ? index_of_group(grid.groups({D::kPP}), ctx->rank) : -1;
    ctx->embed = world->split(color, ctx->is_first_stage() ? 0 : 1, group_name("embed", ctx->coord, {D::kPP}));
    MOE4D_CHECK_EQ(ctx->embed != nullptr, on_end);
  }
  ctx->dp_sync = std::make_unique<HierarchicalAllReduce>(*ctx->dp, ctx->ranks_per_node);
  ctx->dp_ep_sync = std::make_unique<HierarchicalAllReduce>(*ctx->dp_ep, ctx->ranks_per_node);
  if (ctx->rank == 0) {
    warn_if_tp_spans_nodes(grid, ctx->ranks_per_node);
    for (const HierarchicalAllReduce* sync : {ctx->dp_ep_sync.get(), ctx->dp_sync.get()}) {
      if (!sync->is_hierarchical()) continue;
      const HierarchicalAllReduce& s = *sync;
      log_info("{} gradient all-reduce spans {} nodes: hierarchical (reduce-scatter over the {} ranks of a node, "
               "all-reduce across nodes, all-gather in the node)",
               s.group().name(), s.group().size() / s.ranks_per_node_in_group(), s.ranks_per_node_in_group());
    }
  }
  ctx->world = std::move(world);
  return ctx;
}

std::unique_ptr<ParallelContext> make_single_rank_context() {
  auto ctx = new_context(RankGrid(1, 1, 1, 1));
  using D = ParallelDim;
  ctx->world = std::make_unique<LocalCommunicator>("world");
  ctx->tp = std::make_unique<LocalCommunicator>(group_name("tp", ctx->coord, {D::kTP}));
  ctx->ep = std::make_unique<LocalCommunicator>(group_name("ep", ctx->coord, {D::kEP}));
  ctx->dp = std::make_unique<LocalCommunicator>(group_name("dp", ctx->coord, {D::kDP}));
  ctx->dp_ep = std::make_unique<LocalCommunicator>(group_name("dp_ep", ctx->coord, {D::kEP, D::kDP}));
  ctx->pp = std::make_unique<LocalCommunicator>(group_name("pp", ctx->coord, {D::kPP}));
  ctx->cp = std::make_unique<LocalCommunicator>("cp[tp=0,pp=0,dense_replica=0]");
  ctx->dp_sync = std::make_unique<HierarchicalAllReduce>(*ctx->dp, 1);
  ctx->dp_ep_sync = std::make_unique<HierarchicalAllReduce>(*ctx->dp_ep, 1);
  return ctx;
}

}  // namespace moe4d
