// plan/memory_fit.cc — the planner's memory model applied to a config about to be trained.
#include "plan/memory_fit.h"

#include <utility>
#include <vector>

#include "core/error.h"
#include "plan/layout_evaluator.h"
#include "plan/param_count.h"

namespace moe4d {
namespace {

std::string gib(double bytes) { return fmt::format("{:.1f} GiB", bytes / (1024.0 * 1024.0 * 1024.0)); }

Layout layout_of(const ParallelConfig& p, int64_t global_batch) {
  Layout l;
  l.dp = p.data_parallel;
  l.ep = p.expert_parallel;
  l.tp = p.tensor_parallel;
  l.pp = p.pipeline_parallel;
  l.micro_batch_num = p.micro_batch_num;
  l.micro_batch_size = static_cast<int>(global_batch / (int64_t{l.dp} * l.ep * l.micro_batch_num));
  l.schedule = p.pipeline_schedule;
  l.virtual_stages = p.pipeline_schedule == PipelineSchedule::kInterleaved ? p.virtual_pipeline : 1;
  l.recompute = p.recompute;
  l.zero_stage = p.zero_stage;
  l.order = parse_rank_order(p.rank_order);
  return l;
}

// The key behind the biggest block of parameters, with its value.
std::string largest_parameter_key(const ModelConfig& m) {
  const ModelParamCount n = count_model_params(m);
  const std::pair<double, std::string> parts[] = {
      {n.experts, fmt::format("model.moe.num_experts ({}; the experts hold {:.3g} parameters)", m.moe.num_experts,
                              n.experts)},
      {n.embedding + n.head, fmt::format("model.vocab_size ({}; embedding and head hold {:.3g} parameters)",
                                         m.vocab_size, n.embedding + n.head)},
      {n.attention, fmt::format("model.hidden_size ({}; attention holds {:.3g} parameters)", m.hidden_size,
                                n.attention)},
      {n.dense_ffn, fmt::format("model.ffn_hidden_size ({}; the dense FFNs hold {:.3g} parameters)",
                                m.ffn_hidden_size, n.dense_ffn)},
  };
  const auto* best = &parts[0];
  for (const auto& part : parts)
    if (part.first > best->first) best = &part;
  return best->second;
}

// What would shrink the largest parts, in the config's own keys.
std::string advice(const Config& c, const MemoryBreakdown& m) {
  std::vector<std::string> tips;
  const ParallelConfig& p = c.parallel;
  if (m.activations + m.workspace > m.state()) {
    if (p.recompute != RecomputeGranularity::kFull) tips.push_back("parallel_config.recompute: true");
    tips.push_back("a larger parallel_config.micro_batch_num (smaller micro-batches)");
    tips.push_back("a smaller model.seq_length or train.global_batch_size");
  } else {
    tips.push_back(fmt::format("a smaller {}", largest_parameter_key(c.model)));
    if (p.zero_stage < 3) tips.push_back(fmt::format("parallel_config.zero_stage: {}", p.zero_stage + 1));
    tips.push_back("more tensor_parallel / pipeline_parallel / expert_parallel ranks");
  }
  std::string out;
  for (const std::string& t : tips) out += fmt::format("{}{}", out.empty() ? "" : ", ", t);
  return out;
}

}  // namespace

MemoryBreakdown config_memory_per_rank(const Config& config) {
  PlanContext ctx;
  ctx.model_name = config.source;
  ctx.model = config.model;
  ctx.setup.global_batch = config.train.global_batch_size;
  ctx.setup.seq_length = config.model.seq_length;
  ctx.setup.precision = config.train.precision;
  ctx.setup.grad_compression = config.train.grad_compression;
  ctx.setup.grad_buckets = config.parallel.gradient_aggregation_group;
  ctx.setup.grad_bucket_size = config.parallel.grad_bucket_size;
  ctx.setup.zero3_prefetch_buckets = config.parallel.zero3_prefetch_buckets;
  ctx.setup.overlap_grad_reduce = config.parallel.overlap_grad_reduce;
  ctx.cluster.name = "this machine";
  ctx.cluster.devices_per_node = config.parallel.world_size();
  ctx.cluster.memory_reserve_fraction = 0;
  LayoutEvaluator evaluator(ctx);
  return evaluator.memory(layout_of(config.parallel, config.train.global_batch_size));
}

void check_memory_fits(const Config& config, const RankMemory& available) {
  // For very deep configs a lower bound first, in O(1): the model walks every layer, which for a
  // config with billions of layers would take longer than the answer deserves. The attention weights of one rank's layers
  // with their gradients and AdamW state (16 bytes a parameter, sharded as far as ZeRO can).
  const ModelConfig& model = config.model;
  const ParallelConfig& p = config.parallel;
  const double shards = p.zero_stage >= 1 ? static_cast<double>(p.data_parallel) * p.expert_parallel : 1.0;
  const double floor = static_cast<double>(model.num_layers) / p.pipeline_parallel * 4.0 * model.hidden_size *
                       model.hidden_size / p.tensor_parallel * 16.0 / shards;
  if (model.num_layers > 65536 && floor > available.bytes)
    fail("{}: the layout needs at least {} per rank (the attention weights of model.num_layers {} with gradients and "
         "optimizer state alone), this machine has {} ({}); try a smaller model.num_layers or model.hidden_size, or "
         "more pipeline_parallel / tensor_parallel ranks",
         config.source, gib(floor), model.num_layers, gib(available.bytes), available.description);
  const MemoryBreakdown m = config_memory_per_rank(config);
  if (m.total() <= available.bytes) return;
  fail("{}: the layout needs {} per rank (weights, gradients and optimizer state {}, activations and workspace {}), "
       "this machine has {} ({}); try {}",
       config.source, gib(m.total()), gib(m.state() + m.zero3_gather), gib(m.activations + m.workspace),
       gib(available.bytes), available.description, advice(config, m));
}

}  // namespace moe4d
