// tests/plan/megatron_export_test.cc — `--export megatron` against Megatron-Core's own argument rules.
//
// Megatron-LM cannot run here (it needs torch >= 2 and CUDA), so its rules are encoded below, each with
// the file and function it comes from (NVIDIA/Megatron-LM at d98e8a64ddf34856e74b24714e3bedb2f5a39553).
// Every exported option is also checked against the option names that parser defines
// (tests/plan/data/megatron_flags.txt, names only, taken from add_megatron_arguments).
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "plan/cluster_presets.h"
#include "plan/layout_export.h"
#include "plan/model_presets.h"

namespace moe4d {
namespace {

struct MegatronRun {
  std::map<std::string, std::string> env;   // from `export NAME=VALUE` lines
  std::set<std::string> unset;              // from `unset NAME` lines
  std::map<std::string, std::string> flags;  // option -> value ("" for store_true)
  std::vector<std::string> order;            // options as emitted (duplicates show here)
};

MegatronRun parse_run(const std::string& text) {
  MegatronRun run;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    if (line.rfind("export ", 0) == 0) {
      const std::string kv = line.substr(7);
      run.env[kv.substr(0, kv.find('='))] = kv.substr(kv.find('=') + 1);
      continue;
    }
    if (line.rfind("unset ", 0) == 0) {
      run.unset.insert(line.substr(6));
      continue;
    }
    if (line.size() >= 2 && line.substr(line.size() - 2) == " \\") line.resize(line.size() - 2);
    const size_t space = line.find(' ');
    const std::string name = line.substr(0, space);
    run.flags[name] = space == std::string::npos ? "" : line.substr(space + 1);
    run.order.push_back(name);
  }
  return run;
}

std::set<std::string> megatron_option_names() {
  std::ifstream in(std::string(MOE4D_SOURCE_DIR) + "/tests/plan/data/megatron_flags.txt");
  std::set<std::string> names;
  std::string line;
  while (std::getline(in, line))
    if (!line.empty() && line[0] != '#') names.insert(line);
  return names;
}

int num(const MegatronRun& r, const std::string& flag) {
  const auto it = r.flags.find(flag);
  return it == r.flags.end() ? 1 : std::stoi(it->second);
}

// Checks `run` (the export of a layout over `world` devices) against Megatron-Core's rules.
void expect_megatron_accepts(const MegatronRun& r, int world, bool moe, const std::string& what) {
  SCOPED_TRACE(what);
  static const std::set<std::string> names = megatron_option_names();
  ASSERT_GT(names.size(), 500u) << "tests/plan/data/megatron_flags.txt missing";
  // argparse (parse_args, allow_abbrev=False): every option must be one the parser defines, given once.
  for (const std::string& flag : r.order) EXPECT_TRUE(names.count(flag)) << flag << " is not a Megatron-LM option";
  EXPECT_EQ(r.order.size(), r.flags.size()) << "an option is given twice";

  const int tp = num(r, "--tensor-model-parallel-size"), pp = num(r, "--pipeline-model-parallel-size");
  const int ep = num(r, "--expert-model-parallel-size");
  const bool fsdp = r.flags.count("--use-megatron-fsdp") > 0;
  // validate_args: "world size is not divisible by total_model_size" (tp x pp x cp); dp = world / that.
  ASSERT_EQ(world % (tp * pp), 0);
  const int dp = world / (tp * pp);
  // validate_args, expert parallelism check: num_experts % expert_model_parallel_size == 0; and the
  // expert grid (megatron/core/parallel_state.py initialize_model_parallel: expert tp x ep x pp must divide world).
  if (ep > 1) {
    ASSERT_TRUE(r.flags.count("--num-experts"));
    EXPECT_EQ(num(r, "--num-experts") % ep, 0);
    EXPECT_EQ(world % (tp * ep * pp), 0);
  }
  // megatron/core/num_microbatches_calculator.py ConstantNumMicroBatchesCalculator: global_batch_size is a
  // multiple of micro_batch_size x data_parallel_size.
  EXPECT_EQ(num(r, "--global-batch-size") % (num(r, "--micro-batch-size") * dp), 0);
  // validate_args, uneven virtual pipeline block: at most one of --num-layers-per-virtual-pipeline-stage,
  // --num-virtual-stages-per-pipeline-rank, --pipeline-model-parallel-layout; num_layers % pp == 0; and
  // megatron/core/transformer/transformer_block.py get_num_layers_to_build splits pp x v chunks evenly.
  EXPECT_LE(r.flags.count("--num-layers-per-virtual-pipeline-stage") + r.flags.count("--num-virtual-stages-per-pipeline-rank") +
                r.flags.count("--pipeline-model-parallel-layout"),
            1u);
  EXPECT_EQ(num(r, "--num-layers") % pp, 0);
  if (r.flags.count("--num-virtual-stages-per-pipeline-rank")) {
    EXPECT_GT(pp, 1);
    EXPECT_EQ(num(r, "--num-layers") % (pp * num(r, "--num-virtual-stages-per-pipeline-rank")), 0);
  }
  // validate_args, Megatron-FSDP block: requires --ckpt-format fsdp_dtensor and CUDA_DEVICE_MAX_CONNECTIONS
  // not 1; a sharding strategy among the parser's choices; --use-custom-fsdp is gone (not in the names).
  if (fsdp) {
    EXPECT_EQ(r.flags.at("--ckpt-format"), "fsdp_dtensor");
    EXPECT_FALSE(r.env.count("CUDA_DEVICE_MAX_CONNECTIONS") && r.env.at("CUDA_DEVICE_MAX_CONNECTIONS") == "1");
    EXPECT_TRUE(r.unset.count("CUDA_DEVICE_MAX_CONNECTIONS"));
    const std::string strategy = r.flags.at("--data-parallel-sharding-strategy");
    EXPECT_TRUE(strategy == "no_shard" || strategy == "optim" || strategy == "optim_grads" ||
                strategy == "optim_grads_params")
        << strategy;
  } else {
    // validate_args ("--ckpt-format fsdp_dtensor is only tested with Megatron FSDP").
    EXPECT_FALSE(r.flags.count("--ckpt-format") && r.flags.at("--ckpt-format") == "fsdp_dtensor");
    EXPECT_FALSE(r.flags.count("--data-parallel-sharding-strategy"));
  }
  // validate_args: TP > 1 (before Blackwell) without FSDP asserts CUDA_DEVICE_MAX_CONNECTIONS == "1".
  if (tp > 1 && !fsdp) {
    EXPECT_EQ(r.env.count("CUDA_DEVICE_MAX_CONNECTIONS") ? r.env.at("CUDA_DEVICE_MAX_CONNECTIONS") : "", "1");
  }
  // megatron/core/transformer/moe/moe_layer.py MoELayer.forward: training with TP > 1 and no
  // sequence_parallel raises ValueError (validate_args only warns).
  if (moe && tp > 1) {
    EXPECT_TRUE(r.flags.count("--sequence-parallel"));
  }
  // MoELayer.__init__: the token dispatcher must be allgather, alltoall or flex; the planner models all-to-all.
  if (moe) {
    EXPECT_EQ(r.flags.at("--moe-token-dispatcher-type"), "alltoall");
  }
  // megatron/core/transformer/transformer_config.py __post_init__: a capacity factor needs aux_loss,
  // seq_aux_loss, global_aux_loss or none balancing.
  if (r.flags.count("--moe-expert-capacity-factor")) {
    EXPECT_EQ(r.flags.at("--moe-router-load-balancing-type"), "aux_loss");
  }
  // validate_args: --overlap-param-gather needs the distributed optimizer or Megatron-FSDP and --overlap-grad-reduce.
  if (r.flags.count("--overlap-param-gather")) {
    EXPECT_TRUE(r.flags.count("--use-distributed-optimizer") || fsdp);
    EXPECT_TRUE(r.flags.count("--overlap-grad-reduce"));
  }
  // validate_args: selective recompute takes no --recompute-method; full takes uniform or block.
  if (r.flags.count("--recompute-granularity") && r.flags.at("--recompute-granularity") == "selective") {
    EXPECT_FALSE(r.flags.count("--recompute-method"));
  }
  if (r.flags.count("--recompute-method")) {
    EXPECT_EQ(r.flags.at("--recompute-granularity"), "full");
    EXPECT_TRUE(r.flags.at("--recompute-method") == "uniform" || r.flags.at("--recompute-method") == "block");
  }
  // moe4d's RoPE rotates pairs (2i, 2i+1): Megatron's rotary_interleaved
  // (megatron/core/models/common/embeddings/rope_utils.py _rotate_half). TransformerConfig.__post_init__
  // refuses interleaved RoPE with the fused kernel on TE < 2.3, so the export turns fusion off.
  EXPECT_EQ(r.flags.at("--position-embedding-type"), "rope");
  EXPECT_TRUE(r.flags.count("--rotary-interleaved"));
  EXPECT_TRUE(r.flags.count("--no-rope-fusion"));
}

PlanContext context(const std::string& preset_name) {
  const ModelPreset preset = model_preset(preset_name);
  return PlanContext{preset_name, preset.model, preset.setup, cluster_preset("atlas-800t-a2")};
}

TEST(MegatronExport, DenseTensorParallel) {
  PlanContext ctx = context("moe-120b");
  ctx.model.moe.num_experts = 0;  // dense
  const Layout layout = parse_layout("dp=8,tp=8,pp=1,mb=32,recompute=selective", ctx.setup.global_batch, 64);
  const MegatronRun r = parse_run(export_megatron(ctx, layout));
  expect_megatron_accepts(r, 64, false, "dense tp8");
  EXPECT_EQ(r.env.at("CUDA_DEVICE_MAX_CONNECTIONS"), "1");
  EXPECT_FALSE(r.flags.count("--num-experts"));
  EXPECT_FALSE(r.flags.count("--expert-model-parallel-size"));
  EXPECT_FALSE(r.flags.count("--sequence-parallel"));  // optional for dense, and not planned here
  // Planned with sequence parallelism (sp=1), dense TP gets it too.
  const Layout sp = parse_layout("dp=8,tp=8,pp=1,mb=32,recompute=selective,sp=1", ctx.setup.global_batch, 64);
  const MegatronRun with = parse_run(export_megatron(ctx, sp));
  expect_megatron_accepts(with, 64, false, "dense tp8 sp");
  EXPECT_TRUE(with.flags.count("--sequence-parallel"));
}

TEST(MegatronExport, MoeExpertAndTensorParallel) {
  const PlanContext ctx = context("moe-120b");
  const Layout layout = parse_layout("dp=2,ep=8,tp=4,pp=1,mb=16,recompute=full", ctx.setup.global_batch, 64);
  const MegatronRun r = parse_run(export_megatron(ctx, layout));
  expect_megatron_accepts(r, 64, true, "moe ep8 tp4");
  EXPECT_TRUE(r.flags.count("--sequence-parallel"));
  EXPECT_EQ(r.flags.at("--expert-model-parallel-size"), "8");
  EXPECT_EQ(r.flags.at("--num-experts"), "16");
  EXPECT_EQ(r.env.at("CUDA_DEVICE_MAX_CONNECTIONS"), "1");
  EXPECT_FALSE(r.flags.count("--use-distributed-optimizer"));
}

TEST(MegatronExport, InterleavedPipeline) {
  const PlanContext ctx = context("moe-120b");
  const Layout layout = parse_layout("dp=2,ep=8,pp=4,mb=8,schedule=interleaved,v=2,zero=1", ctx.setup.global_batch, 64);
  const MegatronRun r = parse_run(export_megatron(ctx, layout));
  expect_megatron_accepts(r, 64, true, "pp4 interleaved v2");
  EXPECT_EQ(r.flags.at("--num-virtual-stages-per-pipeline-rank"), "2");
  EXPECT_FALSE(r.flags.count("--num-layers-per-virtual-pipeline-stage"));
  EXPECT_FALSE(r.env.count("CUDA_DEVICE_MAX_CONNECTIONS"));  // TP 1: not required
  EXPECT_FALSE(r.flags.count("--sequence-parallel"));        // TP 1: Megatron turns it off anyway
}

TEST(MegatronExport, ZeroStages) {
  const PlanContext ctx = context("moe-120b");
  for (int zero = 1; zero <= 3; ++zero) {
    const Layout layout = parse_layout("dp=2,ep=8,tp=4,pp=1,mb=16,zero=" + std::to_string(zero), ctx.setup.global_batch, 64);
    const MegatronRun r = parse_run(export_megatron(ctx, layout));
    expect_megatron_accepts(r, 64, true, "zero " + std::to_string(zero));
    if (zero <= 2) {
      EXPECT_TRUE(r.flags.count("--use-distributed-optimizer"));
      EXPECT_FALSE(r.flags.count("--use-megatron-fsdp"));
    } else {
      // Megatron-FSDP v1 turns the distributed optimizer on itself (validate_args).
      EXPECT_TRUE(r.flags.count("--use-megatron-fsdp"));
      EXPECT_EQ(r.flags.at("--data-parallel-sharding-strategy"), "optim_grads_params");
      EXPECT_FALSE(r.env.count("CUDA_DEVICE_MAX_CONNECTIONS"));
    }
  }
}

TEST(MegatronExport, EveryPresetAndScheduleUsesOnlyMegatronOptions) {
  for (const std::string& name : {std::string("moe-120b"), std::string("dense-70b"), std::string("mixtral-8x7b")}) {
    const PlanContext ctx = context(name);
    const bool moe = ctx.model.is_moe();
    // 64 devices either way: EP 2 for the MoE models, twice the data replicas for the dense one.
    const std::string ep = moe ? ",ep=2" : "";
    const std::string dp4 = moe ? "dp=4" : "dp=8", dp8 = moe ? "dp=8" : "dp=16";
    for (const std::string& text : {dp4 + ep + ",tp=2,pp=4,mb=8,schedule=1f1b,zero=2,recompute=full",
                                    dp8 + ep + ",tp=2,pp=2,mb=8,schedule=interleaved,v=2,zero=3,recompute=selective"}) {
      const int world = 64;
      const Layout layout = parse_layout(text, ctx.setup.global_batch, world);
      expect_megatron_accepts(parse_run(export_megatron(ctx, layout)), world, moe, name + " " + text);
    }
  }
}

}  // namespace
}  // namespace moe4d
