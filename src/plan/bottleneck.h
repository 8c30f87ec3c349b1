// plan/bottleneck.h — the articles' last-chapter question answered in words: what limits a layout.
//
// One sentence naming the largest loss and what to change, e.g.
//   "communication is 38% of the step: the TP group crosses nodes (tp 16 over 2 nodes); keep TP within 8 devices"
//   "bubble 52% of the step: raise micro_batch_num to >= 4 x PP (32)"
//   "needs 71.2 GiB of 64 GiB; the largest part is the optimizer state (27.3 GiB): raise zero_stage ..."
// Rules (docs/planner.md §Bottleneck): a layout that does not fit is limited by memory; otherwise
// the bubble or the exposed communication, whichever is larger, when it is at least 15% of the
// step (communication is attributed to its largest dimension and the sentence says whether that
// group crosses nodes); else the step is compute-bound. Pure function.
#pragma once

#include <string>

#include "plan/layout_evaluator.h"

namespace moe4d {

std::string describe_bottleneck(const PlanContext& ctx, const Evaluation& evaluation);

}  // namespace moe4d
