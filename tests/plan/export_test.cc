// tests/plan/export_test.cc — exported layouts read back: the moe4d config through the project's
// config loader, the MindFormers block as YAML, the Megatron-LM arguments as flags.
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <map>
#include <set>
#include <sstream>

#include "config/config_loader.h"
#include "core/error.h"
#include "plan/cluster_presets.h"
#include "plan/layout_export.h"
#include "plan/model_presets.h"

namespace moe4d {
namespace {

PlanContext articles_context() {
  const ModelPreset preset = model_preset("moe-120b");
  return PlanContext{"moe-120b", preset.model, preset.setup, cluster_preset("atlas-800t-a2")};
}

Layout articles_layout(const PlanContext& ctx) {
  return parse_layout("dp=2,ep=8,tp=4,pp=1,mb=16,recompute=full,zero=3", ctx.setup.global_batch, 64);
}

TEST(Export, Moe4dConfigRoundTripsThroughTheConfigLoader) {
  const PlanContext ctx = articles_context();
  for (const std::string& text : {std::string("dp=2,ep=8,tp=4,pp=1,mb=16,recompute=full,zero=3"),
                                  std::string("dp=1,ep=8,tp=2,pp=4,mb=32,schedule=interleaved,v=2,recompute=selective,"
                                              "zero=1,order=tp-dp-ep-pp")}) {
    const Layout layout = parse_layout(text, ctx.setup.global_batch, 64);
    const Config config = parse_config(export_moe4d_config(ctx, layout, std::nullopt), "exported.yaml");
    const Layout back = layout_from_parallel_config(config.parallel, config.train.global_batch_size, 64);
    EXPECT_EQ(layout_to_string(back), layout_to_string(layout));
    EXPECT_EQ(config.model.hidden_size, ctx.model.hidden_size);
    EXPECT_EQ(config.model.num_layers, ctx.model.num_layers);
    EXPECT_EQ(config.model.moe.num_experts, ctx.model.moe.num_experts);
    EXPECT_EQ(config.train.global_batch_size, ctx.setup.global_batch);
    EXPECT_EQ(config.train.precision, Precision::kBF16);
    EXPECT_EQ(config.parallel.local_worker_num, 8);
  }
}

TEST(Export, Moe4dConfigKeepsTheSourceConfigsOtherSections) {
  const PlanContext ctx = articles_context();
  Config base;
  base.model = ctx.model;
  base.train.global_batch_size = 256;
  base.train.steps = 77;
  base.train.lr = 1e-4;
  base.data.train = "corpus/train.bin";
  base.checkpoint.dir = "runs/x";
  const Config config = parse_config(export_moe4d_config(ctx, articles_layout(ctx), base), "exported.yaml");
  EXPECT_EQ(config.train.steps, 77);
  EXPECT_DOUBLE_EQ(config.train.lr, 1e-4);
  EXPECT_EQ(config.data.train, "corpus/train.bin");
  EXPECT_EQ(config.checkpoint.dir, "runs/x");
  EXPECT_EQ(config.parallel.expert_parallel, 8);
}

// MindFormers' key names (mindspore-lab/mindformers at fd4deebc1606a02fd24c3b359a889cd0c966e72b):
//  parallel_config: mindformers/trainer/config_args.py ParallelConfig._support_kwargs
//  parallel: the same file's ParallelContextConfig (mindspore.set_auto_parallel_context keys)
//  recompute_config: mindformers/modules/transformer/transformer.py TransformerRecomputeConfig.__init__
//  moe_config: mindformers/modules/transformer/moe.py MoEConfig.__init__
//  runner_config: config_args.py RunnerConfig, and gradient_accumulation_steps read by
//  mindformers/trainer/base_trainer.py _check_global_batch_size_for_auto_parallel.
const std::set<std::string> kParallelConfigKeys = {"data_parallel",  "model_parallel",   "pipeline_stage",
                                                   "expert_parallel", "micro_batch_num", "vocab_emb_dp",
                                                   "use_seq_parallel", "gradient_aggregation_group",
                                                   "context_parallel"};
const std::set<std::string> kParallelKeys = {"parallel_mode", "full_batch", "gradients_mean", "enable_alltoall",
                                             "enable_parallel_optimizer", "parallel_optimizer_config",
                                             "pipeline_config"};
const std::set<std::string> kRecomputeKeys = {"recompute", "select_recompute", "parallel_optimizer_comm_recompute",
                                              "mp_comm_recompute", "recompute_slice_activation"};
const std::set<std::string> kMoeKeys = {"expert_num",        "num_experts_chosen",   "capacity_factor",
                                        "aux_loss_factor",   "z_loss_factor",        "balance_via_topk_bias",
                                        "topk_bias_update_rate", "moe_intermediate_size", "routing_policy",
                                        "norm_topk_prob",    "router_dense_type",    "shared_expert_num",
                                        "use_gating_sigmoid"};

void expect_keys_within(const YAML::Node& node, const std::set<std::string>& allowed, const std::string& section) {
  ASSERT_TRUE(node.IsMap()) << section;
  for (const auto& kv : node) EXPECT_TRUE(allowed.count(kv.first.as<std::string>())) << section << "." << kv.first.as<std::string>();
}

// Checks an exported MindFormers YAML for `layout` against MindFormers' rules.
void expect_mindformers_accepts(const PlanContext& ctx, const Layout& l, const std::string& what) {
  SCOPED_TRACE(what);
  const YAML::Node doc = YAML::Load(export_mindformers(ctx, l));
  const YAML::Node pc = doc["parallel_config"];
  expect_keys_within(pc, kParallelConfigKeys, "parallel_config");
  expect_keys_within(doc["parallel"], kParallelKeys, "parallel");
  expect_keys_within(doc["recompute_config"], kRecomputeKeys, "recompute_config");
  const int dp = pc["data_parallel"].as<int>(), mp = pc["model_parallel"].as<int>(), pp = pc["pipeline_stage"].as<int>();
  const int ep = pc["expert_parallel"].as<int>(), mbn = pc["micro_batch_num"].as<int>();
  const int cp = pc["context_parallel"] ? pc["context_parallel"].as<int>() : 1;
  // configs/README.md (parallel_config): device_num = data_parallel x model_parallel x context_parallel x
  // pipeline_stage; mindformers/modules/transformer/op_parallel_config.py _check_config: the product may not
  // exceed the devices. MindFormers' data_parallel therefore includes EP: moe4d dp x ep.
  EXPECT_EQ(dp * mp * cp * pp, l.world());
  EXPECT_EQ(dp * cp, l.dp * l.ep);
  EXPECT_EQ(cp, l.cp);
  // moe.py _check_moe_config: expert_num % expert_parallel == 0, data_parallel x context_parallel % expert_parallel == 0.
  EXPECT_EQ(dp * cp % ep, 0);
  // TransformerOpParallelConfig docstring: micro_batch_num >= pipeline_stage when training.
  EXPECT_GE(mbn, pp);
  // base_trainer.py _check_global_batch_size_for_auto_parallel (semi_auto_parallel, full_batch): without a
  // pipeline micro_batch_num is reset to 1 and global = batch_size x data_parallel x gradient_accumulation_steps;
  // with one, gradient_accumulation_steps is reset to 1 and global = batch_size x data_parallel x micro_batch_num.
  EXPECT_EQ(doc["parallel"]["parallel_mode"].as<int>(), 1);
  EXPECT_TRUE(doc["parallel"]["full_batch"].as<bool>());
  const int batch = doc["runner_config"]["batch_size"].as<int>();
  const int gas = doc["runner_config"]["gradient_accumulation_steps"].as<int>();
  EXPECT_GE(gas, 1);
  if (pp == 1) {
    EXPECT_EQ(mbn, 1);
    EXPECT_EQ(int64_t{batch} * dp * gas, ctx.setup.global_batch);
  } else {
    EXPECT_EQ(gas, 1);
    EXPECT_EQ(int64_t{batch} * dp * mbn, ctx.setup.global_batch);
  }
  // Sequence parallelism as planned (only with TP: MindFormers shards the sequence over model_parallel), and
  // mindformers/tools/check_rules.py _check_moe_parallel_valid: MoE with model_parallel > 1 raises without it.
  EXPECT_EQ(pc["use_seq_parallel"].as<bool>(), (l.sequence_parallel || ctx.model.is_moe()) && l.tp > 1);
  if (mp > 1 && ctx.model.is_moe()) {
    EXPECT_TRUE(pc["use_seq_parallel"].as<bool>());
  }
  // gradient_aggregation_group: the number of gradient fusion groups over the layers
  // (mindformers/models/utils.py LayerSetting.set: layer i in group i / max((layers + 1) / g, 1) + 1), a
  // positive int (TransformerOpParallelConfig's setter), at most one group per layer.
  const int groups = pc["gradient_aggregation_group"].as<int>();
  EXPECT_GE(groups, 1);
  EXPECT_LE(groups, ctx.model.num_layers);
  // Recompute: full is `recompute`, selective `select_recompute`, never both.
  EXPECT_EQ(doc["recompute_config"]["recompute"].as<bool>(), l.recompute == RecomputeGranularity::kFull);
  EXPECT_EQ(doc["recompute_config"]["select_recompute"].as<bool>(), l.recompute == RecomputeGranularity::kSelective);
  // ZeRO as optimizer parallel (ParallelContextConfig enable_parallel_optimizer, parallel_optimizer_config with
  // gradient_accumulation_shard and parallel_optimizer_threshold, a non-negative KB count).
  EXPECT_EQ(doc["parallel"]["enable_parallel_optimizer"].as<bool>(), l.zero_stage >= 1);
  if (l.zero_stage >= 1) {
    const YAML::Node poc = doc["parallel"]["parallel_optimizer_config"];
    expect_keys_within(poc, {"gradient_accumulation_shard", "parallel_optimizer_threshold", "optimizer_weight_shard_size"},
                       "parallel_optimizer_config");
    EXPECT_EQ(poc["gradient_accumulation_shard"].as<bool>(), l.zero_stage >= 2);
    EXPECT_EQ(poc["parallel_optimizer_threshold"].as<int>(), l.zero_stage >= 3 ? 0 : 64);
  }
  if (ctx.model.is_moe()) {
    const YAML::Node moe = doc["moe_config"];
    expect_keys_within(moe, kMoeKeys, "moe_config");
    const int experts = moe["expert_num"].as<int>(), chosen = moe["num_experts_chosen"].as<int>();
    // MoEConfig.__init__: positive expert_num / num_experts_chosen, num_experts_chosen <= expert_num,
    // 0 < aux_loss_factor < 1.
    EXPECT_EQ(experts, ctx.model.moe.num_experts);
    EXPECT_EQ(chosen, ctx.model.moe.top_k);
    EXPECT_LE(chosen, experts);
    EXPECT_GT(moe["aux_loss_factor"].as<double>(), 0);
    EXPECT_LT(moe["aux_loss_factor"].as<double>(), 1);
    EXPECT_EQ(experts % ep, 0);  // _check_moe_config
    // Dropless in moe4d: a capacity of factor x tokens x k / experts that holds every token.
    if (!ctx.model.moe.capacity_factor) {
      EXPECT_GE(moe["capacity_factor"].as<double>() * chosen / experts, 1.0);
    }
    EXPECT_EQ(doc["parallel"]["enable_alltoall"].as<bool>(), ep > 1);
    // moe_intermediate_size is the routed experts' width (parallel_core/transformer_config_utils.py maps
    // it to moe_ffn_hidden_size); norm_topk_prob is the top-k renormalisation; the router runs in fp32.
    EXPECT_EQ(moe["moe_intermediate_size"].as<int>(), ctx.model.expert_ffn());
    EXPECT_EQ(moe["norm_topk_prob"].as<bool>(), ctx.model.moe.normalize_top_k);
    EXPECT_EQ(moe["router_dense_type"].as<std::string>(), "float32");
    if (ctx.model.shared_ffn() > 0 && ctx.model.shared_ffn() % ctx.model.expert_ffn() == 0) {
      EXPECT_EQ(moe["shared_expert_num"].as<int>() * ctx.model.expert_ffn(), ctx.model.shared_ffn());
    }
  } else {
    EXPECT_FALSE(doc["moe_config"]);
  }
  if (l.schedule == PipelineSchedule::kInterleaved) {
    EXPECT_TRUE(doc["parallel"]["pipeline_config"]["pipeline_interleave"].as<bool>());
    EXPECT_EQ(doc["model"]["model_config"]["pp_interleave_num"].as<int>(), l.virtual_stages);
  }
}

TEST(Export, MindFormersCountsExpertParallelismInsideDataParallel) {
  const PlanContext ctx = articles_context();
  const YAML::Node doc = YAML::Load(export_mindformers(ctx, articles_layout(ctx)));
  const YAML::Node pc = doc["parallel_config"];
  EXPECT_EQ(pc["data_parallel"].as<int>(), 16);  // DP_local 2 x EP 8
  EXPECT_EQ(pc["model_parallel"].as<int>(), 4);
  EXPECT_EQ(pc["pipeline_stage"].as<int>(), 1);
  EXPECT_EQ(pc["expert_parallel"].as<int>(), 8);
  // No pipeline: the 16 micro-batches are gradient accumulation steps (MindFormers ignores micro_batch_num).
  EXPECT_EQ(pc["micro_batch_num"].as<int>(), 1);
  EXPECT_EQ(doc["runner_config"]["gradient_accumulation_steps"].as<int>(), 16);
  EXPECT_EQ(doc["runner_config"]["batch_size"].as<int>(), 1);
  EXPECT_EQ(doc["moe_config"]["expert_num"].as<int>(), 16);
  EXPECT_EQ(doc["moe_config"]["num_experts_chosen"].as<int>(), 2);
  // MoE with model_parallel 4: check_rules needs use_seq_parallel even though this layout was planned without.
  EXPECT_TRUE(pc["use_seq_parallel"].as<bool>());
  // Not moe4d's 630 buckets: MindFormers' fusion groups over the 64 layers.
  EXPECT_EQ(pc["gradient_aggregation_group"].as<int>(), 64);
  expect_mindformers_accepts(ctx, articles_layout(ctx), "articles");
}

// Context parallelism: MindFormers' context_parallel, its data_parallel the dense replicas dp x ep / cp.
TEST(Export, MindFormersContextParallel) {
  const PlanContext ctx = articles_context();
  const Layout layout = parse_layout("dp=2,ep=8,tp=4,pp=1,cp=4,mb=16,zero=1", ctx.setup.global_batch, 64);
  const YAML::Node pc = YAML::Load(export_mindformers(ctx, layout))["parallel_config"];
  EXPECT_EQ(pc["context_parallel"].as<int>(), 4);
  EXPECT_EQ(pc["data_parallel"].as<int>(), 4);  // 2 x 8 / 4
  expect_mindformers_accepts(ctx, layout, "cp4");
  EXPECT_FALSE(YAML::Load(export_mindformers(ctx, articles_layout(ctx)))["parallel_config"]["context_parallel"]);
}

// DeepSeek-MoE-16B: routed width 1408 (not the dense layer's 10944), two shared experts of that width,
// unnormalised top-k weights, layer 0 dense.
TEST(Export, MindFormersMoeKeysMeanWhatMindFormersMeans) {
  const ModelPreset deepseek = model_preset("deepseek-moe-16b");
  const PlanContext ctx{"deepseek-moe-16b", deepseek.model, deepseek.setup, cluster_preset("dgx-h100")};
  const Layout layout = parse_layout("dp=2,ep=8,tp=2,pp=2,mb=8", ctx.setup.global_batch, 64);
  const std::string text = export_mindformers(ctx, layout);
  const YAML::Node doc = YAML::Load(text);
  EXPECT_EQ(doc["moe_config"]["moe_intermediate_size"].as<int>(), 1408);
  EXPECT_EQ(doc["moe_config"]["shared_expert_num"].as<int>(), 2);
  EXPECT_FALSE(doc["moe_config"]["norm_topk_prob"].as<bool>());
  EXPECT_NE(text.find("first_k_dense_replace"), std::string::npos);
  EXPECT_NE(text.find("model_config.intermediate_size"), std::string::npos);
  expect_mindformers_accepts(ctx, layout, "deepseek-moe-16b");
}

// Qwen3-30B-A3B: MindFormers' mcore-style model_config keys head_dim and qk_layernorm (as its
// configs/qwen3 YAMLs), the routed width 768, top-k renormalised.
TEST(Export, MindFormersQwen3Keys) {
  const ModelPreset qwen = model_preset("qwen3-30b-a3b");
  const PlanContext ctx{"qwen3-30b-a3b", qwen.model, qwen.setup, cluster_preset("dgx-h100")};
  const Layout layout = parse_layout("dp=2,ep=8,tp=2,pp=2,mb=8", ctx.setup.global_batch, 64);
  const YAML::Node doc = YAML::Load(export_mindformers(ctx, layout));
  EXPECT_EQ(doc["model"]["model_config"]["head_dim"].as<int>(), 128);
  EXPECT_TRUE(doc["model"]["model_config"]["qk_layernorm"].as<bool>());
  EXPECT_EQ(doc["moe_config"]["moe_intermediate_size"].as<int>(), 768);
  EXPECT_TRUE(doc["moe_config"]["norm_topk_prob"].as<bool>());
  expect_mindformers_accepts(ctx, layout, "qwen3-30b-a3b");
}

TEST(Export, MindFormersAcceptsPipelinesZeroStagesAndDenseModels) {
  const PlanContext ctx = articles_context();
  for (const std::string& text :
       {std::string("dp=2,ep=8,pp=4,mb=8,schedule=interleaved,v=2,zero=1,recompute=selective"),
        std::string("dp=1,ep=8,tp=2,pp=4,mb=32,zero=2"), std::string("dp=2,ep=8,tp=4,pp=1,mb=16,zero=3"),
        std::string("dp=2,ep=8,tp=4,pp=1,mb=16,zero=1,recompute=selective,sp=1")}) {
    expect_mindformers_accepts(ctx, parse_layout(text, ctx.setup.global_batch, 64), text);
  }
  PlanContext dense = ctx;
  dense.model.moe.num_experts = 0;
  expect_mindformers_accepts(dense, parse_layout("dp=8,tp=8,pp=1,mb=32", ctx.setup.global_batch, 64), "dense");
  // MoEConfig needs 0 < aux_loss_factor < 1: a model without the aux loss cannot be written for MindFormers.
  PlanContext no_aux = ctx;
  no_aux.model.moe.aux_loss_coeff = 0;
  EXPECT_THROW(export_mindformers(no_aux, articles_layout(ctx)), Error);
}

std::map<std::string, std::string> parse_flags(const std::string& text) {
  std::map<std::string, std::string> flags;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    line.erase(0, line.find_first_not_of(' '));  // the arguments are indented under pretrain_gpt.py
    if (line.empty() || line[0] == '#' || line.rfind("--", 0) != 0) continue;
    if (line.size() >= 2 && line.substr(line.size() - 2) == " \\") line.resize(line.size() - 2);
    const size_t space = line.find(' ');
    flags[line.substr(0, space)] = space == std::string::npos ? "" : line.substr(space + 1);
  }
  return flags;
}

TEST(Export, MegatronArgumentsDescribeTheLayout) {
  const PlanContext ctx = articles_context();
  auto flags = parse_flags(export_megatron(ctx, articles_layout(ctx)));
  EXPECT_EQ(flags["--tensor-model-parallel-size"], "4");
  EXPECT_EQ(flags["--pipeline-model-parallel-size"], "1");
  EXPECT_EQ(flags["--expert-model-parallel-size"], "8");
  EXPECT_EQ(flags["--micro-batch-size"], "1");
  EXPECT_EQ(flags["--global-batch-size"], "256");
  EXPECT_EQ(flags["--num-experts"], "16");
  EXPECT_EQ(flags["--moe-router-topk"], "2");
  EXPECT_EQ(flags["--recompute-granularity"], "full");
  EXPECT_EQ(flags["--data-parallel-sharding-strategy"], "optim_grads_params");
  EXPECT_TRUE(flags.count("--bf16"));
  const Layout inter = parse_layout("dp=2,ep=8,pp=4,mb=8,schedule=interleaved,v=2,zero=1", 256, 64);
  flags = parse_flags(export_megatron(ctx, inter));
  EXPECT_EQ(flags["--num-virtual-stages-per-pipeline-rank"], "2");
  EXPECT_TRUE(flags.count("--use-distributed-optimizer"));
  // Every second layer MoE (layers 1, 3, ..., 63): Megatron's list expression (its integer form would put
  // the MoE layer first in each period).
  PlanContext alternating = ctx;
  alternating.model.moe.layer_freq = 2;
  flags = parse_flags(export_megatron(alternating, articles_layout(ctx)));
  EXPECT_EQ(flags["--moe-layer-freq"], "\"[0]*1+([1]+[0]*1)*31+[1]+[0]*0\"");
}

// Mixtral's GQA and theta, DeepSeek-MoE's expert widths, shared experts, dense layer 0 and
// unnormalised softmax weights reach Megatron's flags and survive the moe4d config round trip.
TEST(Export, ModelOptionsReachMegatronAndMoe4dConfigs) {
  const ModelPreset mixtral = model_preset("mixtral-8x7b");
  const PlanContext mctx{"mixtral-8x7b", mixtral.model, mixtral.setup, cluster_preset("dgx-h100")};
  const Layout layout = parse_layout("dp=1,ep=8,tp=8,pp=1,mb=1", mctx.setup.global_batch, 64);
  auto flags = parse_flags(export_megatron(mctx, layout));
  EXPECT_TRUE(flags.count("--group-query-attention"));
  EXPECT_EQ(flags["--num-query-groups"], "8");
  EXPECT_EQ(flags["--rotary-base"], "1000000");
  EXPECT_EQ(flags["--moe-ffn-hidden-size"], "14336");  // always given: Megatron defaults it to ffn_hidden_size

  const ModelPreset deepseek = model_preset("deepseek-moe-16b");
  const PlanContext dctx{"deepseek-moe-16b", deepseek.model, deepseek.setup, cluster_preset("dgx-h100")};
  const Layout dlayout = parse_layout("dp=2,ep=8,tp=2,pp=2,mb=8", dctx.setup.global_batch, 64);
  flags = parse_flags(export_megatron(dctx, dlayout));
  EXPECT_FALSE(flags.count("--num-query-groups"));
  EXPECT_EQ(flags["--moe-ffn-hidden-size"], "1408");
  EXPECT_EQ(flags["--moe-shared-expert-intermediate-size"], "2816");
  EXPECT_TRUE(flags.count("--moe-router-pre-softmax"));
  EXPECT_EQ(flags["--norm-epsilon"], "1e-06");
  EXPECT_EQ(flags["--moe-layer-freq"], "\"[0]*1+([1]+[0]*0)*26+[1]+[0]*0\"");  // layer 0 dense, 27 MoE layers
  const Config config = parse_config(export_moe4d_config(dctx, dlayout, std::nullopt), "exported.yaml");
  EXPECT_EQ(config.model.moe.expert_ffn_hidden_size, 1408);
  EXPECT_EQ(config.model.shared_ffn(), 2816);
  EXPECT_EQ(config.model.moe.first_dense_layers, 1);
  EXPECT_FALSE(config.model.moe.normalize_top_k);
  const Config mconfig = parse_config(export_moe4d_config(mctx, layout, std::nullopt), "exported.yaml");
  EXPECT_EQ(mconfig.model.num_kv_heads, 8);
  EXPECT_EQ(mconfig.model.rope_theta, 1e6);
}

TEST(Export, ParsesTheFormatName) {
  EXPECT_EQ(parse_export_format("megatron"), ExportFormat::kMegatron);
  EXPECT_THROW(parse_export_format("deepspeed"), Error);
}

}  // namespace
}  // namespace moe4d
