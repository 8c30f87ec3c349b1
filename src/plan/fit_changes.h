// plan/fit_changes.h — the whole set of changes that makes a layout fit, in one suggestion.
//
// A layout that does not fit usually needs several settings changed together (recompute and ZeRO
// stage, say); naming the largest memory part alone sends the user round once per setting. This
// searches every combination of the settings that keep the split (recompute, ZeRO stage, sequence
// parallelism with TP > 1, micro-batch size with micro_batch_num following from the global batch;
// schedule, v, rank order and DP x EP x TP x PP unchanged) and picks, among the combinations that
// fit, the one with the fewest changed settings, then the shortest predicted step. Pure.
#pragma once

#include <string>

#include "plan/layout_evaluator.h"

namespace moe4d {

struct FitSuggestion {
  bool found = false;   // some combination fits
  Layout layout;        // found: the layout with the changes; else the least-memory combination
  std::string changes;  // the changed settings as --layout keys: "recompute=full,zero=3"
  double bytes = 0;     // its memory (peak stage, reserve included)
  double step = 0;      // its predicted step time (found only)
};

FitSuggestion fit_changes(const PlanContext& ctx, const Layout& layout);

// One sentence: "all at once: recompute=full,zero=3 fits (46.2 GiB of 64 GiB, 101.8 s per step:
// --layout ...)" or why no combination of this split fits.
std::string fit_changes_sentence(const PlanContext& ctx, const FitSuggestion& suggestion);

}  // namespace moe4d
