// plan/layout_export.cc — moe4d / MindFormers / Megatron-LM renderings of a layout.
#include "plan/layout_export.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <functional>

#include "config/config_loader.h"
#include "config/config_names.h"
#include "core/error.h"
#include "plan/param_count.h"

namespace moe4d {
namespace {

const char* py_bool(bool value) { return value ? "True" : "False"; }

// Megatron's --moe-layer-freq pattern for our rule "layer l is MoE iff l >= first_dense_layers and
// l % freq == freq - 1" (Megatron's integer N puts the MoE layer first in each period, so only freq 1
// without dense layers is the plain "1"). A list expression of digits, brackets, + and * — the only
// characters megatron/training/arguments.py _eval_pattern admits — whose length is the layer count.
std::string megatron_layer_pattern(const ModelConfig& m) {
  const int64_t freq = m.moe.layer_freq;
  if (!m.moe.dense_layers.empty()) {  // model.moe.dense_layers: the whole list, one digit per layer
    std::string list;
    for (int l = 0; l < m.num_layers; ++l) list += fmt::format("{}{}", l ? "," : "", m.is_moe_layer(l) ? 1 : 0);
    return fmt::format("\"[{}]\"", list);
  }
  if (m.moe.first_dense_layers == 0 && freq == 1) return "1";
  const int64_t first = m.moe.first_dense_layers;
  const int64_t j0 = first + (freq - 1 - first % freq + freq) % freq;  // the first MoE layer
  const int64_t n = moe_layers_in(m, 0, m.num_layers);
  const int64_t rest = m.num_layers - (j0 + (n - 1) * freq + 1);
  return fmt::format("\"[0]*{}+([1]+[0]*{})*{}+[1]+[0]*{}\"", j0, freq - 1, n - 1, rest);
}

// A shell word for a value a user sets per node: "${NAME:?message}" stops the command with the message
// when NAME is unset.
std::string required_env(const char* name, const char* what) { return fmt::format("\"${{{}:?{}}}\"", name, what); }

// The router and balancing flags of a DeepSeek-V3-style router, as Megatron-Core's TransformerConfig
// fields (megatron/core/transformer/transformer_config.py) name them.
void megatron_router_args(const ModelConfig& m, const std::function<void(const std::string&, const std::string&)>& arg) {
  const MoeConfig& moe = m.moe;
  if (moe.num_groups > 1) {
    arg("--moe-router-num-groups", std::to_string(moe.num_groups));
    arg("--moe-router-group-topk", std::to_string(moe.group_topk));
  }
  if (moe.routed_scaling_factor != 1.0)
    arg("--moe-router-topk-scaling-factor", fmt::format("{}", moe.routed_scaling_factor));
  if (moe.router_bias_update_rate > 0 && moe.score_function == RouterScore::kSigmoid) {
    arg("--moe-router-enable-expert-bias", "");
    arg("--moe-router-bias-update-rate", fmt::format("{}", moe.router_bias_update_rate));
  }
  arg("--moe-router-load-balancing-type",
      std::string(config_names::name_of(config_names::kLoadBalancingNames, moe.load_balancing_type)));
}

// Header comments on where those flags do not mean what moe4d runs.
std::string megatron_router_notes(const ModelConfig& m) {
  const MoeConfig& moe = m.moe;
  std::string out;
  if (moe.num_groups > 1 && moe.top_k != 2 * moe.group_topk)
    out += fmt::format("# Megatron-Core scores an expert group by the sum of its top top_k / group_topk = {} scores, "
                       "moe4d (and HF DeepSeek-V3) by its top 2: the routing differs unless top_k = 2 x group_topk.\n",
                       moe.top_k / moe.group_topk);
  if (moe.router_bias_update_rate > 0 && moe.score_function != RouterScore::kSigmoid)
    out += "# The aux-loss-free selection bias with softmax scores cannot be expressed: Megatron-Core's expert bias "
           "needs --moe-router-score-function sigmoid.\n";
  if (moe.load_balancing_type == LoadBalancing::kGlobalAuxLoss)
    out += "# global_aux_loss: Megatron-Core averages the router gradient over DP after each rank attaches its share, "
           "so its coefficient acts as coeff / DP on the logged loss; moe4d's applies to the logged loss.\n";
  return out;
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
  config.model.moe.dispatcher = layout.dispatcher;
  config.parallel.gradient_aggregation_group = ctx.setup.grad_buckets;
  config.parallel.grad_bucket_size = ctx.setup.grad_buckets > 0 ? 0 : ctx.setup.grad_bucket_size;
  config.parallel.zero3_prefetch_buckets = ctx.setup.zero3_prefetch_buckets;
  config.parallel.overlap_grad_reduce = ctx.setup.overlap_grad_reduce;
  config.parallel.local_worker_num = ctx.cluster.devices_per_node;
  return header + config_to_yaml(config);
}

// Key names and constraints are MindFormers' own (mindformers/trainer/config_args.py ParallelConfig /
// ParallelContextConfig, mindformers/modules/transformer/transformer.py TransformerOpParallelConfig and
// TransformerRecomputeConfig, mindformers/modules/transformer/moe.py MoEConfig and _check_moe_config,
// mindformers/trainer/base_trainer.py's batch handling); tests/plan/export_test.cc checks them.
std::string export_mindformers(const PlanContext& ctx, const Layout& l) {
  const ModelConfig& m = ctx.model;
  // MindFormers' data_parallel includes the expert-parallel ranks; its world is data_parallel x
  // model_parallel x context_parallel x pipeline_stage (and data_parallel x context_parallel, here
  // dp x ep, is what expert_parallel must divide).
  const int mf_dp = l.dense_replicas();
  if (m.is_moe() && !(m.moe.aux_loss_coeff > 0 && m.moe.aux_loss_coeff < 1))
    fail("--export mindformers: MindFormers' MoEConfig needs 0 < aux_loss_factor < 1, but moe.aux_loss_coeff is {}; "
         "set moe.aux_loss_coeff in (0, 1) or export another format",
         m.moe.aux_loss_coeff);
  std::string out = fmt::format("# MindFormers parallel settings for {} ({} devices), exported by `moe4d plan`.\n",
                                layout_to_string(l), l.world());
  out += fmt::format("# MindFormers counts expert parallelism inside data_parallel: data_parallel = DP_local {} x EP {}{}.\n",
                     l.dp, l.ep, l.cp > 1 ? fmt::format(" / CP {}", l.cp) : std::string());
  if (l.order != kDefaultRankOrder)
    out += fmt::format("# Rank order {}: MindFormers numbers ranks TP-fastest; order the rank table to match.\n",
                       rank_order_string(l.order));
  if (l.zero_stage > 0)
    out += fmt::format("# ZeRO-{}: MindSpore's optimizer parallel shards weights and optimizer state over data_parallel\n"
                       "# (weights gathered before use); gradient_accumulation_shard (ZeRO-2 and 3) also shards the\n"
                       "# accumulated gradients, and a threshold of 0 KB (ZeRO-3) shards every parameter.\n",
                       l.zero_stage);
  if (l.pp == 1 && l.micro_batch_num > 1)
    out += "# No pipeline: MindFormers ignores micro_batch_num (it resets it to 1), so the micro-batches per step are\n"
           "# runner_config.gradient_accumulation_steps.\n";
  if (l.dispatcher == MoeDispatcher::kHierarchical)
    out += "# dispatch=hierarchical: MindFormers' moe_config has no node-aware dispatch key; MindSpeed's counterpart\n"
           "# is --moe-hierarchical-alltoallv (docs/moe.md §10).\n";
  if (m.is_moe() && m.moe.layer_freq > 1)
    out += fmt::format("# moe.layer_freq {}: MindFormers' moe_config has no layer frequency; set the model's own MoE layer list.\n",
                       m.moe.layer_freq);
  if (m.is_moe() && !m.moe.dense_layers.empty())
    out += fmt::format("# moe.dense_layers {}: set the model's mlp_only_layers (Qwen3-MoE-style models) to them.\n",
                       fmt::join(m.moe.dense_layers, ", "));
  if (m.is_moe() && m.moe.first_dense_layers > 0)
    out += fmt::format("# moe.first_dense_layers {}: set the model's first_k_dense_replace (DeepSeek-style models) to it.\n",
                       m.moe.first_dense_layers);
  if (m.is_moe())
    out += fmt::format("# moe_intermediate_size {} is the routed experts' width; MindFormers' legacy llama network sizes them by\n"
                       "# model_config.intermediate_size instead (set it to {} there){}.\n",
                       m.expert_ffn(), m.expert_ffn(),
                       m.shared_ffn() > 0 && m.shared_ffn() % m.expert_ffn() != 0
                           ? fmt::format("; the shared experts' width {} is not a multiple of it, which MindFormers' "
                                         "shared_expert_num cannot express",
                                         m.shared_ffn())
                           : "");
  // mindformers/tools/check_rules.py _check_moe_parallel_valid: MoE with model_parallel > 1 needs
  // use_seq_parallel (it raises otherwise), so it is on whatever the plan chose.
  const bool moe_needs_sp = m.is_moe() && l.tp > 1;
  const bool use_seq_parallel = l.tp > 1 && (l.sequence_parallel || moe_needs_sp);
  if (moe_needs_sp && !l.sequence_parallel)
    out += "# use_seq_parallel: MindFormers' check_rules refuses MoE with model_parallel > 1 without it. This layout\n"
           "# was planned without it: MindFormers' activation memory is below the plan's (sp=1 plans it with).\n";
  // gradient_aggregation_group is MindFormers' number of gradient fusion groups: layer i joins group
  // i / ((layers + 1) / g) + 1 (mindformers/models/utils.py LayerSetting.set), so a group is g-th of the
  // layers; with pipeline stages every layer is group 2 and only the embedding and final norm use it.
  const StageParams stage0 = stage_params(ctx.model, l, 0);
  const int buckets = ctx.setup.grad_buckets > 0 ? ctx.setup.grad_buckets
                                                 : std::max(1, ctx.setup.bucket_count(stage0.dense, mf_dp));
  const int fusion_groups = std::max(1, std::min(buckets, m.num_layers));
  out += fmt::format("# gradient_aggregation_group {}: gradient fusion groups over the layers, as close to the plan's {} "
                     "gradient bucket{} per stage as whole layers allow{}.\n",
                     fusion_groups, buckets, buckets == 1 ? "" : "s",
                     l.pp > 1 ? " (with pipeline stages MindFormers puts every layer in one group)" : "");
  // semi_auto_parallel (1) with full_batch: the mode in which MindFormers reads data_parallel, the
  // pipeline and gradient accumulation; global batch = batch_size x data_parallel x micro-batches.
  out += "parallel:\n  parallel_mode: 1\n  full_batch: True\n  gradients_mean: False\n";
  out += fmt::format("  enable_alltoall: {}\n", py_bool(m.is_moe() && l.ep > 1));
  out += fmt::format("  enable_parallel_optimizer: {}\n", py_bool(l.zero_stage >= 1));
  if (l.zero_stage >= 1)
    out += fmt::format("  parallel_optimizer_config:\n    gradient_accumulation_shard: {}\n    parallel_optimizer_threshold: {}\n",
                       py_bool(l.zero_stage >= 2), l.zero_stage >= 3 ? 0 : 64);
  if (l.pp > 1) {
    out += fmt::format("  pipeline_config:\n    pipeline_interleave: {}\n    pipeline_scheduler: {}\n",
                       py_bool(l.schedule == PipelineSchedule::kInterleaved),
                       l.schedule == PipelineSchedule::kGPipe ? "gpipe" : "1f1b");
  }
  out += "parallel_config:\n";
  out += fmt::format("  data_parallel: {}\n", mf_dp);
  out += fmt::format("  model_parallel: {}\n", l.tp);
  if (l.cp > 1) out += fmt::format("  context_parallel: {}\n", l.cp);
  out += fmt::format("  pipeline_stage: {}\n", l.pp);
  out += fmt::format("  expert_parallel: {}\n", l.ep);
  out += fmt::format("  micro_batch_num: {}\n", l.pp > 1 ? l.micro_batch_num : 1);
  // Sequence parallelism as the plan evaluated it, and always for MoE with TP (check_rules, above);
  // MindFormers shards the sequence over model_parallel, so only with TP.
  out += fmt::format("  use_seq_parallel: {}\n", py_bool(use_seq_parallel));
  // vocab_emb_dp False: the embedding is sharded over model_parallel, as moe4d shards the vocabulary over TP.
  out += "  vocab_emb_dp: False\n";
  out += fmt::format("  gradient_aggregation_group: {}\n", fusion_groups);
  out += "micro_batch_interleave_num: 1\n";
  out += fmt::format("runner_config:\n  batch_size: {}\n", l.micro_batch_size);
  out += fmt::format("  gradient_accumulation_steps: {}\n", l.pp > 1 ? 1 : l.micro_batch_num);
  if (m.is_moe()) {
    out += "moe_config:\n";
    out += fmt::format("  expert_num: {}\n", m.moe.num_experts);
    out += fmt::format("  num_experts_chosen: {}\n", m.moe.top_k);
    // Dropless: capacity = factor x tokens x k / experts >= tokens when factor = experts / k, so no token drops.
    const double factor = m.moe.capacity_factor ? *m.moe.capacity_factor
                                                : static_cast<double>(m.moe.num_experts) / m.moe.top_k;
    out += fmt::format("  capacity_factor: {}\n", factor);
    out += fmt::format("  aux_loss_factor: {}\n", m.moe.aux_loss_coeff);
    if (m.moe.z_loss_coeff > 0) out += fmt::format("  z_loss_factor: {}\n", m.moe.z_loss_coeff);
    if (m.moe.router_bias_update_rate > 0)
      out += fmt::format("  balance_via_topk_bias: True\n  topk_bias_update_rate: {}\n", m.moe.router_bias_update_rate);
    // MoEConfig.moe_intermediate_size is the routed experts' width (parallel_core/transformer_config_utils.py
    // maps it to moe_ffn_hidden_size), not the dense FFN's.
    out += fmt::format("  moe_intermediate_size: {}\n", m.expert_ffn());
    out += fmt::format("  norm_topk_prob: {}\n", py_bool(m.moe.normalize_top_k));
    if (m.moe.score_function == RouterScore::kSigmoid) out += "  use_gating_sigmoid: True\n";
    out += "  router_dense_type: float32\n";  // moe4d scores the router in fp32
    // Legacy llama_layer.py: the shared experts are one FFN of the routed width x shared_expert_num.
    if (m.shared_ffn() > 0 && m.shared_ffn() % m.expert_ffn() == 0)
      out += fmt::format("  shared_expert_num: {}\n", m.shared_ffn() / m.expert_ffn());
    out += "  routing_policy: TopkRouterV1\n";
  }
  // model.model_config (the keys of MindFormers' mcore-style Qwen3 configs, e.g. configs/qwen3/
  // pretrain_qwen3_32b_4k.yaml): the head width where it is not hidden_size / heads, q/k RMSNorm.
  std::string model_config;
  if (l.schedule == PipelineSchedule::kInterleaved)
    model_config += fmt::format("    pp_interleave_num: {}\n", l.virtual_stages);
  if (m.head_size > 0) model_config += fmt::format("    head_dim: {}\n", m.head_dim());
  if (m.qk_norm) model_config += "    qk_layernorm: True\n";
  if (!model_config.empty()) out += "model:\n  model_config:\n" + model_config;
  out += "recompute_config:\n";
  out += fmt::format("  recompute: {}\n", py_bool(l.recompute == RecomputeGranularity::kFull));
  out += fmt::format("  select_recompute: {}\n", py_bool(l.recompute == RecomputeGranularity::kSelective));
  out += "  parallel_optimizer_comm_recompute: False\n  mp_comm_recompute: True\n  recompute_slice_activation: False\n";
  return out;
}

// The rules below are Megatron-Core's own (megatron/training/arguments.py parse_args / validate_args,
// megatron/core/transformer/transformer_config.py __post_init__ and megatron/core/transformer/moe/
// moe_layer.py MoELayer.forward at the commit docs/planner.md names); tests/plan/megatron_export_test.cc
// checks each of them, and every flag against that parser's names.
std::string export_megatron(const PlanContext& ctx, const Layout& l, const std::optional<Config>& base) {
  const ModelConfig& m = ctx.model;
  const TrainConfig train = base ? base->train : TrainConfig{};
  const bool fsdp = l.zero_stage >= 3;
  // The plan's choice, and always for MoE with TP: Megatron-Core refuses MoE with TP > 1 without it.
  const bool required = m.is_moe() && l.tp > 1;
  const bool sequence_parallel = l.tp > 1 && (l.sequence_parallel || required);
  const int per_node = std::min(ctx.cluster.devices_per_node, l.world());
  const int nodes = l.world() / per_node;
  std::string out = fmt::format("# Megatron-LM run of {} ({} devices: {} node{} x {}), exported by `moe4d plan`.\n",
                                layout_to_string(l), l.world(), nodes, nodes == 1 ? "" : "s", per_node);
  out += fmt::format("# Run it from Megatron-LM's top directory on every node{}.\n",
                     nodes > 1 ? fmt::format(", with NODE_RANK = that node's index (0..{}) and MASTER_ADDR = node 0's "
                                             "address",
                                             nodes - 1)
                               : "");
  if (l.cp > 1)
    out += fmt::format("# Megatron derives data parallelism from the world size: DP = {} / (TP {} x CP {} x PP {}) = {} "
                       "(EP {} inside DP x CP).\n",
                       l.world(), l.tp, l.cp, l.pp, l.dense_replicas(), l.ep);
  else
    out += fmt::format("# Megatron derives data parallelism from the world size: DP = {} / (TP {} x PP {}) = {} (EP {} inside it).\n",
                       l.world(), l.tp, l.pp, l.dp * l.ep, l.ep);
  out += "# Data: --mock-data trains on synthetic tokens; for a corpus use --data-path PREFIX (moe4d prepare\n"
         "# --output-format megatron writes one) with the tokenizer it was made with.\n";
  if (!base)
    out += fmt::format("# Model from preset {}: --train-iters and the optimizer settings are moe4d's defaults; set them.\n",
                       ctx.model_name);
  if (l.order != kDefaultRankOrder)
    out += fmt::format("# Rank order {} cannot be expressed: Megatron-LM fixes tp-cp-ep-dp-pp.\n", rank_order_string(l.order));
  if (l.schedule == PipelineSchedule::kGPipe && l.pp > 1)
    out += "# Megatron-LM has no GPipe schedule; it runs this layout with 1F1B.\n";
  if (m.is_moe()) out += megatron_router_notes(m);
  if (required && !l.sequence_parallel)
    out += "# --sequence-parallel: Megatron-Core refuses MoE with TP > 1 without it (MoELayer.forward raises). This\n"
           "# layout was planned without it: Megatron's activation memory is below the plan's (sp=1 plans it with).\n";
  else if (sequence_parallel)
    out += "# --sequence-parallel: the layout was planned with sequence parallelism (moe4d runs it too:\n"
           "# parallel_config.sequence_parallel).\n";
  if (l.zero_stage == 1 || l.zero_stage == 2)
    out += fmt::format("# ZeRO-{}: Megatron's distributed optimizer shards the optimizer state and reduce-scatters the gradients.\n",
                       l.zero_stage);
  if (fsdp)
    out += "# ZeRO-3: Megatron-FSDP sharding parameters, gradients and optimizer state (it requires --ckpt-format fsdp_dtensor).\n";
  // moe4d rotates the pairs (2i, 2i+1) of every head (kernels/rope.h) by p theta^(-2i/head_dim): Megatron's
  // rotary_interleaved (rope_utils.py _rotate_half) over the whole head (--rotary-percent 1.0, its default).
  if (m.is_mla())
    // TransformerConfig.__post_init__ refuses rotary_interleaved with MLA: its MLA RoPE (rope_utils.py) takes
    // the rotary part as (2i, 2i+1) pairs itself, as HF's rope_interleave does, and older versions refuse
    // RoPE fusion with MLA.
    out += "# RoPE: MLA's rotary part in (2i, 2i+1) pairs is Megatron's MLA default (no --rotary-interleaved,\n"
           "# which MLA refuses); --no-rope-fusion, which MLA lacks in older Megatron-Core.\n";
  else
    out += "# RoPE: moe4d rotates the pairs (2i, 2i+1) = --rotary-interleaved. Megatron's fused RoPE kernel (its\n"
           "# default) takes interleaved pairs only with Transformer Engine >= 2.3 (TransformerConfig.__post_init__);\n"
           "# with an older one add --no-rope-fusion.\n";
  if (m.rope_scaling.enabled() && !m.is_mla())
    out += "# YaRN (model.rope_scaling) is left out: Megatron-LM applies it only to multi-latent attention.\n";
  const double theta = std::round(m.rope_theta);
  if (theta != m.rope_theta)
    out += fmt::format("# rope_theta {} is not an integer; Megatron's --rotary-base takes integers, so it is rounded.\n",
                       m.rope_theta);
  if (m.is_moe() && m.moe.num_experts / l.ep > 1)
    out += fmt::format("# --moe-grouped-gemm: {} local experts per rank run as one grouped GEMM (compute capability >= 8,\n"
                       "# which validate_args asserts: A100 and later).\n",
                       m.moe.num_experts / l.ep);
  // Megatron asserts CUDA_DEVICE_MAX_CONNECTIONS=1 with TP or CP > 1 (it orders the TP communication before the
  // GEMMs that use it) unless FSDP is on, which asserts the opposite.
  if (fsdp)
    out += "unset CUDA_DEVICE_MAX_CONNECTIONS\n";
  else if (l.tp > 1 || l.cp > 1)  // validate_args asserts it for TP and for CP alike
    out += "export CUDA_DEVICE_MAX_CONNECTIONS=1\n";
  // The launcher: torchrun with one process per device of each node.
  out += fmt::format("torchrun --nproc_per_node {} --nnodes {} \\\n", per_node, nodes);
  if (nodes > 1) {
    out += fmt::format("  --node_rank {} \\\n", required_env("NODE_RANK", "set NODE_RANK to this node's index"));
    out += fmt::format("  --master_addr {} \\\n", required_env("MASTER_ADDR", "set MASTER_ADDR to node 0's address"));
  } else {
    out += "  --node_rank 0 \\\n  --master_addr localhost \\\n";
  }
  out += "  --master_port \"${MASTER_PORT:-6000}\" \\\n";
  out += "  pretrain_gpt.py \\\n";
  std::vector<std::string> args;
  auto arg = [&](const std::string& name, const std::string& value = "") {
    args.push_back(value.empty() ? name : name + " " + value);
  };
  arg("--tensor-model-parallel-size", std::to_string(l.tp));
  arg("--pipeline-model-parallel-size", std::to_string(l.pp));
  if (l.cp > 1) arg("--context-parallel-size", std::to_string(l.cp));
  if (m.is_moe()) arg("--expert-model-parallel-size", std::to_string(l.ep));
  if (sequence_parallel) arg("--sequence-parallel");
  if (l.schedule == PipelineSchedule::kInterleaved)
    arg("--num-virtual-stages-per-pipeline-rank", std::to_string(l.virtual_stages));
  arg("--num-layers", std::to_string(m.num_layers));
  arg("--hidden-size", std::to_string(m.hidden_size));
  arg("--ffn-hidden-size", std::to_string(m.ffn_hidden_size));
  arg("--num-attention-heads", std::to_string(m.num_heads));
  // --kv-channels: the head width where it is not hidden_size / num_heads (arguments.py defaults it to that).
  if (m.head_size > 0 && (m.hidden_size % m.num_heads != 0 || m.head_size != m.hidden_size / m.num_heads))
    arg("--kv-channels", std::to_string(m.head_dim()));
  // TransformerConfig.qk_layernorm: a norm of --normalization (RMSNorm) over each head's kv_channels
  // elements of q and k before RoPE (megatron/core/transformer/attention.py), as model.qk_layernorm.
  if (m.qk_norm) arg("--qk-layernorm");
  if (m.kv_heads() != m.num_heads) {
    arg("--group-query-attention");
    arg("--num-query-groups", std::to_string(m.kv_heads()));
  }
  if (m.is_mla()) {
    // Megatron's MLA (MLATransformerConfig): --qk-head-dim is the no-RoPE part, --qk-pos-emb-head-dim the
    // rotary one; an absent --q-lora-rank is a plain query projection, as moe4d's q_lora_rank 0.
    arg("--multi-latent-attention");
    if (m.mla.q_lora_rank > 0) arg("--q-lora-rank", std::to_string(m.mla.q_lora_rank));
    arg("--kv-lora-rank", std::to_string(m.mla.kv_lora_rank));
    arg("--qk-head-dim", std::to_string(m.mla.qk_nope_head_dim));
    arg("--qk-pos-emb-head-dim", std::to_string(m.mla.qk_rope_head_dim));
    arg("--v-head-dim", std::to_string(m.mla.v_head_dim));
  }
  arg("--seq-length", std::to_string(ctx.setup.seq_length));
  arg("--max-position-embeddings", std::to_string(ctx.setup.seq_length));
  arg("--tokenizer-type", "NullTokenizer");
  arg("--vocab-size", std::to_string(m.vocab_size));
  arg("--mock-data");
  // Megatron's global batch = micro-batch-size x DP (EP included) x micro-batches per step.
  arg("--micro-batch-size", std::to_string(l.micro_batch_size));
  arg("--global-batch-size", std::to_string(ctx.setup.global_batch));
  // moe4d's schedule (train/lr_schedule.h): linear warm-up, then cosine to min_lr over the remaining steps —
  // Megatron's cosine style with --lr-decay-iters defaulting to --train-iters.
  arg("--train-iters", std::to_string(train.steps > 0 ? train.steps : 1000));
  arg("--lr", fmt::format("{}", train.lr));
  arg("--min-lr", fmt::format("{}", std::min(train.min_lr, train.lr)));
  arg("--lr-decay-style", "cosine");
  arg("--lr-warmup-iters", std::to_string(train.warmup_steps));
  arg("--weight-decay", fmt::format("{}", train.weight_decay));
  arg("--clip-grad", fmt::format("{}", train.grad_clip));
  arg("--adam-beta1", fmt::format("{}", train.beta1));
  arg("--adam-beta2", fmt::format("{}", train.beta2));
  arg("--adam-eps", fmt::format("{}", train.eps));
  arg("--seed", std::to_string(train.seed % 2147483648ULL));
  arg("--swiglu");
  arg("--normalization", "RMSNorm");
  arg("--norm-epsilon", fmt::format("{}", m.norm_eps));
  arg("--disable-bias-linear");
  arg("--position-embedding-type", "rope");
  arg("--rotary-base", fmt::format("{}", static_cast<long long>(theta)));
  const RopeScaling& rs = m.rope_scaling;
  if (!m.is_mla()) arg("--rotary-interleaved");
  if (m.is_mla()) {
    arg("--no-rope-fusion");
    // Megatron's MLA takes YaRN unless told otherwise (--rope-type, MLATransformerConfig.rope_type).
    arg("--rope-type", rs.enabled() ? "yarn" : "rope");
    if (rs.enabled()) {
      arg("--rotary-scaling-factor", fmt::format("{}", rs.factor));
      arg("--yarn-original-max-position-embeddings", std::to_string(rs.original_max_position_embeddings));
      arg("--yarn-beta-fast", fmt::format("{}", rs.beta_fast > 0 ? rs.beta_fast : 32.0));
      arg("--yarn-beta-slow", fmt::format("{}", rs.beta_slow > 0 ? rs.beta_slow : 1.0));
      // Megatron always divides mscale(factor, mscale) by mscale(factor, mscale_all_dim); HF (and moe4d)
      // only when both are given, else mscale(factor, 1): the same with mscale 1, mscale_all_dim 0.
      const bool both = rs.mscale > 0 && rs.mscale_all_dim > 0;
      arg("--mscale", fmt::format("{}", both ? rs.mscale : 1.0));
      arg("--mscale-all-dim", fmt::format("{}", both ? rs.mscale_all_dim : 0.0));
    }
  }
  if (!m.tie_embeddings) arg("--untie-embeddings-and-output-weights");
  if (m.is_moe()) {
    arg("--num-experts", std::to_string(m.moe.num_experts));
    arg("--moe-ffn-hidden-size", std::to_string(m.expert_ffn()));
    arg("--moe-router-topk", std::to_string(m.moe.top_k));
    arg("--moe-layer-freq", megatron_layer_pattern(m));
    if (m.shared_ffn() > 0) arg("--moe-shared-expert-intermediate-size", std::to_string(m.shared_ffn()));
    if (m.moe.score_function == RouterScore::kSigmoid) {
      arg("--moe-router-score-function", "sigmoid");
      if (!m.moe.normalize_top_k)
        out += "# Unnormalised sigmoid weights cannot be expressed: Megatron-LM renormalises top-k > 1 sigmoid scores.\n";
    } else if (!m.moe.normalize_top_k) {
      arg("--moe-router-pre-softmax");  // softmax over all experts, top-k weights kept as they are
    }
    arg("--moe-router-dtype", "fp32");  // moe4d scores the router in fp32
    if (l.dispatcher == MoeDispatcher::kHierarchical) {
      // Megatron-Core's node-aware dispatch: the flex dispatcher on DeepEP's kernels (docs/moe.md §10).
      arg("--moe-token-dispatcher-type", "flex");
      arg("--moe-flex-dispatcher-backend", "deepep");
    } else {
      arg("--moe-token-dispatcher-type", "alltoall");
    }
    megatron_router_args(m, arg);
    if (m.moe.capacity_factor) arg("--moe-expert-capacity-factor", fmt::format("{}", *m.moe.capacity_factor));
    arg("--moe-aux-loss-coeff", fmt::format("{}", m.moe.aux_loss_coeff));
    if (m.moe.z_loss_coeff > 0) arg("--moe-z-loss-coeff", fmt::format("{}", m.moe.z_loss_coeff));
    if (m.moe.num_experts / l.ep > 1) arg("--moe-grouped-gemm");
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
  if (l.zero_stage == 1 || l.zero_stage == 2) arg("--use-distributed-optimizer");
  if (fsdp) {
    arg("--use-megatron-fsdp");
    arg("--data-parallel-sharding-strategy", "optim_grads_params");
    arg("--ckpt-format", "fsdp_dtensor");
  }
  if (ctx.setup.overlap_grad_reduce && l.dp * l.ep > 1) arg("--overlap-grad-reduce");
  for (size_t i = 0; i < args.size(); ++i) out += "  " + args[i] + (i + 1 < args.size() ? " \\\n" : "\n");
  return out;
}

std::string export_layout(ExportFormat format, const PlanContext& ctx, const Layout& layout,
                          const std::optional<Config>& base) {
  switch (format) {
    case ExportFormat::kMoe4d: return export_moe4d_config(ctx, layout, base);
    case ExportFormat::kMindFormers: return export_mindformers(ctx, layout);
    case ExportFormat::kMegatron: return export_megatron(ctx, layout, base);
  }
  return "";
}

}  // namespace moe4d
