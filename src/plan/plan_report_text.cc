// plan/plan_report_text.cc — the text forms of the planner's output.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>

#include "plan/bottleneck.h"
#include "plan/checkpoint_model.h"
#include "plan/comm_model.h"
#include "plan/layout_evaluator.h"
#include "plan/param_count.h"
#include "plan/plan_report.h"
#include "plan/ranking.h"
#include "plan/replication_model.h"
#include "plan/schedule_model.h"

namespace moe4d {
namespace {

// The expert dispatch of a layout whose EP group spans nodes: what each dispatcher sends across
// nodes and what one move costs (docs/moe.md §10).
std::string dispatch_text(const PlanContext& ctx, const Evaluation& e) {
  const ModelConfig& m = ctx.model;
  const double tokens = double(e.layout.micro_batch_size) * ctx.setup.seq_length;
  Layout flat = e.layout, hier = e.layout;
  flat.dispatcher = MoeDispatcher::kAllToAll;
  hier.dispatcher = MoeDispatcher::kHierarchical;
  const int nodes = e.placement.ep.nodes, k = m.moe.top_k;
  const double remote = expected_remote_nodes(m.moe.num_experts, k, nodes);
  return fmt::format(
      "    expert dispatch {}: a token reaches {:.2f} other nodes of the EP group's {} on average (uniform routing), "
      "the flat all-to-all sends it {:.2f} times across nodes (k = {}); one move {:.4f} s {} vs {:.4f} s {}\n",
      e.layout.dispatcher == MoeDispatcher::kHierarchical ? "hierarchical" : "alltoall", remote, nodes,
      k * double(nodes - 1) / nodes, k, ep_exchange_seconds(ctx.cluster, m, ctx.setup, hier, e.placement, tokens),
      "hierarchical", ep_exchange_seconds(ctx.cluster, m, ctx.setup, flat, e.placement, tokens), "alltoall");
}

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
constexpr int kMaxMappedRanks = 128;

std::string gib(double bytes) { return fmt::format("{:.1f}", bytes / kGiB); }

// Parameter counts: "117.6B", "19.4M", "3016".
std::string count_text(double n) {
  if (n >= 1e9) return fmt::format("{:.1f}B", n / 1e9);
  if (n >= 1e6) return fmt::format("{:.1f}M", n / 1e6);
  return fmt::format("{:.0f}", n);
}

// Memory parts: GiB from 1 GiB up, MiB below (tiny models would print 0.0 GiB otherwise).
std::string bytes_text(double bytes) {
  if (bytes >= kGiB) return fmt::format("{:.1f} GiB", bytes / kGiB);
  return fmt::format("{:.1f} MiB", bytes / (1024.0 * 1024.0));
}

std::string schedule_text(const Layout& l) {
  if (l.schedule == PipelineSchedule::kInterleaved) return fmt::format("interleaved v{}", l.virtual_stages);
  return schedule_name(l.schedule);
}

std::string span_text(const GroupSpan& g) {
  if (g.size <= 1) return "-";
  if (!g.crosses_nodes()) return fmt::format("{} ranks in 1 node", g.size);
  return fmt::format("{} ranks over {} nodes ({} per node)", g.size, g.nodes, g.per_node);
}

}  // namespace


// moe.redundant_experts: the busiest device's share with the replicas per EP size, their memory and
// transfer, and how the option compares with the two other remedies (docs/expert_replication.md).
std::string replication_lines(const PlanContext& ctx) {
  const int R = ctx.setup.redundant_experts;
  if (R <= 0) return "";
  const ModelConfig& m = ctx.model;
  std::string shares;
  for (int ep = 2; ep <= std::min(m.moe.num_experts, ctx.cluster.device_count()); ep *= 2) {
    if (m.moe.num_experts % ep != 0) continue;
    if (!replication_problem(m, ep, R).empty()) continue;
    shares += fmt::format("{}ep {}: {:.2f}x -> {:.2f}x", shares.empty() ? "" : ", ", ep, ctx.setup.expert_imbalance,
                          replicated_imbalance(m, ctx.setup.expert_imbalance, ep, R));
  }
  if (shares.empty()) shares = "no EP size of this cluster can hold them (R must divide by ep, R <= E x (ep - 1))";
  Layout one;
  one.ep = 2;
  one.tp = 1;
  const double slot_mib = replica_weight_bytes(m, one, 2) / (1 << 20);  // ep 2 with R 2: one slot at tp 1
  return fmt::format(
      "replication: {} redundant expert slots per MoE layer; busiest EP device's rows over the balanced share "
      "{}\n"
      "  cost per replica slot and MoE layer (tp 1): {:.1f} MiB weights + {:.1f} MiB gradient buffer (+ the home's "
      "staging), {:.1f} MiB fetched once per step and as much returned once per step (ZeRO 0/1) or per "
      "micro-batch (ZeRO-2/3); all in the table's memory and time, and the remedies below compare it with a "
      "smaller EP and a larger aux loss\n",
      R, shares, slot_mib, slot_mib, slot_mib);
}

std::string format_context(const PlanContext& ctx) {
  const ModelParamCount p = count_model_params(ctx.model);
  const ModelConfig& m = ctx.model;
  std::string model = fmt::format("model {}: {} parameters ({} dense + {} experts, {} active per token), d {}, {} layers, {} heads",
                                  ctx.model_name, count_text(p.total()), count_text(p.dense()), count_text(p.experts),
                                  count_text(p.active), m.hidden_size, m.num_layers, m.num_heads);
  if (m.head_size > 0) model += fmt::format(" of head_dim {}", m.head_dim());
  if (m.kv_heads() != m.num_heads) model += fmt::format(" on {} KV heads", m.kv_heads());
  if (m.is_mla())
    model += fmt::format(" of multi-latent attention (q_lora {}, kv_lora {}, qk {} + {} rope, v {})", m.mla.q_lora_rank,
                         m.mla.kv_lora_rank, m.mla.qk_nope_head_dim, m.mla.qk_rope_head_dim, m.mla.v_head_dim);
  if (m.qk_norm) model += " (q/k norm)";
  if (m.is_moe()) {
    model += fmt::format(", {} experts top-{}", m.moe.num_experts, m.moe.top_k);
    if (m.expert_ffn() != m.ffn_hidden_size) model += fmt::format(" of width {}", m.expert_ffn());
    if (m.moe.shared_experts > 0) model += fmt::format(" + {} shared", m.moe.shared_experts);
    if (m.moe.first_dense_layers == 1) model += ", layer 0 dense";
    if (m.moe.first_dense_layers > 1) model += fmt::format(", layers 0-{} dense", m.moe.first_dense_layers - 1);
    if (!m.moe.dense_layers.empty()) model += fmt::format(", dense layers {}", fmt::join(m.moe.dense_layers, ","));
  }
  const ClusterSpec& c = ctx.cluster;
  return fmt::format(
      "{}\ncluster {}: {} devices ({} node{} x {}), {} GiB, {:.3g} TFLOPS {} per device\n"
      "training: global batch {} x seq {} = {} tokens per step, {}\n",
      model, c.name, c.device_count(), c.nodes, c.nodes == 1 ? "" : "s", c.devices_per_node,
      format_gib(c.device.memory_bytes), c.peak_flops(ctx.setup.precision) / 1e12, precision_name(ctx.setup.precision),
      ctx.setup.global_batch, ctx.setup.seq_length, ctx.setup.global_batch * ctx.setup.seq_length,
      precision_name(ctx.setup.precision)) +
         (ctx.setup.expert_imbalance > 1
              ? fmt::format("routing: the busiest expert-parallel device gets {:.2f}x the balanced rows\n",
                            ctx.setup.expert_imbalance)
              : "") +
         replication_lines(ctx);
}

std::string format_ranked_table(const PlanContext& ctx, const SearchResult& r) {
  std::string out = format_context(ctx);
  out += fmt::format("searched {} splits, {} variants ({} fit, {} timed with rank orders) in {:.3f} s\n\n",
                     r.factorizations, r.candidates, r.admitted, r.timed, r.seconds);
  if (r.ranked.empty()) {
    out += "no layout fits; the reasons for every split:\n";
    return out + format_rejected(r);
  }
  out += fmt::format("{:>3}  {:<20} {:>4} {:>4}  {:<14} {:<9} {:>4}  {:<11}  {:>7}  {:>8}  {:<12}  {:>10}  {:>5}  {:>6}  {:>5}\n",
                     "#", "layout", "mbs", "mb", "schedule", "recompute", "zero", "order", "mem GiB", "step s",
                     "vs fastest", "tokens/s", "MFU", "bubble", "comm");
  for (size_t i = 0; i < r.ranked.size(); ++i) {
    const Evaluation& e = r.ranked[i];
    const Layout& l = e.layout;
    const std::string versus = fmt::format("{:+.1f}%{}", 100 * vs_fastest(r, e), static_cast<int>(i) < r.tied ? " tie" : "");
    out += fmt::format("{:>3}  {:<20} {:>4} {:>4}  {:<14} {:<9} {:>4}  {:<11}  {:>7}  {:>8.3f}  {:<12}  {:>10.0f}  {:>4.1f}%  {:>5.1f}%  {:>4.1f}%\n",
                       i + 1, layout_dims_string(l), l.micro_batch_size, l.micro_batch_num, schedule_text(l),
                       recompute_name(l.recompute), l.zero_stage, rank_order_string(l.order), gib(e.memory.total()),
                       e.time.step, versus, e.tokens_per_second, 100 * e.mfu, 100 * e.time.bubble / e.time.step,
                       100 * e.time.communication() / e.time.step);
  }
  if (r.tied > 0 && r.tied > static_cast<int>(r.ranked.size()))
    out += fmt::format("({} rows tie with the fastest; --top {} shows them all)\n", r.tied, r.tied);
  out += fmt::format("\nbest: {}\n", describe_best(r));
  out += fmt::format("bottleneck of row 1: {}\n", describe_bottleneck(ctx, r.ranked.front()));
  out += fmt::format("{} splits refused (--show-rejected lists them); --explain RANK shows one row in full\n",
                     r.rejected.size());
  return out;
}

std::string format_rejected(const SearchResult& r) {
  std::string out;
  for (const RejectedLayout& j : r.rejected)
    out += fmt::format("  dp{} ep{} tp{} pp{}: {}\n", j.dp, j.ep, j.tp, j.pp, j.reason);
  return out;
}

// The checkpoint line of format_explain (plan/checkpoint_model.h): only for a run that states
// something about checkpoints (a config's interval or async, a cluster's storage bandwidth).
static std::string checkpoint_text(const PlanContext& ctx, const Evaluation& e) {
  const TrainingSetup& s = ctx.setup;
  if (!s.checkpoint_async && s.checkpoint_interval == 0 && ctx.cluster.storage_write_bandwidth == 0) return "";
  const CheckpointCost c = checkpoint_cost(ctx, e);
  const bool full = s.checkpoint_format == CheckpointFormat::kFull;
  std::string out = fmt::format("\ncheckpoint ({}{}, {}): {} per save", full ? "full" : "sharded",
                                s.checkpoint_async ? ", async" : "",
                                s.checkpoint_interval > 0 ? fmt::format("every {} steps", s.checkpoint_interval)
                                                          : std::string("at the end only"),
                                bytes_text(c.bytes));
  if (std::isnan(c.write_seconds))
    out += "; write time unknown (the cluster states no storage.write_bandwidth_gbps)";
  else
    out += fmt::format("; written in {:.2f} s at {:g} GB/s{}", c.write_seconds, ctx.cluster.storage_write_bandwidth / 1e9,
                       full ? " (one writer: rank 0 after gathering)" : "");
  // Without the write time an asynchronous save's blocked time is its copy alone: a lower bound.
  const char* bound = std::isnan(c.write_seconds) ? "at least " : "";
  if (!std::isnan(c.blocked_seconds))
    out += fmt::format("; step loop blocked {}{:.3f} s per save", bound, c.blocked_seconds);
  if (!std::isnan(c.interval_share))
    out += fmt::format(", {}{:.2f}% of the training time", bound, 100 * c.interval_share);
  if (s.checkpoint_async) out += fmt::format("; staging {} per device (in the memory above)", bytes_text(c.staging_bytes));
  return out + "\n";
}

std::string format_explain(const PlanContext& ctx, const Evaluation& e) {
  const Layout& l = e.layout;
  const MemoryBreakdown& m = e.memory;
  const TimeBreakdown& t = e.time;
  std::string out = format_context(ctx);
  out += fmt::format("\nlayout {}\n", layout_to_string(l));
  out += fmt::format("\nmemory per device (stage {}, the largest): {} of {} GiB — {}\n", m.stage, bytes_text(m.total()),
                     format_gib(e.memory_limit), e.fits ? "fits" : "DOES NOT FIT");
  const char* w16 = ctx.setup.precision == Precision::kFP16 ? "fp16" : "bf16";
  auto mem_row = [&](const std::string& name, double bytes, const std::string& note) {
    out += fmt::format("  {:<24} {:>10}  {}\n", name, bytes_text(bytes), note);
  };
  mem_row("weights fp32", m.weights, l.zero_stage >= 3 ? "sharded (ZeRO-3)" : "");
  if (ctx.setup.mixed()) mem_row(fmt::format("weights {}", w16), m.weights16, l.zero_stage >= 3 ? "sharded (ZeRO-3)" : "");
  mem_row("gradients fp32", m.gradients, l.zero_stage >= 2 ? "sharded (ZeRO-2+)" : "");
  mem_row("optimizer (AdamW m, v)", m.optimizer, l.zero_stage >= 1 ? "sharded (ZeRO-1+)" : "");
  if (m.zero3_gather > 0)
    mem_row("ZeRO-3 gathered buckets", m.zero3_gather,
            fmt::format("weight being read + {} prefetched bucket(s) per group", ctx.setup.zero3_prefetch_buckets));
  if (m.grad_buckets > 0) mem_row("ZeRO gradient buckets", m.grad_buckets, "bucket being filled per group + staged buckets");
  mem_row("activations", m.activations,
          fmt::format("recompute {}, {:g} micro-batch(es) in flight ({})", recompute_name(l.recompute),
                      in_flight_micro_batches(l.schedule, l.pp, l.micro_batch_num, l.virtual_stages, m.stage),
                      schedule_text(l)));
  mem_row("backward workspace", m.workspace, "one layer's gradients (+ its recompute)");
  mem_row("communication buffers", m.comm_buffers, "");
  if (m.checkpoint_staging > 0) mem_row("checkpoint staging", m.checkpoint_staging, "checkpoint.async: its share, 12 B/element");
  mem_row("reserve", m.reserve, fmt::format("{:.0f}% of the device", 100 * ctx.cluster.memory_reserve_fraction));
  if (l.pp > 1) {
    // The busiest stage decides the fit; the mean says how unevenly the stages are loaded.
    LayoutEvaluator evaluator(ctx);
    const std::vector<MemoryBreakdown> stages = evaluator.stage_memories(l);
    double total = 0, activations = 0;
    for (const MemoryBreakdown& s : stages) {
      total += s.total();
      activations += s.activations;
    }
    const double n = static_cast<double>(stages.size());
    out += fmt::format("  mean over the {} stages: {} GiB (activations {} GiB); busiest stage {}: {} GiB (activations {} GiB)\n",
                       stages.size(), format_gib(total / n), format_gib(activations / n), m.stage,
                       format_gib(m.total()), format_gib(m.activations));
  }

  if (t.step > 0) {
    out += fmt::format("\nstep time {:.3f} s: {:.0f} tokens/s, MFU {:.1f}%, critical stage {}\n", t.step,
                       e.tokens_per_second, 100 * e.mfu, t.critical_stage);
    auto time_row = [&](const std::string& name, double seconds, const std::string& note) {
      out += fmt::format("  {:<24} {:>9.3f} s {:>5.1f}%  {}\n", name, seconds, 100 * seconds / t.step, note);
    };
    time_row("compute", t.compute, fmt::format("{} micro-batches x (forward + backward)", l.micro_batch_num));
    time_row("recompute", t.recompute, recompute_name(l.recompute));
    time_row("TP all-reduce", t.tp_comm, span_text(e.placement.tp));
    time_row("EP all-to-all", t.ep_comm,
             fmt::format("exposed of {:.3f} s; {}", t.ep_comm_total, span_text(e.placement.ep)));
    if (ctx.model.is_moe() && e.placement.ep.crosses_nodes()) out += dispatch_text(ctx, e);
    time_row("PP send/recv", t.pp_comm,
             l.pp > 1 ? (e.placement.pp_hop.crosses_nodes() ? "neighbour stages on different nodes" : "inside a node")
                      : "-");
    const std::string groups =
        fmt::format("dense over {}; experts over {}", span_text(e.placement.data), span_text(e.placement.dp));
    time_row("DP gradient reduction", t.dp_comm,
             l.zero_stage >= 2 ? "done by the ZeRO reduce-scatters below; " + groups
                               : fmt::format("exposed of {:.3f} s; {}", t.dp_comm_total, groups));
    time_row("ZeRO traffic", t.zero_comm, fmt::format("exposed of {:.3f} s", t.zero_comm_total));
    time_row("pipeline bubble", t.bubble,
             l.pp > 1 ? fmt::format("{} stages, {} micro-batches", l.pp, l.micro_batch_num) : "-");
    if (t.straggler > 0)
      time_row("stragglers", t.straggler,
               fmt::format("slowest of {} devices, speed sd {:g}%", l.world(), 100 * ctx.cluster.device.speed_variation));
    if (t.step_sync > 0) time_row("step syncs", t.step_sync, "gradient-norm and loss all-reduces, tied embedding gradients");
    time_row("optimizer step", t.optimizer, "gradient norm, AdamW, 16-bit copy, zeroed gradients");
    out += checkpoint_text(ctx, e);
  }
  if (t.step > 0) out += format_stage_times(ctx, e);
  out += fmt::format("\nbottleneck: {}\n", describe_bottleneck(ctx, e));
  if (t.step > 0) {
    const Placement& p = e.placement;
    out += fmt::format("\nplacement ({} devices per node, rank order {}):\n", ctx.cluster.devices_per_node,
                       rank_order_string(l.order));
    out += fmt::format("  TP {}\n  EP {}\n  DP {}\n  DP x EP {}\n  PP {}\n", span_text(p.tp), span_text(p.ep),
                       span_text(p.dp), span_text(p.data), span_text(p.pp));
    if (l.world() <= kMaxMappedRanks) {
      out += describe_placement(l, ctx.cluster.devices_per_node);
    } else {
      out += fmt::format("  (rank-to-device map omitted for {} ranks; --format json has the group spans)\n", l.world());
    }
  }
  return out;
}

std::string format_stage_times(const PlanContext& ctx, const Evaluation& e) {
  LayoutEvaluator evaluator(ctx);
  const std::vector<StageTime> all = evaluator.stage_times(e.layout);
  // Up to 8 stages side by side; beyond that the first, the critical and the last.
  std::vector<const StageTime*> shown;
  for (const StageTime& st : all)
    if (all.size() <= 8 || st.stage == 0 || st.stage == e.time.critical_stage || st.stage + 1 == int(all.size()))
      shown.push_back(&st);
  std::string out = fmt::format(
      "\nper stage, one device, the whole step in seconds (forward + backward of {} micro-batches; compare with a "
      "profiler's timeline):\n  {:<30}",
      e.layout.micro_batch_num, "");
  for (const StageTime* st : shown)
    out += fmt::format(" {:>10}", fmt::format("stage {}", st->stage) + (st->stage == e.time.critical_stage ? "*" : ""));
  out += "\n";
  auto row = [&](const std::string& name, auto get, bool always = false) {
    bool any = always;
    for (const StageTime* st : shown) any = any || get(*st) > 0;
    if (!any) return;
    out += fmt::format("  {:<30}", name);
    for (const StageTime* st : shown) out += fmt::format(" {:>10.3f}", get(*st));
    out += "\n";
  };
  row("GEMM qkv", [](const StageTime& s) { return s.gemms.qkv; });
  row("GEMM attention (QK^T, PV)", [](const StageTime& s) { return s.gemms.attention; });
  row("GEMM attention output", [](const StageTime& s) { return s.gemms.output; });
  row("GEMM dense FFN", [](const StageTime& s) { return s.gemms.ffn; });
  row("GEMM router", [](const StageTime& s) { return s.gemms.router; });
  row("GEMM routed experts", [](const StageTime& s) { return s.gemms.experts; });
  row("GEMM shared experts", [](const StageTime& s) { return s.gemms.shared_experts; });
  row("GEMM LM head", [](const StageTime& s) { return s.head_gemm; });
  row("memory-bound work", [](const StageTime& s) { return s.memory_bound; }, true);
  row("kernel overheads", [](const StageTime& s) { return s.kernel_overhead; });
  row("recompute", [](const StageTime& s) { return s.recompute; });
  row("TP collectives (exposed)", [](const StageTime& s) { return s.tp_exposed; });
  row("EP all-to-all exposed", [](const StageTime& s) { return s.ep_exposed; });
  row("EP all-to-all hidden", [](const StageTime& s) { return s.ep_hidden; });
  row("PP send/recv (exposed)", [](const StageTime& s) { return s.pp_exposed; });
  row("ZeRO per micro-batch exposed", [](const StageTime& s) { return s.zero_exposed; });
  row("ZeRO per micro-batch hidden", [](const StageTime& s) { return s.zero_hidden; });
  row("= busy in the pipeline", [](const StageTime& s) { return s.busy; }, true);
  row("idle (pipeline bubble)", [](const StageTime& s) { return s.idle; }, true);
  row("DP reduction exposed", [](const StageTime& s) { return s.dp_exposed; });
  row("DP reduction hidden", [](const StageTime& s) { return s.dp_hidden; });
  row("ZeRO weight all-gather", [](const StageTime& s) { return s.param_gather; });
  row("stragglers (slowest device)", [](const StageTime& s) { return s.straggler; });
  row("norm/loss/embedding syncs", [](const StageTime& s) { return s.step_sync; });
  row("optimizer step", [](const StageTime& s) { return s.optimizer; }, true);
  if (shown.size() < all.size())
    out += fmt::format("  ({} stages: the first, the critical (*) and the last shown; --format json has every stage)\n",
                       all.size());
  else
    out += "  (* the critical stage; the step = the critical stage's busy + idle + stragglers + the largest exposed DP "
           "reduction, weight all-gather and optimizer step over the stages + the step's syncs)\n";
  return out;
}

std::string format_sweep(const PlanContext& ctx, const std::vector<SweepPoint>& sweep) {
  std::string out = format_context(ctx);
  out += fmt::format("\n{:>8}  {:<20} {:>4} {:>4}  {:<14} {:<9} {:>4}  {:>7}  {:>8}  {:>10}  {:>10}  {:>5}  {:>8}\n",
                     "devices", "best layout", "mbs", "mb", "schedule", "recompute", "zero", "mem GiB", "step s",
                     "tokens/s", "per device", "MFU", "scaling");
  double base_per_device = 0;
  for (const SweepPoint& point : sweep) {
    if (point.result.ranked.empty()) {
      out += fmt::format("{:>8}  no layout fits ({} splits refused)\n", point.devices, point.result.rejected.size());
      continue;
    }
    const Evaluation& e = point.result.ranked.front();
    const Layout& l = e.layout;
    const double per_device = e.tokens_per_second / point.devices;
    if (base_per_device == 0) base_per_device = per_device;
    out += fmt::format("{:>8}  {:<20} {:>4} {:>4}  {:<14} {:<9} {:>4}  {:>7}  {:>8.3f}  {:>10.0f}  {:>10.1f}  {:>4.1f}%  {:>7.0f}%\n",
                       point.devices, layout_dims_string(l), l.micro_batch_size, l.micro_batch_num, schedule_text(l),
                       recompute_name(l.recompute), l.zero_stage, gib(e.memory.total()), e.time.step,
                       e.tokens_per_second, per_device, 100 * e.mfu, 100 * per_device / base_per_device);
  }
  out += "(scaling: tokens/s per device relative to the first device count that fits)\n";
  return out;
}

}  // namespace moe4d
