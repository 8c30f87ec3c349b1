// tests/plan/export_test.cc — exported layouts read back: the moe4d config through the project's
// config loader, the MindFormers block as YAML, the Megatron-LM arguments as flags.
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <map>
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

TEST(Export, MindFormersCountsExpertParallelismInsideDataParallel) {
  const PlanContext ctx = articles_context();
  const YAML::Node doc = YAML::Load(export_mindformers(ctx, articles_layout(ctx)));
  const YAML::Node pc = doc["parallel_config"];
  EXPECT_EQ(pc["data_parallel"].as<int>(), 16);  // DP_local 2 x EP 8
  EXPECT_EQ(pc["model_parallel"].as<int>(), 4);
  EXPECT_EQ(pc["pipeline_stage"].as<int>(), 1);
  EXPECT_EQ(pc["expert_parallel"].as<int>(), 8);
  EXPECT_EQ(pc["micro_batch_num"].as<int>(), 16);
  // MindFormers' world = data_parallel x model_parallel x pipeline_stage.
  EXPECT_EQ(pc["data_parallel"].as<int>() * pc["model_parallel"].as<int>() * pc["pipeline_stage"].as<int>(), 64);
  EXPECT_TRUE(doc["recompute_config"]["recompute"].as<bool>());
  EXPECT_FALSE(doc["recompute_config"]["select_recompute"].as<bool>());
  EXPECT_TRUE(doc["parallel"]["enable_parallel_optimizer"].as<bool>());
  EXPECT_EQ(doc["runner_config"]["batch_size"].as<int>(), 1);
}

std::map<std::string, std::string> parse_flags(const std::string& text) {
  std::map<std::string, std::string> flags;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
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
  EXPECT_EQ(flags["--num-layers-per-virtual-pipeline-stage"], "8");  // 64 / (4 x 2)
  EXPECT_TRUE(flags.count("--use-distributed-optimizer"));
  // Every second layer MoE: Megatron's pattern lists them explicitly.
  PlanContext alternating = ctx;
  alternating.model.moe.layer_freq = 2;
  flags = parse_flags(export_megatron(alternating, articles_layout(ctx)));
  EXPECT_EQ(flags["--moe-layer-freq"], "\"([0]*1+[1])*32\"");
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
  EXPECT_FALSE(flags.count("--moe-ffn-hidden-size"));

  const ModelPreset deepseek = model_preset("deepseek-moe-16b");
  const PlanContext dctx{"deepseek-moe-16b", deepseek.model, deepseek.setup, cluster_preset("dgx-h100")};
  const Layout dlayout = parse_layout("dp=2,ep=8,tp=2,pp=2,mb=8", dctx.setup.global_batch, 64);
  flags = parse_flags(export_megatron(dctx, dlayout));
  EXPECT_FALSE(flags.count("--num-query-groups"));
  EXPECT_EQ(flags["--moe-ffn-hidden-size"], "1408");
  EXPECT_EQ(flags["--moe-shared-expert-intermediate-size"], "2816");
  EXPECT_TRUE(flags.count("--moe-router-pre-softmax"));
  EXPECT_EQ(flags["--norm-epsilon"], "1e-06");
  EXPECT_EQ(flags["--moe-layer-freq"].substr(0, 6), "\"[0,1,");
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
