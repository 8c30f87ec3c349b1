// plan/bottleneck.cc — naming the limit of a layout (rules in plan/bottleneck.h).
#include "plan/bottleneck.h"

#include <vector>

#include <fmt/format.h>

#include "plan/fit_changes.h"
#include "plan/search.h"

namespace moe4d {
namespace {

constexpr double kWorthNaming = 0.15;

std::string percent(double fraction) { return fmt::format("{:.0f}%", 100 * fraction); }

std::string span_words(const char* what, const GroupSpan& span) {
  return fmt::format("the {} group crosses nodes ({} ranks over {} nodes)", what, span.size, span.nodes);
}

std::string memory_sentence(const PlanContext& ctx, const Evaluation& e) {
  const MemoryBreakdown& m = e.memory;
  const Layout& l = e.layout;
  struct Part {
    const char* name;
    double bytes;
    const char* advice;
  };
  const char* shard_more = "raise TP, PP or EP to shard the model further";
  const Part parts[] = {
      {"the optimizer state", m.optimizer, l.zero_stage < 1 ? "raise zero_stage (ZeRO-1 shards it over the data replicas)" : shard_more},
      {"the fp32 weights", m.weights, l.zero_stage < 3 ? "raise zero_stage to 3, or TP / PP" : shard_more},
      {"the 16-bit weights", m.weights16, l.zero_stage < 3 ? "raise zero_stage to 3, or TP / PP" : shard_more},
      {"the gradients", m.gradients, l.zero_stage < 2 ? "raise zero_stage to 2" : shard_more},
      {"the saved activations", m.activations,
       l.recompute != RecomputeGranularity::kFull ? "enable recompute (full keeps only each layer's input)"
                                                   : "lower the micro-batch size, the micro-batches in flight or raise TP / PP"},
      {"the backward workspace", m.workspace, "lower the micro-batch size or raise TP (attention probabilities scale with mbs x heads / TP)"},
      {"the communication buffers", m.comm_buffers, "lower the micro-batch size or the zero_stage"},
  };
  const Part* worst = &parts[0];
  for (const Part& p : parts)
    if (p.bytes > worst->bytes) worst = &p;
  return fmt::format("needs {} GiB of {} GiB; the largest part is {} ({} GiB): {}; {}", format_gib(m.total()),
                     format_gib(e.memory_limit), worst->name, format_gib(worst->bytes), worst->advice,
                     fit_changes_sentence(ctx, fit_changes(ctx, l)));
}

// The variants of `e`'s layout that the advice would point to, checked against the memory model:
// the first of `candidates` (in order of preference) that fits, or none.
struct Alternative {
  Layout layout;
  double bytes = 0;
  bool fits = false;
};

Alternative first_fitting(const PlanContext& ctx, const Evaluation& e, const std::vector<Layout>& candidates) {
  LayoutEvaluator evaluator(ctx);
  Alternative best;
  for (const Layout& l : candidates) {
    if (!layout_problem(ctx, l).empty()) continue;
    const double bytes = evaluator.memory(l).total();
    if (bytes <= e.memory_limit) return {l, bytes, true};
    if (best.bytes == 0 || bytes < best.bytes) best = {l, bytes, false};
  }
  return best;
}

std::string recompute_sentence(const PlanContext& ctx, const Evaluation& e, double share) {
  const Layout& l = e.layout;
  // Lighter recompute first; with TP, sequence parallelism may make it fit.
  std::vector<RecomputeGranularity> lighter;
  // Fastest first: no recompute, then selective.
  if (l.recompute == RecomputeGranularity::kFull) lighter = {RecomputeGranularity::kNone, RecomputeGranularity::kSelective};
  if (l.recompute == RecomputeGranularity::kSelective) lighter = {RecomputeGranularity::kNone};
  std::vector<bool> sequence_parallel = {l.sequence_parallel};
  if (!l.sequence_parallel && l.tp > 1) sequence_parallel.push_back(true);
  std::vector<Layout> candidates;
  for (const bool sp : sequence_parallel)
    for (RecomputeGranularity r : lighter) {
      Layout c = l;
      c.recompute = r;
      c.sequence_parallel = sp;
      candidates.push_back(c);
    }
  const std::string head = fmt::format("recompute is {} of the step: ", percent(share));
  const Alternative alt = first_fitting(ctx, e, candidates);
  if (alt.fits)
    return head + fmt::format("recompute {}{} fits ({} GiB of {} GiB), use it", recompute_name(alt.layout.recompute),
                              alt.layout.sequence_parallel && !l.sequence_parallel ? " with sequence parallelism" : "",
                              format_gib(alt.bytes), format_gib(e.memory_limit));
  if (alt.bytes > 0)
    return head + fmt::format("lighter recompute does not fit (recompute {}{} needs {} GiB of {} GiB); keep it, or "
                              "shard the activations further (TP / PP)",
                              recompute_name(alt.layout.recompute),
                              alt.layout.sequence_parallel ? " with sequence parallelism" : "", format_gib(alt.bytes),
                              format_gib(e.memory_limit));
  return head + "it is the lightest setting that this layout allows";
}

std::string communication_sentence(const PlanContext& ctx, const Evaluation& e) {
  const TimeBreakdown& t = e.time;
  const Placement& p = e.placement;
  const double share = t.communication() / t.step;
  const std::string head = fmt::format("communication is {} of the step: ", percent(share));
  const int per_node = ctx.cluster.devices_per_node;
  struct Part {
    double seconds;
    int which;
  };
  const Part parts[] = {{t.tp_comm, 0}, {t.ep_comm, 1}, {t.dp_comm, 2}, {t.zero_comm, 3}, {t.pp_comm, 4}};
  const Part* worst = &parts[0];
  for (const Part& part : parts)
    if (part.seconds > worst->seconds) worst = &part;
  const std::string part_share = percent(worst->seconds / t.step);
  switch (worst->which) {
    case 0:
      if (p.tp.crosses_nodes())
        return head + span_words("TP", p.tp) + fmt::format("; keep TP within the {} devices of a node", per_node);
      return head + fmt::format("mostly TP all-reduces ({}) inside the node; lower TP", part_share);
    case 1:
      if (p.ep.crosses_nodes())
        return head + fmt::format("mostly the expert all-to-all ({}); ", part_share) + span_words("EP", p.ep) +
               "; lower EP, raise TP inside the node, or split the all-to-all (moe.a2a_chunks)" +
               (e.layout.dispatcher == MoeDispatcher::kAllToAll
                    ? std::string(", or send each token across nodes once (dispatch=hierarchical)")
                    : std::string());
      return head + fmt::format("mostly the expert all-to-all ({}) inside the node; split it (moe.a2a_chunks)", part_share);
    case 2:
      return head +
             fmt::format("mostly the exposed gradient reduction ({}) over {} data replicas{}; raise micro_batch_num or "
                         "use smaller gradient buckets (grad_bucket_size) so backward hides it",
                         part_share, e.layout.data_replicas(),
                         p.data.crosses_nodes() ? fmt::format(" on {} nodes", p.data.nodes) : "");
    case 3: {
      std::vector<Layout> lower;
      for (int z = 0; z < e.layout.zero_stage; ++z) {
        Layout c = e.layout;
        c.zero_stage = z;
        lower.push_back(c);
      }
      const Alternative alt = first_fitting(ctx, e, lower);
      const std::string traffic =
          fmt::format("mostly ZeRO-{} parameter and gradient traffic ({}); ", e.layout.zero_stage, part_share);
      if (alt.fits)
        return head + traffic + fmt::format("zero_stage {} fits ({} GiB of {} GiB), use it", alt.layout.zero_stage,
                                            format_gib(alt.bytes), format_gib(e.memory_limit));
      if (alt.bytes == 0) return head + traffic + "no lower zero_stage is valid for this layout";
      return head + traffic + fmt::format("no lower zero_stage fits (zero_stage {} needs {} GiB of {} GiB)",
                                          alt.layout.zero_stage, format_gib(alt.bytes), format_gib(e.memory_limit));
    }
    default:
      return head + fmt::format("mostly pipeline send/recv ({}){}; lower PP", part_share,
                                p.pp_hop.crosses_nodes() ? " between nodes" : "");
  }
}

}  // namespace

std::string describe_bottleneck(const PlanContext& ctx, const Evaluation& e) {
  if (!e.fits) return memory_sentence(ctx, e);
  const TimeBreakdown& t = e.time;
  const double bubble = t.bubble / t.step;
  const double comm = t.communication() / t.step;
  if (bubble >= kWorthNaming && bubble >= comm) {
    const Layout& l = e.layout;
    if (l.micro_batch_num < 4 * l.pp)
      return fmt::format("bubble {} of the step: raise micro_batch_num to >= 4 x PP ({})", percent(bubble), 4 * l.pp);
    if (l.schedule != PipelineSchedule::kInterleaved)
      return fmt::format("bubble {} of the step: use the interleaved schedule or lower PP", percent(bubble));
    return fmt::format("bubble {} of the step: lower PP or raise the model chunks per rank (v)", percent(bubble));
  }
  if (comm >= kWorthNaming) return communication_sentence(ctx, e);
  const double recompute = t.recompute / t.step;
  if (recompute >= kWorthNaming) return recompute_sentence(ctx, e, recompute);
  return fmt::format("compute-bound: compute is {} of the step at {} MFU", percent((t.compute + t.recompute) / t.step),
                     percent(e.mfu));
}

}  // namespace moe4d
