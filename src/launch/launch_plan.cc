#include "launch/launch_plan.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/error.h"

namespace moe4d {
namespace {

std::string hosts_phrase(const LaunchRequest& request, int hosts) {
  if (request.hostfile.empty()) return fmt::format("hosts {} (no --hostfile: this machine)", hosts);
  return fmt::format("hosts {} (in {})", hosts, request.hostfile);
}

void derive_counts(const LaunchRequest& request, const ParallelConfig* parallel, int hosts, LaunchPlan* plan) {
  int local = request.local_worker_num;
  int workers = request.worker_num;
  if (local == 0 && !request.hosts.empty()) {
    // The hostfile's slots, when every host gives the same number.
    const int slots = request.hosts.front().slots;
    bool same = slots > 0;
    for (const HostEntry& h : request.hosts) same = same && h.slots == slots;
    if (same && (workers == 0 || workers == slots * hosts)) local = slots;
  }
  if (workers == 0 && local == 0 && parallel) {
    workers = parallel->data_parallel * parallel->expert_parallel * parallel->tensor_parallel *
              parallel->pipeline_parallel;
  }
  if (local == 0 && workers > 0) {
    if (workers % hosts != 0)
      fail("--worker_num {} does not split evenly over {}; give --local_worker_num", workers,
           hosts_phrase(request, hosts));
    local = workers / hosts;
  }
  if (local == 0) fail("give --worker_num or --local_worker_num (the hostfile's hosts have no common slots= count)");
  if (workers == 0) workers = hosts * local;
  if (workers != hosts * local)
    fail("--worker_num {} is not {} x --local_worker_num {} = {}", workers, hosts_phrase(request, hosts), local,
         hosts * local);
  plan->worker_num = workers;
  plan->local_worker_num = local;
}

void check_slots(const LaunchRequest& request, int local) {
  for (const HostEntry& h : request.hosts) {
    if (h.max_slots > 0 && local > h.max_slots)
      fail("host {} ({}:{}) has max_slots={}, fewer than --local_worker_num {}", h.host, request.hostfile, h.line,
           h.max_slots, local);
    if (h.slots > 0 && local > h.slots && !request.oversubscribe)
      fail("host {} ({}:{}) has slots={}, fewer than --local_worker_num {}; pass --oversubscribe to run more ranks "
           "than slots",
           h.host, request.hostfile, h.line, h.slots, local);
  }
}

void check_layout(const ParallelConfig& p, const LaunchPlan& plan, const std::string& source, int hosts) {
  const int product = p.data_parallel * p.expert_parallel * p.tensor_parallel * p.pipeline_parallel;
  if (product != plan.worker_num)
    fail("parallel size mismatch: dp {} x ep {} x tp {} x pp {} = {} in {}, but --worker_num is {} ({} hosts x {} "
         "ranks per host)",
         p.data_parallel, p.expert_parallel, p.tensor_parallel, p.pipeline_parallel, product, source,
         plan.worker_num, hosts, plan.local_worker_num);
  if (p.local_worker_num > 0 && p.local_worker_num != plan.local_worker_num)
    fail("{}: parallel_config.local_worker_num is {}, but the launch puts {} ranks on each host (--local_worker_num)",
         source, p.local_worker_num, plan.local_worker_num);
}

std::string group_list(const std::vector<std::vector<int>>& groups, size_t limit) {
  std::vector<std::string> parts;
  for (size_t i = 0; i < groups.size() && i < limit; ++i) parts.push_back(fmt::format("{{{}}}", fmt::join(groups[i], ",")));
  if (groups.size() > limit) parts.push_back(fmt::format("... ({} more)", groups.size() - limit));
  return fmt::format("{}", fmt::join(parts, " "));
}

}  // namespace

LaunchPlan plan_launch(const LaunchRequest& request, const ParallelConfig* parallel, const std::string& config_source) {
  if (request.worker_num < 0 || request.local_worker_num < 0)
    fail("--worker_num and --local_worker_num must be positive");
  LaunchPlan plan;
  if (request.hosts.empty()) plan.hosts = {"localhost"};
  for (const HostEntry& h : request.hosts) plan.hosts.push_back(h.host);
  const int hosts = static_cast<int>(plan.hosts.size());
  derive_counts(request, parallel, hosts, &plan);
  check_slots(request, plan.local_worker_num);
  if (parallel) {
    check_layout(*parallel, plan, config_source, hosts);
    plan.grid.emplace(parallel->data_parallel, parallel->expert_parallel, parallel->tensor_parallel,
                      parallel->pipeline_parallel, parallel->rank_order, parallel->device_list,
                      parallel->context_parallel);
  }
  for (int r = 0; r < plan.worker_num; ++r) {
    RankPlacement p{.rank = r, .host_index = r / plan.local_worker_num, .local_rank = r % plan.local_worker_num};
    if (plan.grid) p.coord = plan.grid->coord(r);
    plan.ranks.push_back(p);
  }
  if (!plan.grid) return plan;

  using D = ParallelDim;
  const RankGrid& grid = *plan.grid;
  const auto add = [&](const char* name, std::vector<std::vector<int>> groups) {
    if (groups.empty() || groups.front().size() < 2) return;
    CrossingGroups c{.dim = name, .groups = static_cast<int>(groups.size())};
    for (auto& g : groups)
      if (RankGrid::spans_nodes(g, plan.local_worker_num)) c.crossing.push_back(std::move(g));
    plan.crossing.push_back(std::move(c));
  };
  add("tp", grid.groups({D::kTP}));
  add("ep", grid.groups({D::kEP}));
  add("dp", grid.groups({D::kDP}));
  if (grid.size(D::kEP) > 1 && grid.size(D::kDP) > 1) add("dp x ep", grid.groups({D::kEP, D::kDP}));
  add("pp", grid.groups({D::kPP}));
  add("cp", grid.cp_groups());  // the dense grid's context-parallel groups (consecutive data replicas)
  for (const CrossingGroups& c : plan.crossing) {
    if (c.dim != "tp" || c.crossing.empty() || request.allow_cross_node_tp) continue;
    fail("{} of {} tensor-parallel groups cross hosts ({} ranks per host): {}. TP all-reduces activations in every "
         "block and must stay inside one host's fast links; use tensor_parallel <= --local_worker_num (dividing it) "
         "with tp first in rank_order, or pass --allow-cross-node-tp",
         c.crossing.size(), c.groups, plan.local_worker_num, group_list(c.crossing, 4));
  }
  return plan;
}

std::string placement_table(const LaunchPlan& plan) {
  std::string out;
  if (plan.grid) {
    const RankGrid& g = *plan.grid;
    using D = ParallelDim;
    out += fmt::format("placement: {} hosts x {} ranks = {} ranks; dp {} x ep {} x tp {} x pp {} (order {})\n",
                       plan.hosts.size(), plan.local_worker_num, plan.worker_num, g.size(D::kDP), g.size(D::kEP),
                       g.size(D::kTP), g.size(D::kPP), g.order());
    if (g.context_parallel() > 1)
      out += fmt::format("dense grid per stage: tp {} x cp {} x dp_dense {}\n", g.size(D::kTP), g.context_parallel(),
                         g.size(D::kDP) * g.size(D::kEP) / g.context_parallel());
  } else {
    out += fmt::format("placement: {} hosts x {} ranks = {} ranks\n", plan.hosts.size(), plan.local_worker_num,
                       plan.worker_num);
  }
  size_t width = 4;
  for (const std::string& h : plan.hosts) width = std::max(width, h.size());
  out += fmt::format("  {:<{}}  {:>5}  {:>5}", "host", width, "rank", "local");
  if (plan.grid) out += fmt::format("  {:>3} {:>3} {:>3} {:>3}", "dp", "ep", "tp", "pp");
  out += "\n";
  for (const RankPlacement& r : plan.ranks) {
    out += fmt::format("  {:<{}}  {:>5}  {:>5}", plan.hosts[r.host_index], width, r.rank, r.local_rank);
    if (plan.grid) out += fmt::format("  {:>3} {:>3} {:>3} {:>3}", r.coord.dp, r.coord.ep, r.coord.tp, r.coord.pp);
    out += "\n";
  }
  for (const CrossingGroups& c : plan.crossing) {
    if (c.crossing.empty())
      out += fmt::format("  {} groups: {} of size {}, all inside one host\n", c.dim, c.groups,
                         plan.worker_num / c.groups);
    else
      out += fmt::format("  {} groups: {} of {} cross hosts: {}\n", c.dim, c.crossing.size(), c.groups,
                         group_list(c.crossing, 8));
  }
  return out;
}

}  // namespace moe4d
