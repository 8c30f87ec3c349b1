// plan/remedy_comparison.h — `moe4d plan --expert-imbalance F --redundant-experts R`: the articles'
// three remedies for a hot expert, timed on one layout (docs/planner.md §Remedies).
//
// For the layout L (the chosen --layout, or the best row of the search) four variants are evaluated
// with the planner's own memory and time models:
//   none         L, R = 0, the busiest EP device at F
//   replication  L with R replica slots: the share the placement algorithm reaches (replication_model.h),
//                the replica memory and the weight / gradient transfer
//   smaller EP   L with ep / 2 and dp x 2 (same devices, same global batch), R = 0: the same hot-expert
//                routing spread over half as many expert groups (each holds twice the experts; with
//                ep 1 every device sees all rows, so there is no skew left but the experts' memory is
//                not divided at all)
//   aux loss     L, R = 0, a larger aux-loss coefficient assumed to remove half of the excess:
//                F -> 1 + (F - 1) / 2. This is an ASSUMPTION, not a model: how much a coefficient
//                moves the routing depends on the data and the router, and the quality cost (routing
//                pushed away from the router's preference; published ablations report a worse loss
//                for large aux-loss coefficients) is not in any number here.
// The fastest variant that fits wins; an aux-loss win is reported with its unmodelled quality cost.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "plan/layout_evaluator.h"

namespace moe4d {

// The fraction of the excess imbalance F - 1 that the aux-loss variant assumes a larger coefficient removes.
inline constexpr double kAssumedAuxLossExcessCut = 0.5;

struct RemedyVariant {
  std::string name;       // "none", "replication", "smaller EP", "aux loss"
  Layout layout;
  double imbalance = 1;   // the busiest EP device's rows over the balanced share in this variant
  int redundant = 0;
  std::string problem;    // why the variant cannot run ("" when it can)
  Evaluation evaluation;  // valid when problem is empty
};

struct RemedyComparison {
  std::vector<RemedyVariant> variants;  // in the order above
  int winner = -1;                      // index of the fastest variant that fits; -1: none fits
};

// Empty comparison (no variants) when there is nothing to compare: R == 0, F <= 1 or ep == 1.
RemedyComparison compare_remedies(const PlanContext& ctx, const Layout& layout);
// `where`: how the layout was chosen, printed in the heading ("" for a layout given by the user).
std::string format_remedies(const RemedyComparison& comparison, const std::string& where = "");
nlohmann::json remedies_json(const RemedyComparison& comparison);

}  // namespace moe4d
