// plan/layout_export.cc — moe4d / MindFormers / Megatron-LM renderings of a layout.
#include "plan/layout_export.h"

#include <fmt/format.h>

#include <algorithm>

#include "config/config_loader.h"
#include "core/error.h"
#include "plan/param_count.h"

namespace moe4d {
namespace {

const char* py_bool(bool value) { return value ? "True" : "False"; }

// Megatron's --moe-layer-freq pattern for our rule "layer l is MoE iff l % freq == freq - 1".
std::string megatron_layer_pattern(const ModelConfig& m) {
  const int freq = m.moe.layer_freq;
  if (m.moe.first_dense_layers == 0 && freq == 1) return "1";
  if (m.moe.first_dense_layers == 0 && m.num_layers % freq == 0) return fmt::format("\"([0]*{}+[1])*{}\"", freq - 1, m.num_layers / freq);
  std::string list = "\"[";
  for (int l = 0; l < m.num_layers; ++l) list += fmt::format("{}{}", l ? "," : "", m.is_moe_layer(l) ? 1 : 0);
  return list + "]\"";
}

}  // namespace

ExportFormat parse_export_format(const std::string& name) {
  if (name == "moe4d") return ExportFormat::kMoe4d;
  if (name == "mindformers") return ExportFormat::kMindFormers;
  if (name == "megatron") return ExportFormat::kMegatron;
  fail("--export {}: expected moe4d, mindformers or megatron", name);
}

std::string export_moe4d_config(const PlanContext& ctx, const Layout& layout, const std::optional<Config>& base) {
  Config config;
  std::string header = fmt::format("# moe4d config for {} on {} x {} ({}), exported by `moe4d plan`\n",
                                   layout_to_string(layout), layout.world(), ctx.cluster.device.name, ctx.cluster.name);
  if (base) {
    config = *base;
  } else {
    config.train.steps = 1000;
    config.data.train = "data/train.bin";
    config.data.tokenizer = "bytes";
    header += fmt::format("# model from preset {}: data.train, data.tokenizer and train.steps are template values; set them for your run\n",
                          ctx.model_name);
  }
  config.model = ctx.model;
  config.model.seq_length = ctx.setup.seq_length;
  config.train.global_batch_size = ctx.setup.global_batch;
  config.train.precision = ctx.setup.precision;
  config.train.grad_compression = ctx.setup.grad_compression;
  config.parallel = layout_to_parallel_config(layout, config.parallel);
  config.parallel.gradient_aggregation_group = ctx.setup.grad_buckets;
  config.parallel.grad_bucket_size = ctx.setup.grad_buckets > 0 ? 0 : ctx.setup.grad_bucket_size;
  config.parallel.zero3_prefetch_buckets = ctx.setup.zero3_prefetch_buckets;
  config.parallel.overlap_grad_reduce = ctx.setup.overlap_grad_reduce;
  config.parallel.local_worker_num = ctx.cluster.devices_per_node;
  return header + config_to_yaml(config);
}

std::string export_mindformers(const PlanContext& ctx, const Layout& l) {
  std::string out = fmt::format("# MindFormers parallel settings for {} ({} devices), exported by `moe4d plan`.\n",
                                layout_to_string(l), l.world());
  out += fmt::format("# MindFormers counts expert parallelism inside data_parallel: data_parallel = DP_local {} x EP {}.\n",
                     l.dp, l.ep);
  if (l.order != kDefaultRankOrder)
    out += fmt::format("# Rank order {}: MindFormers numbers ranks TP-fastest; order the rank table to match.\n",
                       rank_order_string(l.order));
  if (l.zero_stage > 0)
    out += fmt::format("# ZeRO-{}: MindSpore's optimizer parallel shards weights and optimizer state (gathered before use);\n"
                       "# gradient_accumulation_shard also shards the accumulated gradients.\n",
                       l.zero_stage);
  out += "parallel:\n";
  out += fmt::format("  enable_parallel_optimizer: {}\n", py_bool(l.zero_stage >= 1));
  if (l.zero_stage >= 1)
    out += fmt::format("  parallel_optimizer_config:\n    gradient_accumulation_shard: {}\n", py_bool(l.zero_stage >= 2));
  if (l.pp > 1) {
    out += fmt::format("  pipeline_config:\n    pipeline_interleave: {}\n    pipeline_scheduler: {}\n",
                       py_bool(l.schedule == PipelineSchedule::kInterleaved),
                       l.schedule == PipelineSchedule::kGPipe ? "gpipe" : "1f1b");
  }
  out += "parallel_config:\n";
  out += fmt::format("  data_parallel: {}\n", l.dp * l.ep);
  out += fmt::format("  model_parallel: {}\n", l.tp);
  out += fmt::format("  pipeline_stage: {}\n", l.pp);
  out += fmt::format("  expert_parallel: {}\n", l.ep);
  out += fmt::format("  micro_batch_num: {}\n", l.micro_batch_num);
  out += "  vocab_emb_dp: False\n";
  // MindFormers counts buckets; size-based bucketing has no MindFormers key, so the count it gives here.
  {
    const int dense_ranks = l.dp * l.ep;
    const StageParams sp = stage_params(ctx.model, l, 0);
    const int count = ctx.setup.grad_buckets > 0 ? ctx.setup.grad_buckets
                                                 : std::max(1, ctx.setup.bucket_count(sp.dense, dense_ranks));
    out += fmt::format("  gradient_aggregation_group: {}\n", count);
  }
  out += "micro_batch_interleave_num: 1\n";
  out += fmt::format("runner_config:\n  batch_size: {}\n", l.micro_batch_size);
  if (l.schedule == PipelineSchedule::kInterleaved)
    out += fmt::format("model:\n  model_config:\n    pp_interleave_num: {}\n", l.virtual_stages);
  out += "recompute_config:\n";
  out += fmt::format("  recompute: {}\n", py_bool(l.recompute == RecomputeGranularity::kFull));
  out += fmt::format("  select_recompute: {}\n", py_bool(l.recompute == RecomputeGranularity::kSelective));
  return out;
}

std::string export_megatron(const PlanContext& ctx, const Layout& l) {
  const ModelConfig& m = ctx.model;
  std::string out = fmt::format("# Megatron-LM arguments for {} ({} devices), exported by `moe4d plan`.\n",
                                layout_to_string(l), l.world());
  out += fmt::format("# Megatron derives data parallelism from the world size: DP = {} / (TP {} x PP {}) = {} (EP {} inside it).\n",
                     l.world(), l.tp, l.pp, l.dp * l.ep, l.ep);
  if (l.order != kDefaultRankOrder)
    out += fmt::format("# Rank order {} cannot be expressed: Megatron-LM fixes tp-cp-ep-dp-pp.\n", rank_order_string(l.order));
  if (l.schedule == PipelineSchedule::kGPipe && l.pp > 1)
    out += "# Megatron-LM has no GPipe schedule; it runs this layout with 1F1B.\n";
  std::vector<std::string> args;
  auto arg = [&](const std::string& name, const std::string& value = "") {
    args.push_back(value.empty() ? name : name + " " + value);
  };
  arg("--tensor-model-parallel-size", std::to_string(l.tp));
  arg("--pipeline-model-parallel-size", std::to_string(l.pp));
  if (m.is_moe()) arg("--expert-model-parallel-size", std::to_string(l.ep));
  if (l.schedule == PipelineSchedule::kInterleaved)
    arg("--num-layers-per-virtual-pipeline-stage", std::to_string(m.num_layers / (l.pp * l.virtual_stages)));
  arg("--num-layers", std::to_string(m.num_layers));
  arg("--hidden-size", std::to_string(m.hidden_size));
  arg("--ffn-hidden-size", std::to_string(m.ffn_hidden_size));
  arg("--num-attention-heads", std::to_string(m.num_heads));
  if (m.kv_heads() != m.num_heads) {
    arg("--group-query-attention");
    arg("--num-query-groups", std::to_string(m.kv_heads()));
  }
  arg("--seq-length", std::to_string(ctx.setup.seq_length));
  arg("--max-position-embeddings", std::to_string(ctx.setup.seq_length));
  arg("--tokenizer-type", "NullTokenizer");
  arg("--vocab-size", std::to_string(m.vocab_size));
  arg("--micro-batch-size", std::to_string(l.micro_batch_size));
  arg("--global-batch-size", std::to_string(ctx.setup.global_batch));
  arg("--swiglu");
  arg("--normalization", "RMSNorm");
  arg("--norm-epsilon", fmt::format("{}", m.norm_eps));
  arg("--disable-bias-linear");
  arg("--position-embedding-type", "rope");
  arg("--rotary-base", fmt::format("{}", m.rope_theta));
  if (!m.tie_embeddings) arg("--untie-embeddings-and-output-weights");
  if (m.is_moe()) {
    arg("--num-experts", std::to_string(m.moe.num_experts));
    arg("--moe-router-topk", std::to_string(m.moe.top_k));
    arg("--moe-layer-freq", megatron_layer_pattern(m));
    if (m.expert_ffn() != m.ffn_hidden_size) arg("--moe-ffn-hidden-size", std::to_string(m.expert_ffn()));
    if (m.shared_ffn() > 0) arg("--moe-shared-expert-intermediate-size", std::to_string(m.shared_ffn()));
    if (m.moe.score_function == RouterScore::kSigmoid) {
      arg("--moe-router-score-function", "sigmoid");
      if (!m.moe.normalize_top_k)
        out += "# Unnormalised sigmoid weights cannot be expressed: Megatron-LM renormalises top-k > 1 sigmoid scores.\n";
    } else if (!m.moe.normalize_top_k) {
      arg("--moe-router-pre-softmax");  // softmax over all experts, top-k weights kept as they are
    }
    if (m.moe.capacity_factor) arg("--moe-expert-capacity-factor", fmt::format("{}", *m.moe.capacity_factor));
    arg("--moe-aux-loss-coeff", fmt::format("{}", m.moe.aux_loss_coeff));
    if (m.moe.z_loss_coeff > 0) arg("--moe-z-loss-coeff", fmt::format("{}", m.moe.z_loss_coeff));
  }
  if (ctx.setup.precision == Precision::kBF16) arg("--bf16");
  if (ctx.setup.precision == Precision::kFP16) arg("--fp16");
  if (l.recompute == RecomputeGranularity::kFull) {
    arg("--recompute-granularity", "full");
    arg("--recompute-method", "uniform");
    arg("--recompute-num-layers", "1");
  } else if (l.recompute == RecomputeGranularity::kSelective) {
    arg("--recompute-granularity", "selective");
  }
  if (l.zero_stage == 1) arg("--use-distributed-optimizer");
  if (l.zero_stage >= 2) {
    arg("--use-custom-fsdp");
    arg("--data-parallel-sharding-strategy", l.zero_stage == 2 ? "optim_grads" : "optim_grads_params");
  }
  if (ctx.setup.overlap_grad_reduce && l.dp * l.ep > 1) arg("--overlap-grad-reduce");
  for (size_t i = 0; i < args.size(); ++i) out += args[i] + (i + 1 < args.size() ? " \\\n" : "\n");
  return out;
}

std::string export_layout(ExportFormat format, const PlanContext& ctx, const Layout& layout,
                          const std::optional<Config>& base) {
  switch (format) {
    case ExportFormat::kMoe4d: return export_moe4d_config(ctx, layout, base);
    case ExportFormat::kMindFormers: return export_mindformers(ctx, layout);
    case ExportFormat::kMegatron: return export_megatron(ctx, layout);
  }
  return "";
}

}  // namespace moe4d
