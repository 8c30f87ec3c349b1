// plan/plan_report_json.cc — the JSON forms of the planner's output (raw SI units).
#include "plan/bottleneck.h"
#include "plan/checkpoint_model.h"
#include "plan/param_count.h"
#include "plan/plan_report.h"
#include "plan/ranking.h"

namespace moe4d {
namespace {

nlohmann::json span_json(const GroupSpan& g) {
  return {{"ranks", g.size}, {"nodes", g.nodes}, {"ranks_per_node", g.per_node}, {"crosses_nodes", g.crosses_nodes()}};
}

nlohmann::json layout_json(const Layout& l) {
  return {{"dp", l.dp},
          {"ep", l.ep},
          {"tp", l.tp},
          {"pp", l.pp},
          {"micro_batch_size", l.micro_batch_size},
          {"micro_batch_num", l.micro_batch_num},
          {"schedule", schedule_name(l.schedule)},
          {"virtual_stages", l.virtual_stages},
          {"recompute", recompute_name(l.recompute)},
          {"zero_stage", l.zero_stage},
          {"sequence_parallel", l.sequence_parallel},
          {"rank_order", rank_order_string(l.order)},
          {"string", layout_to_string(l)}};
}

}  // namespace

nlohmann::json context_json(const PlanContext& ctx) {
  const ModelParamCount p = count_model_params(ctx.model);
  const ClusterSpec& c = ctx.cluster;
  return {{"model",
           {{"name", ctx.model_name},
            {"parameters", p.total()},
            {"dense_parameters", p.dense()},
            {"expert_parameters", p.experts},
            {"active_parameters", p.active}}},
          {"cluster",
           {{"name", c.name},
            {"devices", c.device_count()},
            {"nodes", c.nodes},
            {"devices_per_node", c.devices_per_node},
            {"device_memory_bytes", c.device.memory_bytes},
            {"peak_flops", c.peak_flops(ctx.setup.precision)}}},
          {"training",
           {{"global_batch", ctx.setup.global_batch},
            {"seq_length", ctx.setup.seq_length},
            {"precision", precision_name(ctx.setup.precision)},
            {"expert_imbalance", ctx.setup.expert_imbalance},
            {"redundant_experts", ctx.setup.redundant_experts}}}};
}

nlohmann::json evaluation_json(const PlanContext& ctx, const Evaluation& e) {
  const MemoryBreakdown& m = e.memory;
  const TimeBreakdown& t = e.time;
  nlohmann::json out = {
      {"layout", layout_json(e.layout)},
      {"fits", e.fits},
      {"memory",
       {{"stage", m.stage},
        {"limit_bytes", e.memory_limit},
        {"total_bytes", m.total()},
        {"weights_fp32_bytes", m.weights},
        {"weights_16bit_bytes", m.weights16},
        {"gradients_bytes", m.gradients},
        {"optimizer_bytes", m.optimizer},
        {"zero3_gather_bytes", m.zero3_gather},
        {"grad_buckets_bytes", m.grad_buckets},
        {"activations_bytes", m.activations},
        {"workspace_bytes", m.workspace},
        {"comm_buffers_bytes", m.comm_buffers},
        {"checkpoint_staging_bytes", m.checkpoint_staging},
        {"reserve_bytes", m.reserve}}},
      {"bottleneck", describe_bottleneck(ctx, e)}};
  if (t.step > 0) {
    out["time"] = {{"step_seconds", t.step},
                   {"compute_seconds", t.compute},
                   {"recompute_seconds", t.recompute},
                   {"tp_comm_seconds", t.tp_comm},
                   {"ep_comm_seconds", t.ep_comm},
                   {"ep_comm_total_seconds", t.ep_comm_total},
                   {"pp_comm_seconds", t.pp_comm},
                   {"dp_comm_seconds", t.dp_comm},
                   {"dp_comm_total_seconds", t.dp_comm_total},
                   {"zero_comm_seconds", t.zero_comm},
                   {"zero_comm_total_seconds", t.zero_comm_total},
                   {"bubble_seconds", t.bubble},
                   {"optimizer_seconds", t.optimizer},
                   {"kernel_overhead_seconds", t.kernel_overhead},
                   {"straggler_seconds", t.straggler},
                   {"step_sync_seconds", t.step_sync},
                   {"exposed_comm_seconds", t.communication()},
                   {"critical_stage", t.critical_stage}};
    out["stages"] = stage_times_json(ctx, e);
    const CheckpointCost c = checkpoint_cost(ctx, e);
    // NaN (unknown: no storage bandwidth, no interval) is written as null.
    out["checkpoint"] = {{"format", ctx.setup.checkpoint_format == CheckpointFormat::kFull ? "full" : "sharded"},
                         {"async", ctx.setup.checkpoint_async},
                         {"interval_steps", ctx.setup.checkpoint_interval},
                         {"bytes", c.bytes},
                         {"staging_bytes_per_device", c.staging_bytes},
                         {"write_seconds", c.write_seconds},
                         {"blocked_seconds_per_save", c.blocked_seconds},
                         {"interval_share", c.interval_share}};
    out["tokens_per_second"] = e.tokens_per_second;
    out["mfu"] = e.mfu;
    const Placement& p = e.placement;
    out["placement"] = {{"ranks_per_node", p.ranks_per_node}, {"tp", span_json(p.tp)}, {"ep", span_json(p.ep)},
                        {"dp", span_json(p.dp)},          {"dp_ep", span_json(p.data)}, {"pp", span_json(p.pp)}};
  }
  return out;
}

nlohmann::json stage_times_json(const PlanContext& ctx, const Evaluation& e) {
  LayoutEvaluator evaluator(ctx);
  nlohmann::json stages = nlohmann::json::array();
  for (const StageTime& s : evaluator.stage_times(e.layout)) {
    stages.push_back({{"stage", s.stage},
                      {"layers", s.layers},
                      {"moe_layers", s.moe_layers},
                      {"embedding", s.embedding},
                      {"head", s.head},
                      {"gemm_seconds",
                       {{"qkv", s.gemms.qkv},
                        {"attention", s.gemms.attention},
                        {"attention_output", s.gemms.output},
                        {"dense_ffn", s.gemms.ffn},
                        {"router", s.gemms.router},
                        {"routed_experts", s.gemms.experts},
                        {"shared_experts", s.gemms.shared_experts},
                        {"lm_head", s.head_gemm}}},
                      {"memory_bound_seconds", s.memory_bound},
                      {"kernel_overhead_seconds", s.kernel_overhead},
                      {"straggler_seconds", s.straggler},
                      {"step_sync_seconds", s.step_sync},
                      {"recompute_seconds", s.recompute},
                      {"tp_exposed_seconds", s.tp_exposed},
                      {"ep_exposed_seconds", s.ep_exposed},
                      {"ep_hidden_seconds", s.ep_hidden},
                      {"pp_exposed_seconds", s.pp_exposed},
                      {"zero_exposed_seconds", s.zero_exposed},
                      {"zero_hidden_seconds", s.zero_hidden},
                      {"busy_seconds", s.busy},
                      {"idle_seconds", s.idle},
                      {"dp_exposed_seconds", s.dp_exposed},
                      {"dp_hidden_seconds", s.dp_hidden},
                      {"param_gather_seconds", s.param_gather},
                      {"optimizer_seconds", s.optimizer}});
  }
  return stages;
}

nlohmann::json search_json(const PlanContext& ctx, const SearchResult& r, bool with_rejected) {
  nlohmann::json ranked = nlohmann::json::array();
  for (size_t i = 0; i < r.ranked.size(); ++i) {
    nlohmann::json row = evaluation_json(ctx, r.ranked[i]);
    row["rank"] = i + 1;
    row["vs_fastest"] = vs_fastest(r, r.ranked[i]);
    row["tie_with_best"] = static_cast<int>(i) < r.tied;
    row["inter_node_comm_seconds"] = inter_node_seconds(r.ranked[i]);
    ranked.push_back(std::move(row));
  }
  nlohmann::json out = {{"context", context_json(ctx)},
                        {"search",
                         {{"seconds", r.seconds},
                          {"splits", r.factorizations},
                          {"candidates", r.candidates},
                          {"admitted", r.admitted},
                          {"timed", r.timed},
                          {"rejected_splits", r.rejected.size()}}},
                        {"ranking",
                         {{"rule", ranking_rule_text()},
                          {"step_time_error", kStepTimeError},
                          {"tied_rows", r.tied},
                          {"fastest_step_seconds", r.fastest_step},
                          {"best", describe_best(r)}}},
                        {"ranked", std::move(ranked)}};
  if (with_rejected) {
    nlohmann::json rejected = nlohmann::json::array();
    for (const RejectedLayout& j : r.rejected)
      rejected.push_back({{"dp", j.dp}, {"ep", j.ep}, {"tp", j.tp}, {"pp", j.pp}, {"reason", j.reason}});
    out["rejected"] = std::move(rejected);
  }
  return out;
}

nlohmann::json sweep_json(const PlanContext& ctx, const std::vector<SweepPoint>& sweep) {
  nlohmann::json points = nlohmann::json::array();
  for (const SweepPoint& point : sweep) {
    nlohmann::json p = {{"devices", point.devices}, {"rejected_splits", point.result.rejected.size()}};
    if (point.result.ranked.empty()) {
      p["best"] = nullptr;
    } else {
      PlanContext at = ctx;
      at.cluster = cluster_with_devices(ctx.cluster, point.devices);
      p["best"] = evaluation_json(at, point.result.ranked.front());
    }
    points.push_back(std::move(p));
  }
  return {{"context", context_json(ctx)}, {"sweep", std::move(points)}};
}

}  // namespace moe4d
