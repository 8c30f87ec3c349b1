// plan/search.cc — enumeration, pruning and ranking of layouts (strategy in plan/search.h).
#include "plan/search.h"

#include <algorithm>
#include <chrono>
#include <limits>

#include <fmt/format.h>

#include "config/layout_rules.h"

namespace moe4d {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

std::vector<int> divisors(int n) {
  std::vector<int> out;
  for (int i = 1; i <= n; ++i)
    if (n % i == 0) out.push_back(i);
  return out;
}

bool same_placement(const Placement& a, const Placement& b) {
  auto eq = [](const GroupSpan& x, const GroupSpan& y) {
    return x.size == y.size && x.nodes == y.nodes && x.per_node == y.per_node;
  };
  return eq(a.tp, b.tp) && eq(a.ep, b.ep) && eq(a.dp, b.dp) && eq(a.data, b.data) && eq(a.pp, b.pp) &&
         eq(a.pp_hop, b.pp_hop);
}

// Max-heap on step time: the root is the worst of the kept layouts.
bool faster(const Evaluation& a, const Evaluation& b) { return a.time.step < b.time.step; }

}  // namespace

std::string format_gib(double bytes) {
  const double gib = bytes / kGiB;
  // Device sizes print as "64"; everything else with one decimal ("71.2").
  if (gib == static_cast<double>(static_cast<long long>(gib))) return fmt::format("{}", static_cast<long long>(gib));
  return fmt::format("{:.1f}", gib);
}

std::vector<RankOrder> candidate_rank_orders(bool all) {
  if (!all) return {kDefaultRankOrder};
  RankOrder order = {ParallelDim::kTP, ParallelDim::kEP, ParallelDim::kDP, ParallelDim::kPP};
  std::vector<RankOrder> out;
  // Start from the default so that, among orders with the same placement, it is the one kept.
  out.push_back(order);
  std::sort(order.begin(), order.end());
  do {
    if (order != kDefaultRankOrder) out.push_back(order);
  } while (std::next_permutation(order.begin(), order.end()));
  return out;
}

