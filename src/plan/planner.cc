// plan/planner.cc — the `moe4d plan` flow (plan/planner.h).
#include "plan/planner.h"

#include <algorithm>
#include <cstdlib>
#include <sstream>

#include "config/config_names.h"
#include "core/error.h"
#include "plan/cluster_presets.h"
#include "plan/cluster_yaml.h"
#include "plan/layout_export.h"
#include "plan/model_source.h"
#include "plan/plan_report.h"
#include "plan/ranking.h"
#include "plan/remedy_comparison.h"

namespace moe4d {
namespace {

ClusterSpec resolve_cluster(const std::string& arg) {
  if (is_cluster_preset(arg)) return cluster_preset(arg);
  return load_cluster_file(arg);
}

std::string dump(const nlohmann::json& doc) { return doc.dump(2) + "\n"; }

// 1-based rank of the best row with EP > 1 among those returned; 0 if none.
int first_expert_parallel(const SearchResult& result) {
  for (size_t i = 0; i < result.ranked.size(); ++i)
    if (result.ranked[i].layout.ep > 1) return int(i) + 1;
  return 0;
}

// One layout in full, with the remedies for a skew when --redundant-experts asks for them.
std::string explained(const PlanContext& ctx, const Evaluation& e, bool json) {
  const RemedyComparison remedies = compare_remedies(ctx, e.layout);
  if (!json) return format_explain(ctx, e) + format_remedies(remedies);
  nlohmann::json doc = evaluation_json(ctx, e);
  if (!remedies.variants.empty()) doc["remedies"] = remedies_json(remedies);
  return dump(doc);
}

struct Resolved {
  PlanContext ctx;
  std::optional<Config> config;
};

Resolved resolve(const PlanRequest& request) {
  Resolved r;
  PlanModel model;
  if (request.hf_model) {
    model.name = request.model;
    model.model = *request.hf_model;
    model.setup.seq_length = std::min(model.model.seq_length, 4096);
    model.model.seq_length = model.setup.seq_length;
    model.setup.global_batch = 1024;
    model.setup.precision = Precision::kBF16;
  } else {
    model = load_plan_model(request.model);
  }
  r.config = model.config;
  r.ctx.model_name = model.name;
  r.ctx.model = model.model;
  r.ctx.setup = model.setup;
  if (request.global_batch) r.ctx.setup.global_batch = *request.global_batch;
  if (request.seq_length) r.ctx.setup.seq_length = *request.seq_length;
  if (request.precision) r.ctx.setup.precision = *request.precision;
  if (request.expert_imbalance) {
    if (!(*request.expert_imbalance >= 1))
      fail("--expert-imbalance {}: expected the busiest device's routed rows over the balanced share, a number >= 1",
           *request.expert_imbalance);
    r.ctx.setup.expert_imbalance = *request.expert_imbalance;
  }
  if (request.redundant_experts) {
    if (*request.redundant_experts < 0)
      fail("--redundant-experts {}: expected a non-negative number of replica slots per MoE layer",
           *request.redundant_experts);
    if (!r.ctx.model.is_moe()) fail("--redundant-experts needs an MoE model; {} is dense", model.name);
    if (*request.redundant_experts > 0 && !request.expert_imbalance)
      fail("--redundant-experts {} needs --expert-imbalance F (replicas only help a skewed routing; give the busiest "
           "EP device's rows over the balanced share, e.g. 1.5)",
           *request.redundant_experts);
    r.ctx.setup.redundant_experts = *request.redundant_experts;
  }
  if (request.save_interval) {
    if (*request.save_interval < 0) fail("--save-interval {}: expected a number of steps >= 0", *request.save_interval);
    r.ctx.setup.checkpoint_interval = *request.save_interval;
  }
  if (request.async_save) {
    r.ctx.setup.checkpoint_async = true;
    r.ctx.setup.checkpoint_format = CheckpointFormat::kSharded;  // only sharded saves run asynchronously
  }
  if (r.ctx.setup.global_batch <= 0) fail("--global-batch must be a positive number of sequences");
  if (r.ctx.setup.seq_length <= 0) fail("--seq-length must be a positive number of tokens");
  r.ctx.cluster = resolve_cluster(request.cluster);
  if (!request.devices.empty()) r.ctx.cluster = cluster_with_devices(r.ctx.cluster, request.devices.front());
  const Precision precision = r.ctx.setup.precision;
  if (r.ctx.cluster.peak_flops(precision) <= 0)
    fail("cluster {} has no {} GEMM (device.peak_tflops.{} is absent); plan with --precision fp32 or a cluster "
         "that has one",
         r.ctx.cluster.name, precision_name(precision), precision_name(precision));
  return r;
}

}  // namespace

Precision parse_precision(const std::string& name) {
  if (const auto precision = config_names::value_of(config_names::kPrecisionNames, name)) return *precision;
  fail("--precision {}: expected {}", name, config_names::names_or(config_names::kPrecisionNames));
}

std::vector<int> parse_device_list(const std::string& text) {
  std::vector<int> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    char* end = nullptr;
    const long v = std::strtol(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || v <= 0 || v > (1 << 24))
      fail("--devices {}: expected positive integers separated by commas, e.g. 32,64,128", text);
    out.push_back(static_cast<int>(v));
  }
  if (out.empty()) fail("--devices: expected at least one device count");
  return out;
}

