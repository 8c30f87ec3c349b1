// plan/fit_changes.cc — searching the settings of one split for a layout that fits (plan/fit_changes.h).
#include "plan/fit_changes.h"

#include <fmt/format.h>

#include <vector>

#include "plan/search.h"

namespace moe4d {
namespace {

// The settings of `to` that differ from `from`, as --layout keys.
std::string changed_keys(const Layout& from, const Layout& to) {
  std::vector<std::string> keys;
  if (to.recompute != from.recompute) keys.push_back(fmt::format("recompute={}", recompute_name(to.recompute)));
  if (to.zero_stage != from.zero_stage) keys.push_back(fmt::format("zero={}", to.zero_stage));
  if (to.sequence_parallel != from.sequence_parallel) keys.push_back(fmt::format("sp={}", to.sequence_parallel ? 1 : 0));
  if (to.micro_batch_size != from.micro_batch_size)
    keys.push_back(fmt::format("mbs={},mb={}", to.micro_batch_size, to.micro_batch_num));
  std::string out;
  for (const std::string& k : keys) out += (out.empty() ? "" : ",") + k;
  return out;
}

int changed_count(const Layout& from, const Layout& to) {
  return (to.recompute != from.recompute) + (to.zero_stage != from.zero_stage) +
         (to.sequence_parallel != from.sequence_parallel) + (to.micro_batch_size != from.micro_batch_size);
}

}  // namespace

FitSuggestion fit_changes(const PlanContext& ctx, const Layout& layout) {
  LayoutEvaluator evaluator(ctx);
  const double limit = memory_limit(ctx.cluster);
  const int64_t per_replica = ctx.setup.global_batch / layout.dense_replicas();
  std::vector<bool> sp_options = {false};
  if (layout.tp > 1 && ctx.setup.seq_length % layout.tp == 0) sp_options.push_back(true);
  FitSuggestion best;
  int best_changes = 1 << 30;
  double least = -1;
  for (int64_t mbs = 1; mbs <= per_replica && mbs <= (1 << 16); ++mbs) {
    if (per_replica % mbs != 0) continue;
    for (const bool sp : sp_options)
      for (const RecomputeGranularity rc :
           {RecomputeGranularity::kNone, RecomputeGranularity::kSelective, RecomputeGranularity::kFull})
        for (int zero = 0; zero <= 3; ++zero) {
          if (zero > 0 && layout.data_replicas() == 1) continue;
          Layout c = layout;
          c.micro_batch_size = static_cast<int>(mbs);
          c.micro_batch_num = static_cast<int>(per_replica / mbs);
          c.sequence_parallel = sp;
          c.recompute = rc;
          c.zero_stage = zero;
          if (!layout_problem(ctx, c).empty()) continue;
          const double bytes = evaluator.memory(c).total();
          if (bytes > limit) {
            if (!best.found && (least < 0 || bytes < least)) {
              least = bytes;
              best.layout = c;
              best.bytes = bytes;
              best.changes = changed_keys(layout, c);
            }
            continue;
          }
          const int n = changed_count(layout, c);
          if (best.found && n > best_changes) continue;
          const double step = evaluator.evaluate(c).time.step;
          if (!best.found || n < best_changes || step < best.step) {
            best = {true, c, changed_keys(layout, c), bytes, step};
            best_changes = n;
          }
        }
  }
  return best;
}

std::string fit_changes_sentence(const PlanContext& ctx, const FitSuggestion& s) {
  const std::string limit = format_gib(memory_limit(ctx.cluster));
  if (s.found)
    return fmt::format("all at once: {} fits ({} GiB of {} GiB, {:.3f} s per step: --layout {})", s.changes,
                       format_gib(s.bytes), limit, s.step, layout_to_string(s.layout));
  if (s.bytes > 0)
    return fmt::format("no setting of recompute, ZeRO stage, sequence parallelism or micro-batch size fits this split "
                       "(the least memory, {}, needs {} GiB of {} GiB); raise TP, PP or EP, or run without --layout for "
                       "the splits that fit",
                       s.changes.empty() ? "as given" : s.changes, format_gib(s.bytes), limit);
  return "no valid setting of this split was found; run without --layout for the splits that fit";
}

}  // namespace moe4d