SearchResult search_layouts(const PlanContext& ctx, const SearchSpace& space, int top_n) {
  const auto start = std::chrono::steady_clock::now();
  SearchResult result;
  const int devices = ctx.cluster.device_count();
  const int per_node = ctx.cluster.devices_per_node;
  const double limit = memory_limit(ctx.cluster);
  result.devices = devices;
  LayoutEvaluator evaluator(ctx);
  const std::vector<RankOrder> orders = candidate_rank_orders(space.search_rank_orders);
  std::vector<std::pair<RankOrder, Placement>> placements;
  placements.reserve(orders.size());
  std::vector<Evaluation> heap;
  heap.reserve(static_cast<size_t>(std::max(0, top_n)) + 1);

  const std::vector<int> single_chunk = {1};
  // ZeRO stages above 0 only differ from ZeRO-0 when there is more than one data replica.
  const bool has_zero0 = std::find(space.zero_stages.begin(), space.zero_stages.end(), 0) != space.zero_stages.end();

  for (int dp : divisors(devices)) {
    for (int ep : divisors(devices / dp)) {
      for (int tp : divisors(devices / dp / ep)) {
        const int pp = devices / dp / ep / tp;
        ++result.factorizations;
        Layout base;
        base.dp = dp;
        base.ep = ep;
        base.tp = tp;
        base.pp = pp;
        const std::string problem = split_problem(ctx, base);
        if (!problem.empty()) {
          result.rejected.push_back({dp, ep, tp, pp, problem});
          continue;
        }
        placements.clear();
        for (const RankOrder& order : orders) {
          base.order = order;
          const Placement placement = compute_placement(base, per_node);
          if (!space.allow_tp_across_nodes && placement.tp.crosses_nodes()) continue;
          bool seen = false;
          for (const auto& kept : placements) seen = seen || same_placement(kept.second, placement);
          if (!seen) placements.emplace_back(order, placement);
        }
        if (placements.empty()) {
          const std::string why =
              tp > per_node ? fmt::format("TP group crosses nodes: tp {} > {} devices per node", tp, per_node)
                            : fmt::format("TP group crosses nodes: tp {} does not tile the {} devices of a node", tp,
                                          per_node);
          result.rejected.push_back({dp, ep, tp, pp, why});
          continue;
        }

        double least_need = std::numeric_limits<double>::infinity();
        Layout least_layout = base;
        bool any_fit = false;
        const int seq = ctx.setup.seq_length;
        for (const int cp : space.context_parallel) {
          if (cp > 1 && (seq < space.context_parallel_from || base.data_replicas() % cp != 0 || seq % (2 * cp) != 0 ||
                         ctx.setup.global_batch % (base.data_replicas() / cp) != 0))
            continue;
          base.cp = cp;
          // CP groups are not a grid dimension: their span per rank order (the others do not change with cp).
          std::vector<std::pair<RankOrder, Placement>> cp_placements = placements;
          if (cp > 1)
            for (auto& [order, placement] : cp_placements) {
              base.order = order;
              placement.cp = compute_placement(base, per_node).cp;
            }
          const int64_t per_replica = ctx.setup.global_batch / base.dense_replicas();
          for (int mbs = 1; mbs <= space.max_micro_batch_size && mbs <= per_replica; ++mbs) {
            if (per_replica % mbs != 0) continue;
            const int m = static_cast<int>(per_replica / mbs);
            for (PipelineSchedule schedule : space.schedules) {
              // With one stage every schedule is 1F1B (GPipe would only hold more micro-batches).
              if (pp == 1 && schedule != PipelineSchedule::k1F1B) continue;
              const bool interleaved = schedule == PipelineSchedule::kInterleaved;
              for (int v : interleaved ? space.virtual_stages : single_chunk) {
                if (interleaved && !interleaved_fit(ctx.model.num_layers, pp, v, m).fits()) continue;
                Layout layout = base;
                layout.order = kDefaultRankOrder;
                layout.micro_batch_size = mbs;
                layout.micro_batch_num = m;
                layout.schedule = schedule;
                layout.virtual_stages = v;
                for (const bool sp : space.sequence_parallel) {
                  if (sp && (tp == 1 || ctx.setup.seq_length % (tp * (cp > 1 ? 2 * cp : 1)) != 0)) continue;
                  layout.sequence_parallel = sp;
                  for (RecomputeGranularity recompute : space.recompute) {
                    for (int zero : space.zero_stages) {
                      // With a single data replica there is nothing to shard: every stage equals ZeRO-0.
                      if (zero > 0 && has_zero0 && base.data_replicas() == 1) continue;
                      layout.recompute = recompute;
                      layout.zero_stage = zero;
                      ++result.candidates;
                      const MemoryBreakdown mem = evaluator.memory(layout);
                      if (mem.total() > limit) {
                        if (mem.total() < least_need) {
                          least_need = mem.total();
                          least_layout = layout;
                        }
                        continue;
                      }
                      ++result.admitted;
                      any_fit = true;
                      for (const auto& [order, placement] : cp_placements) {
                        layout.order = order;
                        // Both expert dispatchers where the EP group spans nodes (elsewhere they move
                        // the same bytes, and the flat one is kept).
                        const bool both = ctx.model.is_moe() && placement.ep.crosses_nodes();
                        for (const MoeDispatcher dispatcher : {MoeDispatcher::kAllToAll, MoeDispatcher::kHierarchical}) {
                          if (dispatcher == MoeDispatcher::kHierarchical && !both) continue;
                          layout.dispatcher = dispatcher;
                          const Evaluation e = evaluator.evaluate_with_memory(layout, mem, &placement);
                          ++result.timed;
                          if (static_cast<int>(heap.size()) < top_n) {
                            heap.push_back(e);
                            std::push_heap(heap.begin(), heap.end(), faster);
                          } else if (top_n > 0 && faster(e, heap.front())) {
                            std::pop_heap(heap.begin(), heap.end(), faster);
                            heap.back() = e;
                            std::push_heap(heap.begin(), heap.end(), faster);
                          }
                        }
                      }
                      layout.order = kDefaultRankOrder;
                      layout.dispatcher = MoeDispatcher::kAllToAll;
                    }
                  }
                }
              }
            }
          }
        }
        if (!any_fit) {
          std::string why;
          if (least_need == std::numeric_limits<double>::infinity()) {
            why = "no micro-batching of the global batch suits the searched schedules";
          } else {
            why = fmt::format("needs {} GiB of {} GiB (least memory: zero {}, recompute {}, mbs {}, {}{}{})",
                              format_gib(least_need), format_gib(limit), least_layout.zero_stage,
                              recompute_name(least_layout.recompute), least_layout.micro_batch_size,
                              schedule_name(least_layout.schedule),
                              least_layout.sequence_parallel ? ", sequence parallel" : "",
                              least_layout.cp > 1 ? fmt::format(", cp {}", least_layout.cp) : std::string());
          }
          result.rejected.push_back({dp, ep, tp, pp, why});
        }
      }
    }
  }
  std::sort_heap(heap.begin(), heap.end(), faster);
  result.ranked = std::move(heap);
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

}  // namespace moe4d
