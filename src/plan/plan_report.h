// plan/plan_report.h — what `moe4d plan` prints: ranked tables, one layout's full breakdown, device
// sweeps and rejected layouts, as text or as JSON (nlohmann::json, serialised by the caller).
//
// Units in text: GiB for memory, seconds for time, percentages of the step; JSON carries raw SI
// numbers (bytes, seconds) under self-describing keys. Pure functions of their inputs.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "plan/layout_evaluator.h"
#include "plan/search.h"

namespace moe4d {

// A search on one device count of a sweep.
struct SweepPoint {
  int devices = 0;
  SearchResult result;
};

// Header lines: model (parameters), cluster, devices, global batch, precision.
std::string format_context(const PlanContext& ctx);

// The ranked table (1-based ranks, as `--explain RANK` takes them).
std::string format_ranked_table(const PlanContext& ctx, const SearchResult& result);

// Every refused DP x EP x TP x PP split with its reason.
std::string format_rejected(const SearchResult& result);

// One layout: memory parts, time parts with exposed vs total communication, bubble, the
// bottleneck sentence, group placement and (up to 128 ranks) the full rank-to-node map.
std::string format_explain(const PlanContext& ctx, const Evaluation& evaluation);

// Every pipeline stage's step in parts (LayoutEvaluator::stage_times): GEMMs by class, memory-bound
// work, each collective exposed and hidden, busy and idle time (part of format_explain).
std::string format_stage_times(const PlanContext& ctx, const Evaluation& evaluation);
nlohmann::json stage_times_json(const PlanContext& ctx, const Evaluation& evaluation);

// Best layout per device count and how tokens/s scale.
std::string format_sweep(const PlanContext& ctx, const std::vector<SweepPoint>& sweep);

nlohmann::json context_json(const PlanContext& ctx);
nlohmann::json evaluation_json(const PlanContext& ctx, const Evaluation& evaluation);
nlohmann::json search_json(const PlanContext& ctx, const SearchResult& result, bool with_rejected);
nlohmann::json sweep_json(const PlanContext& ctx, const std::vector<SweepPoint>& sweep);

}  // namespace moe4d
