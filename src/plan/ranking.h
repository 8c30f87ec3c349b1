// plan/ranking.h — what decides the best layout, and which rows the planner cannot tell apart.
//
// The planner predicts step times with a stated error (kStepTimeError, docs/planner.md §Ranking):
// two rows closer than that are a tie, not an order. break_ties() therefore ranks a search's rows
// as: the rows within kStepTimeError of the fastest row form the tie group and come first, ordered
// by less inter-node communication (the seconds per step spent in collectives whose group spans
// nodes — the part of the prediction that contention and stragglers make least certain), then by
// less memory (headroom); the rows after the group keep their step-time order. Pure functions.
#pragma once

#include <string>

#include "plan/layout_evaluator.h"
#include "plan/search.h"

namespace moe4d {

// The planner's stated step-time error (a fraction): the median |error| of its calibration runs
// (docs/planner.md §Calibration: 3.7% and 5.1% on two runs) rounded up, and issue 25's target on
// published runs. Step-time differences below it are ties.
inline constexpr double kStepTimeError = 0.05;

// Rows of a search kept for tie-breaking beyond those shown, so that a tie group larger than
// --top is still ordered over all its members.
inline constexpr int kTieCandidates = 32;

// Seconds per step of the collectives whose group crosses nodes (before overlap): TP, EP, the PP
// hop, the data-parallel reduction and the ZeRO traffic (dense over DP x EP, experts over DP).
double inter_node_seconds(const Evaluation& e);

// Reorders result.ranked (sorted by step time, as search_layouts returns it) by the rule above and
// sets result.tied (the size of the leading tie group, >= 1 when a row fits) and result.fastest_step.
void break_ties(SearchResult& result);

// (step - fastest) / fastest for a row of a tie-ranked result.
double vs_fastest(const SearchResult& result, const Evaluation& e);

// The rule in one phrase, for the `best:` line and the JSON.
std::string ranking_rule_text();

// "best: ..." — which row is best and why (fastest, or the tie group and what broke the tie).
std::string describe_best(const SearchResult& result);

}  // namespace moe4d
