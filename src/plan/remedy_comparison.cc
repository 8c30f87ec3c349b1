// plan/remedy_comparison.cc — the four variants of one layout and the winner (see the header).
#include "plan/remedy_comparison.h"

#include <fmt/format.h>

#include "plan/replication_model.h"
#include "plan/search.h"

namespace moe4d {
namespace {

RemedyVariant evaluate_variant(const PlanContext& base, std::string name, const Layout& layout, double imbalance,
                               int redundant) {
  PlanContext ctx = base;
  ctx.setup.expert_imbalance = imbalance;
  ctx.setup.redundant_experts = redundant;
  RemedyVariant v{.name = std::move(name), .layout = layout, .imbalance = imbalance, .redundant = redundant};
  v.problem = layout_problem(ctx, layout);
  if (v.problem.empty()) {
    LayoutEvaluator evaluator(ctx);
    v.evaluation = evaluator.evaluate(layout);
    // The busiest device's share this variant actually runs with (the replicas' where there are any).
    if (redundant > 0) v.imbalance = replicated_imbalance(ctx.model, imbalance, layout.ep, redundant);
  }
  return v;
}

}  // namespace

RemedyComparison compare_remedies(const PlanContext& ctx, const Layout& layout) {
  RemedyComparison out;
  const double F = ctx.setup.expert_imbalance;
  const int R = ctx.setup.redundant_experts;
  if (R <= 0 || F <= 1 || layout.ep <= 1 || !ctx.model.is_moe()) return out;
  out.variants.push_back(evaluate_variant(ctx, "none", layout, F, 0));
  out.variants.push_back(evaluate_variant(ctx, "replication", layout, F, R));
  Layout smaller = layout;
  smaller.ep = layout.ep / 2;
  smaller.dp = layout.dp * 2;
  out.variants.push_back(
      evaluate_variant(ctx, "smaller EP", smaller, imbalance_at_ep(ctx.model, F, layout.ep, smaller.ep), 0));
  out.variants.push_back(evaluate_variant(ctx, "aux loss", layout, 1 + (F - 1) * (1 - kAssumedAuxLossExcessCut), 0));
  for (size_t i = 0; i < out.variants.size(); ++i) {
    const RemedyVariant& v = out.variants[i];
    if (!v.problem.empty() || !v.evaluation.fits || v.evaluation.time.step <= 0) continue;
    if (out.winner < 0 || v.evaluation.time.step < out.variants[out.winner].evaluation.time.step) out.winner = int(i);
  }
  return out;
}

std::string format_remedies(const RemedyComparison& c, const std::string& where) {
  if (c.variants.empty()) return "";
  const RemedyVariant& none = c.variants[0];
  std::string out = fmt::format(
      "\nremedies for the skew on {}{} (busiest EP device {:.2f}x the balanced rows), each timed with this planner:\n",
      layout_dims_string(none.layout), where.empty() ? "" : " (" + where + ")", none.imbalance);
  out += fmt::format("  {:<12} {:<20} {:>8}  {:>8}  {:>8}  {:>8}  {}\n", "remedy", "layout", "busiest", "step s",
                     "vs none", "mem GiB", "");
  const double base = none.problem.empty() ? none.evaluation.time.step : 0;
  for (const RemedyVariant& v : c.variants) {
    std::string layout = layout_dims_string(v.layout);
    if (v.redundant > 0) layout += fmt::format(" R{}", v.redundant);
    if (!v.problem.empty()) {
      out += fmt::format("  {:<12} {:<20} cannot run: {}\n", v.name, layout, v.problem);
      continue;
    }
    const Evaluation& e = v.evaluation;
    std::string note = e.fits ? "" : "DOES NOT FIT";
    if (v.name == "aux loss") note += std::string(note.empty() ? "" : "; ") + "assumed routing, quality cost not modelled";
    out += fmt::format("  {:<12} {:<20} {:>7.2f}x  {:>8.3f}  {:>7.2f}x  {:>8}  {}\n", v.name, layout, v.imbalance,
                       e.time.step, base > 0 ? e.time.step / base : 0.0, format_gib(e.memory.total()), note);
  }
  if (c.winner < 0) {
    // Still say which would be fastest: a layout with more memory per device may make it fit.
    int fastest = -1;
    for (size_t i = 0; i < c.variants.size(); ++i) {
      const RemedyVariant& v = c.variants[i];
      if (!v.problem.empty() || v.evaluation.time.step <= 0) continue;
      if (fastest < 0 || v.evaluation.time.step < c.variants[fastest].evaluation.time.step) fastest = int(i);
    }
    out += fastest < 0 ? "  none of them fits\n"
                       : fmt::format("  none of them fits; fastest if memory allowed: {}\n", c.variants[fastest].name);
  } else {
    const RemedyVariant& w = c.variants[c.winner];
    out += fmt::format("  fastest that fits: {}", w.name);
    if (base > 0) out += fmt::format(" ({:.2f}x the step without a remedy)", w.evaluation.time.step / base);
    if (w.name == "aux loss") out += " — but only if a larger aux loss really halves the excess, at a quality cost";
    out += "\n";
  }
  out += fmt::format(
      "  assumptions: the skew is one hot expert (replication_model); the aux-loss row assumes a larger coefficient "
      "removes {:.0f}% of the excess (F - 1) — a guess, not a model — and its cost in model quality (a worse loss "
      "in published ablations of large aux-loss coefficients) is in none of these numbers\n",
      100 * kAssumedAuxLossExcessCut);
  return out;
}

nlohmann::json remedies_json(const RemedyComparison& c) {
  nlohmann::json variants = nlohmann::json::array();
  for (const RemedyVariant& v : c.variants) {
    nlohmann::json j = {{"remedy", v.name},
                        {"layout", layout_to_string(v.layout)},
                        {"redundant_experts", v.redundant},
                        {"busiest_share", v.imbalance}};
    if (!v.problem.empty()) {
      j["problem"] = v.problem;
    } else {
      j["fits"] = v.evaluation.fits;
      j["step_seconds"] = v.evaluation.time.step;
      j["memory_bytes"] = v.evaluation.memory.total();
    }
    if (v.name == "aux loss") j["assumed_excess_cut"] = kAssumedAuxLossExcessCut;
    variants.push_back(std::move(j));
  }
  return {{"variants", variants},
          {"winner", c.winner >= 0 ? nlohmann::json(c.variants[c.winner].name) : nlohmann::json(nullptr)}};
}

}  // namespace moe4d
