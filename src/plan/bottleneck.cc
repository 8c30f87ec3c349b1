// plan/bottleneck.cc — naming the limit of a layout (rules in plan/bottleneck.h).
#include "plan/bottleneck.h"

#include <fmt/format.h>

#include "plan/search.h"

namespace moe4d {
namespace {

constexpr double kWorthNaming = 0.15;

std::string percent(double fraction) { return fmt::format("{:.0f}%", 100 * fraction); }

std::string span_words(const char* what, const GroupSpan& span) {
  return fmt::format("the {} group crosses nodes ({} ranks over {} nodes)", what, span.size, span.nodes);
}

std::string memory_sentence(const Evaluation& e) {
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
  return fmt::format("needs {} GiB of {} GiB; the largest part is {} ({} GiB): {}", format_gib(m.total()),
                     format_gib(e.memory_limit), worst->name, format_gib(worst->bytes), worst->advice);
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
               "; lower EP, raise TP inside the node, or split the all-to-all (moe.a2a_chunks)";
      return head + fmt::format("mostly the expert all-to-all ({}) inside the node; split it (moe.a2a_chunks)", part_share);
    case 2:
      return head +
             fmt::format("mostly the exposed gradient reduction ({}) over {} data replicas{}; raise micro_batch_num or "
                         "use smaller gradient buckets (grad_bucket_size) so backward hides it",
                         part_share, e.layout.data_replicas(),
                         p.data.crosses_nodes() ? fmt::format(" on {} nodes", p.data.nodes) : "");
    case 3:
      return head + fmt::format("mostly ZeRO-{} parameter and gradient traffic ({}); use a lower zero_stage if memory allows",
                                e.layout.zero_stage, part_share);
    default:
      return head + fmt::format("mostly pipeline send/recv ({}){}; lower PP", part_share,
                                p.pp_hop.crosses_nodes() ? " between nodes" : "");
  }
}

}  // namespace

std::string describe_bottleneck(const PlanContext& ctx, const Evaluation& e) {
  if (!e.fits) return memory_sentence(e);
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
  if (recompute >= kWorthNaming)
    return fmt::format("recompute is {} of the step: use selective recompute or none if memory allows", percent(recompute));
  return fmt::format("compute-bound: compute is {} of the step at {} MFU", percent((t.compute + t.recompute) / t.step),
                     percent(e.mfu));
}

}  // namespace moe4d