std::string run_plan(const PlanRequest& request) {
  if (request.top < 1) fail("--top {}: expected a positive number of rows", request.top);
  const bool sweep = request.devices.size() > 1;
  if (sweep && !request.layout.empty())
    fail("--layout evaluates one device count, but --devices lists {}; pass one", request.devices.size());
  if (sweep && (request.explain > 0 || !request.export_format.empty()))
    fail("--explain and --export need one device count, but --devices lists {}", request.devices.size());
  if (!request.layout.empty() && request.explain > 0)
    fail("--explain RANK picks a row of the search; with --layout the layout itself is explained");
  std::optional<ExportFormat> export_format;
  if (!request.export_format.empty()) export_format = parse_export_format(request.export_format);

  const Resolved resolved = resolve(request);
  const PlanContext& ctx = resolved.ctx;

  if (sweep) {
    std::vector<SweepPoint> points;
    for (int devices : request.devices) {
      PlanContext at = ctx;
      at.cluster = cluster_with_devices(ctx.cluster, devices);
      SearchResult result = search_layouts(at, request.space, kTieCandidates);
      break_ties(result);
      result.ranked.resize(std::min<size_t>(result.ranked.size(), 1));
      points.push_back({devices, std::move(result)});
    }
    return request.json ? dump(sweep_json(ctx, points)) : format_sweep(ctx, points);
  }

  if (!request.layout.empty()) {
    Layout layout;
    const int devices = ctx.cluster.device_count();
    if (request.layout == "config") {
      if (!resolved.config) fail("--layout config needs MODEL to be a moe4d config file, not the preset '{}'", request.model);
      layout = layout_from_parallel_config(resolved.config->parallel, ctx.setup.global_batch, devices);
      layout.dispatcher = resolved.config->model.moe.dispatcher;
    } else {
      layout = parse_layout(request.layout, ctx.setup.global_batch, devices);
    }
    const std::string problem = layout_problem(ctx, layout);
    if (!problem.empty()) fail("layout {} cannot run: {}", layout_to_string(layout), problem);
    if (export_format) return export_layout(*export_format, ctx, layout, resolved.config);
    LayoutEvaluator evaluator(ctx);
    return explained(ctx, evaluator.evaluate(layout), request.json);
  }

  const int rows = std::max(request.top, request.explain);
  // More rows than shown, so that the tie group is ordered over all its members.
  SearchResult result = search_layouts(ctx, request.space, std::max(rows, kTieCandidates));
  break_ties(result);
  result.ranked.resize(std::min<size_t>(result.ranked.size(), rows));
  if (request.explain > 0 || export_format) {
    const int rank = std::max(1, request.explain);
    if (result.ranked.empty())
      fail("no layout of {} fits {} devices of {}; nothing to {} (run without --explain/--export for the reasons)",
           ctx.model_name, ctx.cluster.device_count(), ctx.cluster.name, export_format ? "export" : "explain");
    if (rank > static_cast<int>(result.ranked.size()))
      fail("--explain {}: only {} layouts fit", rank, result.ranked.size());
    const Evaluation& chosen = result.ranked[rank - 1];
    if (export_format) return export_layout(*export_format, ctx, chosen.layout, resolved.config);
    return explained(ctx, chosen, request.json);
  }
  if (request.json) {
    SearchResult shown = result;
    shown.ranked.resize(std::min<size_t>(shown.ranked.size(), request.top));
    nlohmann::json doc = search_json(ctx, shown, request.show_rejected);
    if (const int rank = first_expert_parallel(result); rank > 0)
      if (const RemedyComparison c = compare_remedies(ctx, result.ranked[rank - 1].layout); !c.variants.empty()) {
        doc["remedies"] = remedies_json(c);
        doc["remedies"]["rank"] = rank;
      }
    return dump(doc);
  }
  std::string out = format_ranked_table(ctx, result);
  if (ctx.setup.redundant_experts > 0) {
    // Replication only acts on an expert-parallel layout: the best row that is one.
    if (const int rank = first_expert_parallel(result); rank > 0) {
      out += format_remedies(compare_remedies(ctx, result.ranked[rank - 1].layout),
                             rank == 1 ? "the best row" : fmt::format("row {}, the best with EP > 1; the rows above "
                                                                      "have no expert skew to remedy", rank));
    } else if (!result.ranked.empty()) {
      out += fmt::format("\nremedies: none of the {} rows uses EP > 1, so the skew costs them nothing and "
                         "replication has nothing to do\n", result.ranked.size());
    }
  }
  if (request.show_rejected && !result.ranked.empty()) out += "\nrefused splits:\n" + format_rejected(result);
  return out;
}

}  // namespace moe4d
