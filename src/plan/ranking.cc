// plan/ranking.cc — tie groups and the tie-break rule (plan/ranking.h).
#include "plan/ranking.h"

#include <algorithm>

#include <fmt/format.h>

namespace moe4d {

double inter_node_seconds(const Evaluation& e) {
  const TimeBreakdown& t = e.time;
  const Placement& p = e.placement;
  double s = 0;
  if (p.tp.crosses_nodes()) s += t.tp_comm;
  if (p.ep.crosses_nodes()) s += t.ep_comm_total;
  if (p.pp_hop.crosses_nodes()) s += t.pp_comm;
  // The dense parameters' group (DP x EP) contains the experts' (DP): when it stays in a node so do both.
  if (p.data.crosses_nodes()) s += t.dp_comm_total + t.zero_comm_total;
  return s;
}

void break_ties(SearchResult& r) {
  r.tied = 0;
  r.fastest_step = 0;
  if (r.ranked.empty()) return;
  r.fastest_step = r.ranked.front().time.step;
  for (const Evaluation& e : r.ranked)
    r.fastest_step = std::min(r.fastest_step, e.time.step);
  const double bound = r.fastest_step * (1 + kStepTimeError);
  auto group_end = std::stable_partition(r.ranked.begin(), r.ranked.end(),
                                         [&](const Evaluation& e) { return e.time.step <= bound; });
  std::stable_sort(r.ranked.begin(), group_end, [](const Evaluation& a, const Evaluation& b) {
    const double ia = inter_node_seconds(a), ib = inter_node_seconds(b);
    if (ia != ib) return ia < ib;
    if (a.memory.total() != b.memory.total()) return a.memory.total() < b.memory.total();
    return a.time.step < b.time.step;
  });
  std::stable_sort(group_end, r.ranked.end(),
                   [](const Evaluation& a, const Evaluation& b) { return a.time.step < b.time.step; });
  r.tied = static_cast<int>(group_end - r.ranked.begin());
}

double vs_fastest(const SearchResult& r, const Evaluation& e) {
  return r.fastest_step > 0 ? e.time.step / r.fastest_step - 1 : 0;
}

std::string ranking_rule_text() {
  return fmt::format("fastest; rows within the planner's {:.0f}% step-time error of the fastest tie, and ties go to "
                     "less inter-node communication, then less memory",
                     100 * kStepTimeError);
}

std::string describe_best(const SearchResult& r) {
  if (r.ranked.empty()) return "";
  const Evaluation& best = r.ranked.front();
  const std::string head = fmt::format("{} (row 1) — ", layout_dims_string(best.layout));
  const std::string rule = "; rule: " + ranking_rule_text();
  if (r.ranked.size() < 2) return head + "the only layout that fits" + rule;
  if (r.tied <= 1)
    return head + fmt::format("the fastest, by {:.1f}% over row 2 (more than the planner's {:.0f}% step-time error)",
                              100 * vs_fastest(r, r.ranked[1]), 100 * kStepTimeError) +
           rule;
  const Evaluation& runner = r.ranked[1];
  const double mine = inter_node_seconds(best), theirs = inter_node_seconds(runner);
  std::string why = "the same inter-node communication and memory as row 2, and a shorter step";
  if (mine < theirs)
    why = fmt::format("the least inter-node communication ({:.2f} s per step in collectives between nodes, row 2 "
                      "{:.2f} s)",
                      mine, theirs);
  else if (best.memory.total() < runner.memory.total())
    why = fmt::format("as much inter-node communication as row 2 ({:.2f} s per step) and less memory ({} vs {} GiB)",
                      mine, format_gib(best.memory.total()), format_gib(runner.memory.total()));
  const double slower = vs_fastest(r, best);
  return head + fmt::format("rows 1-{} tie (within the planner's {:.0f}% step-time error of the fastest, {:.3f} s); row "
                            "1 has {}{}",
                            r.tied, 100 * kStepTimeError, r.fastest_step, why,
                            slower > 0 ? fmt::format(", though {:.1f}% slower than the fastest", 100 * slower) : "") +
         rule;
}

}  // namespace moe4d
