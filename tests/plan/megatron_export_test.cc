// tests/plan/megatron_export_test.cc — `--export megatron` against Megatron-Core's own argument rules.
//
// Megatron-LM cannot run here (it needs torch >= 2 and CUDA), so its rules are encoded below, each with
// the file and function it comes from (NVIDIA/Megatron-LM at d98e8a64ddf34856e74b24714e3bedb2f5a39553).
// Every exported option is also checked against the option names that parser defines
// (tests/plan/data/megatron_flags.txt, names only, taken from add_megatron_arguments).
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "plan/cluster_presets.h"
#include "plan/layout_export.h"
#include "plan/model_presets.h"

namespace moe4d {
namespace {

struct MegatronRun {
  std::map<std::string, std::string> env;   // from `export NAME=VALUE` lines
  std::set<std::string> unset;              // from `unset NAME` lines
  std::map<std::string, std::string> launcher;  // torchrun's options -> value
  std::string script;                           // the script torchrun runs
  std::map<std::string, std::string> flags;  // option -> value ("" for store_true)
  std::vector<std::string> order;            // options as emitted (duplicates show here)
};

// Reads the exported command as a shell would: comment lines, env lines, then one `torchrun` command
// continued with " \" whose options run up to the script, after which come the script's options.
MegatronRun parse_run(const std::string& text) {
  MegatronRun run;
  std::istringstream in(text);
  std::string line;
  bool in_command = false;
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
    const bool continued = line.size() >= 2 && line.substr(line.size() - 2) == " \\";
    if (continued) line.resize(line.size() - 2);
    EXPECT_TRUE(in_command || line.rfind("torchrun ", 0) == 0) << "not part of the torchrun command: " << line;
    in_command = continued;
    if (line.rfind("torchrun ", 0) == 0) line = line.substr(9);
    // Words as the shell splits them: spaces outside double quotes (the quotes stay in the word).
    std::vector<std::string> words(1);
    bool quoted = false;
    for (char ch : line) {
      if (ch == '"') quoted = !quoted;
      if (ch == ' ' && !quoted) {
        if (!words.back().empty()) words.emplace_back();
        continue;
      }
      words.back() += ch;
    }
    EXPECT_FALSE(quoted) << "unbalanced quotes: " << line;
    if (words.back().empty()) words.pop_back();
    for (size_t i = 0; i < words.size(); ++i) {
      const std::string& name = words[i];
      if (name.rfind("--", 0) != 0) {  // the script: its options follow
        EXPECT_TRUE(run.script.empty()) << "a stray word: " << name;
        run.script = name;
        continue;
      }
      std::string value;
      if (i + 1 < words.size() && words[i + 1].rfind("--", 0) != 0 && !(run.script.empty() && words[i + 1].find(".py") != std::string::npos))
        value = words[++i];
      if (run.script.empty()) {
        run.launcher[name] = value;
      } else {
        run.flags[name] = value;
        run.order.push_back(name);
      }
    }
  }
  EXPECT_FALSE(in_command) << "the command ends with a continuation";
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
  // torchrun: one process per device of a node, the nodes, this node's rank and the rendezvous; the script
  // is Megatron's GPT pretraining entry point.
  EXPECT_EQ(r.script, "pretrain_gpt.py");
  ASSERT_TRUE(r.launcher.count("--nproc_per_node") && r.launcher.count("--nnodes"));
  EXPECT_EQ(std::stoi(r.launcher.at("--nproc_per_node")) * std::stoi(r.launcher.at("--nnodes")), world);
  for (const char* key : {"--node_rank", "--master_addr", "--master_port"}) EXPECT_TRUE(r.launcher.count(key)) << key;
  // argparse (parse_args, allow_abbrev=False): every option must be one the parser defines, given once.
  for (const std::string& flag : r.order) EXPECT_TRUE(names.count(flag)) << flag << " is not a Megatron-LM option";
  EXPECT_EQ(r.order.size(), r.flags.size()) << "an option is given twice";

  const int tp = num(r, "--tensor-model-parallel-size"), pp = num(r, "--pipeline-model-parallel-size");
  const int ep = num(r, "--expert-model-parallel-size"), cp = num(r, "--context-parallel-size");
  const bool fsdp = r.flags.count("--use-megatron-fsdp") > 0;
  // validate_args: "world size is not divisible by total_model_size" (tp x pp x cp); dp = world / that.
  ASSERT_EQ(world % (tp * pp * cp), 0);
  const int dp = world / (tp * pp * cp);
  // validate_args: "seq-length should be a multiple of 2 * context-parallel-size if context-parallel-size > 1".
  if (cp > 1) {
    EXPECT_EQ(num(r, "--seq-length") % (2 * cp), 0);
  }
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
  // validate_args: TP or CP > 1 (before Blackwell) without FSDP asserts CUDA_DEVICE_MAX_CONNECTIONS == "1".
  if ((tp > 1 || cp > 1) && !fsdp) {
    EXPECT_EQ(r.env.count("CUDA_DEVICE_MAX_CONNECTIONS") ? r.env.at("CUDA_DEVICE_MAX_CONNECTIONS") : "", "1");
  }
  // megatron/core/transformer/moe/moe_layer.py MoELayer.forward: training with TP > 1 and no
  // sequence_parallel raises ValueError (validate_args only warns).
  if (moe && tp > 1) {
    EXPECT_TRUE(r.flags.count("--sequence-parallel"));
  }
  // MoELayer.__init__: the token dispatcher must be allgather, alltoall or flex; the planner models
  // all-to-all, or for its node-aware dispatch flex on DeepEP (transformer_config.py __post_init__: the
  // DeepEP backend only with flex; token_dispatcher.py _DeepepManager: "DeepEP dispatcher requires
  // TPxEP > 1").
  if (moe) {
    const std::string dispatcher = r.flags.at("--moe-token-dispatcher-type");
    EXPECT_TRUE(dispatcher == "alltoall" || dispatcher == "flex") << dispatcher;
    EXPECT_EQ(r.flags.count("--moe-flex-dispatcher-backend"), dispatcher == "flex" ? 1u : 0u);
    if (dispatcher == "flex") {
      EXPECT_EQ(r.flags.at("--moe-flex-dispatcher-backend"), "deepep");
      EXPECT_GT(tp * ep, 1);
    }
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
  // (megatron/core/models/common/embeddings/rope_utils.py _rotate_half) over the whole head (rotary_percent
  // 1.0, the default, so not given). --rotary-base is type=int in the parser. Fusion stays Megatron's default
  // (TransformerConfig.__post_init__ accepts interleaved + fused with TE >= 2.3; the comment says so).
  EXPECT_EQ(r.flags.at("--position-embedding-type"), "rope");
  // TransformerConfig.__post_init__: "rotary_interleaved does not work with multi_latent_attention" (its MLA
  // RoPE takes the (2i, 2i+1) pairs itself).
  EXPECT_EQ(r.flags.count("--rotary-interleaved") > 0, r.flags.count("--multi-latent-attention") == 0);
  EXPECT_FALSE(r.flags.count("--rotary-percent"));
  const std::string base = r.flags.at("--rotary-base");
  EXPECT_EQ(std::to_string(std::stoll(base)), base) << "--rotary-base must be an integer";
  // validate_args: a single data source (--mock-data here); iteration-based training with min_lr <= lr.
  EXPECT_EQ(r.flags.count("--mock-data") + r.flags.count("--data-path"), 1u);
  EXPECT_TRUE(r.flags.count("--train-iters"));
  EXPECT_FALSE(r.flags.count("--train-samples"));
  EXPECT_LE(std::stod(r.flags.at("--min-lr")), std::stod(r.flags.at("--lr")));
  // training_config.py: lr_decay_style is one of constant, linear, cosine, inverse-square-root, WSD.
  EXPECT_EQ(r.flags.at("--lr-decay-style"), "cosine");
  // --moe-grouped-gemm where a rank holds more than one expert (one GEMM over its local experts).
  if (moe) {
    EXPECT_EQ(r.flags.count("--moe-grouped-gemm") > 0, num(r, "--num-experts") / ep > 1);
    EXPECT_EQ(r.flags.at("--moe-router-dtype"), "fp32");  // transformer_config.py: fp32 or fp64
  } else {
    EXPECT_FALSE(r.flags.count("--moe-grouped-gemm"));
  }
}

// Expands Megatron's --moe-layer-freq value the way arguments.py moe_freq_type / _eval_pattern does for
// the forms the export writes: "1", or "[0]*a+([1]+[0]*b)*c+[1]+[0]*d" (quoted for the shell).
std::vector<int> expand_layer_freq(std::string v, int layers) {
  if (v == "1") return std::vector<int>(layers, 1);
  EXPECT_EQ(v.front(), '"');
  v = v.substr(1, v.size() - 2);
  if (v.find(',') != std::string::npos) {  // the explicit list "[1,0,...]" (model.moe.dense_layers)
    std::vector<int> out;
    for (char ch : v)
      if (ch == '0' || ch == '1') out.push_back(ch - '0');
    EXPECT_EQ(v.find_first_not_of("[],01"), std::string::npos) << v;
    return out;
  }
  int a = 0, b = 0, c = 0, d = 0;
  EXPECT_EQ(std::sscanf(v.c_str(), "[0]*%d+([1]+[0]*%d)*%d+[1]+[0]*%d", &a, &b, &c, &d), 4) << v;
  std::vector<int> out(a, 0);
  for (int i = 0; i < c; ++i) {
    out.push_back(1);
    out.insert(out.end(), b, 0);
  }
  out.push_back(1);
  out.insert(out.end(), d, 0);
  return out;
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

// Multi-head latent attention (DeepSeek-V3's shapes on the preset's MoE), with YaRN and without.
TEST(MegatronExport, MultiLatentAttention) {
  PlanContext ctx = context("moe-120b");
  ctx.model.num_kv_heads = 0;
  ctx.model.mla = {.q_lora_rank = 1536, .kv_lora_rank = 512, .qk_nope_head_dim = 128, .qk_rope_head_dim = 64,
                   .v_head_dim = 128};
  ctx.model.rope_scaling = {.factor = 40, .original_max_position_embeddings = 4096, .mscale = 1, .mscale_all_dim = 1};
  const Layout layout = parse_layout("dp=2,ep=8,tp=4,pp=1,mb=16,recompute=full", ctx.setup.global_batch, 64);
  const MegatronRun r = parse_run(export_megatron(ctx, layout));
  expect_megatron_accepts(r, 64, true, "mla");
  EXPECT_TRUE(r.flags.count("--multi-latent-attention"));
  EXPECT_FALSE(r.flags.count("--group-query-attention"));  // arguments.py: MLA asserts not GQA
  EXPECT_EQ(r.flags.at("--q-lora-rank"), "1536");
  EXPECT_EQ(r.flags.at("--kv-lora-rank"), "512");
  EXPECT_EQ(r.flags.at("--qk-head-dim"), "128");
  EXPECT_EQ(r.flags.at("--qk-pos-emb-head-dim"), "64");
  EXPECT_EQ(r.flags.at("--v-head-dim"), "128");
  EXPECT_EQ(r.flags.at("--rope-type"), "yarn");
  EXPECT_EQ(r.flags.at("--rotary-scaling-factor"), "40");
  EXPECT_EQ(r.flags.at("--yarn-original-max-position-embeddings"), "4096");
  EXPECT_EQ(r.flags.at("--mscale-all-dim"), "1");
  ctx.model.mla.q_lora_rank = 0;  // a plain query projection: no --q-lora-rank (Megatron's None)
  ctx.model.rope_scaling = {};
  const MegatronRun plain = parse_run(export_megatron(ctx, layout));
  expect_megatron_accepts(plain, 64, true, "mla without q_lora_rank");
  EXPECT_FALSE(plain.flags.count("--q-lora-rank"));
  EXPECT_EQ(plain.flags.at("--rope-type"), "rope");
  EXPECT_FALSE(plain.flags.count("--rotary-scaling-factor"));
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

// Context parallelism: --context-parallel-size, and Megatron's DP = world / (TP x CP x PP) reads the
// global batch as the plan's dense replicas do (EP inside DP x CP).
TEST(MegatronExport, ContextParallel) {
  const PlanContext ctx = context("moe-120b");
  const Layout layout = parse_layout("dp=4,ep=4,tp=4,pp=1,cp=2,mb=16,zero=1", ctx.setup.global_batch, 64);
  EXPECT_EQ(layout.dense_replicas(), 8);
  const MegatronRun r = parse_run(export_megatron(ctx, layout));
  expect_megatron_accepts(r, 64, true, "moe ep4 tp4 cp2");
  EXPECT_EQ(r.flags.at("--context-parallel-size"), "2");
  EXPECT_EQ(num(r, "--global-batch-size"), layout.micro_batch_size * layout.micro_batch_num * 8);
  const Layout dense_cp = parse_layout("dp=8,tp=1,pp=1,cp=8,mb=8", ctx.setup.global_batch, 8);
  PlanContext dense = ctx;
  dense.model.moe.num_experts = 0;
  const MegatronRun d = parse_run(export_megatron(dense, dense_cp));
  expect_megatron_accepts(d, 8, false, "dense cp8");
  EXPECT_EQ(d.env.at("CUDA_DEVICE_MAX_CONNECTIONS"), "1");  // asserted for CP as for TP
  EXPECT_FALSE(parse_run(export_megatron(ctx, parse_layout("dp=4,ep=4,tp=4,mb=16", ctx.setup.global_batch, 64)))
                   .flags.count("--context-parallel-size"));
}

// The node-aware expert dispatch maps to Megatron-Core's flex dispatcher on DeepEP
// (transformer_config.py: moe_token_dispatcher_type 'flex', moe_flex_dispatcher_backend 'deepep').
TEST(MegatronExport, HierarchicalDispatchIsTheFlexDispatcherOnDeepEP) {
  const PlanContext ctx = context("moe-120b");
  const Layout layout =
      parse_layout("dp=2,ep=8,tp=4,pp=1,mb=16,recompute=full,dispatch=hierarchical", ctx.setup.global_batch, 64);
  const MegatronRun r = parse_run(export_megatron(ctx, layout));
  expect_megatron_accepts(r, 64, true, "moe ep8 tp4 hierarchical");
  EXPECT_EQ(r.flags.at("--moe-token-dispatcher-type"), "flex");
  EXPECT_EQ(r.flags.at("--moe-flex-dispatcher-backend"), "deepep");
  const MegatronRun flat = parse_run(export_megatron(ctx, parse_layout("dp=2,ep=8,tp=4,pp=1,mb=16,recompute=full",
                                                                       ctx.setup.global_batch, 64)));
  EXPECT_EQ(flat.flags.at("--moe-token-dispatcher-type"), "alltoall");
  EXPECT_FALSE(flat.flags.count("--moe-flex-dispatcher-backend"));
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
  for (const std::string& name : {std::string("moe-120b"), std::string("dense-70b"), std::string("mixtral-8x7b"),
                                  std::string("qwen3-30b-a3b")}) {
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

// The MoE layer pattern reproduces moe4d's rule for every first_dense_layers / layer_freq combination.
TEST(MegatronExport, MoeLayerPatternMatchesTheModel) {
  PlanContext ctx = context("moe-120b");
  const Layout layout = parse_layout("dp=8,ep=8,tp=1,pp=1,mb=4", ctx.setup.global_batch, 64);
  for (int freq : {1, 2, 3})
    for (int first_dense : {0, 1, 3}) {
      ctx.model.moe.layer_freq = freq;
      ctx.model.moe.first_dense_layers = first_dense;
      const MegatronRun r = parse_run(export_megatron(ctx, layout));
      const std::vector<int> pattern = expand_layer_freq(r.flags.at("--moe-layer-freq"), ctx.model.num_layers);
      ASSERT_EQ(pattern.size(), static_cast<size_t>(ctx.model.num_layers)) << "freq " << freq << " first " << first_dense;
      for (int l = 0; l < ctx.model.num_layers; ++l)
        EXPECT_EQ(pattern[l], ctx.model.is_moe_layer(l) ? 1 : 0) << "layer " << l << " freq " << freq;
    }
}

// Qwen3-MoE: --qk-layernorm and --kv-channels 128 (hidden 2048 / 32 heads = 64 otherwise), GQA on 4
// groups; Qwen3's mlp_only_layers (model.moe.dense_layers) as an explicit --moe-layer-freq list.
TEST(MegatronExport, Qwen3QkNormHeadDimAndDenseLayers) {
  PlanContext ctx = context("qwen3-30b-a3b");
  const Layout layout = parse_layout("dp=4,ep=8,tp=2,pp=2,mb=8", ctx.setup.global_batch, 128);
  MegatronRun r = parse_run(export_megatron(ctx, layout));
  expect_megatron_accepts(r, 128, true, "qwen3-30b-a3b");
  EXPECT_TRUE(r.flags.count("--qk-layernorm"));
  EXPECT_EQ(r.flags.at("--kv-channels"), "128");
  EXPECT_EQ(r.flags.at("--num-query-groups"), "4");
  EXPECT_EQ(r.flags.at("--moe-layer-freq"), "1");
  ctx.model.moe.dense_layers = {0, 5};
  r = parse_run(export_megatron(ctx, layout));
  const std::vector<int> pattern = expand_layer_freq(r.flags.at("--moe-layer-freq"), ctx.model.num_layers);
  ASSERT_EQ(pattern.size(), size_t(ctx.model.num_layers));
  for (int l = 0; l < ctx.model.num_layers; ++l) EXPECT_EQ(pattern[l], l == 0 || l == 5 ? 0 : 1) << l;
  // Without an explicit head width neither flag appears.
  const MegatronRun mixtral = parse_run(export_megatron(context("mixtral-8x7b"), layout));
  EXPECT_FALSE(mixtral.flags.count("--kv-channels") || mixtral.flags.count("--qk-layernorm"));
}

// A complete command: the launcher for the cluster, the train section of the config the model came from,
// RoPE that matches the model, grouped GEMM only where a rank holds several experts.
TEST(MegatronExport, CompleteCommandForTheCluster) {
  PlanContext ctx = context("moe-120b");
  const Layout layout = parse_layout("dp=2,ep=8,tp=4,pp=1,mb=16,recompute=full", ctx.setup.global_batch, 64);
  Config base;
  base.model = ctx.model;
  base.train.steps = 500;
  base.train.lr = 2e-4;
  base.train.min_lr = 2e-5;
  base.train.warmup_steps = 50;
  const std::string text = export_megatron(ctx, layout, base);
  const MegatronRun r = parse_run(text);
  expect_megatron_accepts(r, 64, true, "complete");
  EXPECT_EQ(r.launcher.at("--nproc_per_node"), "8");
  EXPECT_EQ(r.launcher.at("--nnodes"), "8");
  EXPECT_EQ(r.launcher.at("--node_rank"), "\"${NODE_RANK:?set NODE_RANK to this node's index}\"");  // the shell stops without it
  EXPECT_EQ(r.flags.at("--train-iters"), "500");
  EXPECT_EQ(r.flags.at("--lr"), "0.0002");
  EXPECT_EQ(r.flags.at("--lr-warmup-iters"), "50");
  EXPECT_EQ(r.flags.at("--rotary-base"), "10000");
  EXPECT_TRUE(r.flags.count("--moe-grouped-gemm"));  // 16 experts / EP 8 = 2 per rank
  EXPECT_NE(text.find("Transformer Engine >= 2.3"), std::string::npos);
  // One expert per rank: no grouped GEMM. One node: a local rendezvous.
  const Layout one = parse_layout("dp=1,ep=16,tp=1,pp=1,mb=16", ctx.setup.global_batch, 16);
  ctx.cluster = cluster_with_devices(context("moe-120b").cluster, 16);
  const MegatronRun r16 = parse_run(export_megatron(ctx, one));
  expect_megatron_accepts(r16, 16, true, "ep16");
  EXPECT_FALSE(r16.flags.count("--moe-grouped-gemm"));
  PlanContext mixtral = context("mixtral-8x7b");
  mixtral.cluster = cluster_with_devices(mixtral.cluster, 8);
  const MegatronRun single = parse_run(export_megatron(mixtral, parse_layout("dp=1,ep=8,tp=1,pp=1,mb=64", 512, 8)));
  expect_megatron_accepts(single, 8, true, "one node");
  EXPECT_EQ(single.launcher.at("--nnodes"), "1");
  EXPECT_EQ(single.launcher.at("--master_addr"), "localhost");
  EXPECT_EQ(single.flags.at("--rotary-base"), "1000000");
  // A non-integer theta is rounded, and the export says so.
  mixtral.model.rope_theta = 10000.25;
  const std::string rounded = export_megatron(mixtral, parse_layout("dp=1,ep=8,tp=1,pp=1,mb=64", 512, 8));
  EXPECT_NE(rounded.find("is not an integer"), std::string::npos);
  EXPECT_EQ(parse_run(rounded).flags.at("--rotary-base"), "10000");
}

// DeepSeek-V3-style routing: group-limited, scaled, sigmoid with the expert bias, each balancing type,
// and transformer_config.py __post_init__'s rules on them (group_topk needs num_groups, which divides
// the experts, group_topk <= num_groups; the expert bias needs sigmoid scores).
TEST(MegatronExport, DeepSeekRouterFlags) {
  PlanContext ctx = context("moe-120b");
  MoeConfig& moe = ctx.model.moe;
  moe.top_k = 4;
  moe.num_groups = 4;
  moe.group_topk = 2;
  moe.routed_scaling_factor = 2.5;
  moe.score_function = RouterScore::kSigmoid;
  moe.router_bias_update_rate = 0.001;
  const Layout layout = parse_layout("dp=8,ep=8,tp=1,pp=1,mb=4", ctx.setup.global_batch, 64);
  for (const auto& [type, name] : {std::pair{LoadBalancing::kAuxLoss, "aux_loss"},
                                   std::pair{LoadBalancing::kSeqAuxLoss, "seq_aux_loss"},
                                   std::pair{LoadBalancing::kGlobalAuxLoss, "global_aux_loss"}}) {
    moe.load_balancing_type = type;
    const std::string text = export_megatron(ctx, layout);
    const MegatronRun r = parse_run(text);
    expect_megatron_accepts(r, 64, true, std::string("deepseek routing ") + name);
    EXPECT_EQ(r.flags.at("--moe-router-num-groups"), "4");
    EXPECT_EQ(r.flags.at("--moe-router-group-topk"), "2");
    EXPECT_EQ(num(r, "--num-experts") % num(r, "--moe-router-num-groups"), 0);
    EXPECT_LE(num(r, "--moe-router-group-topk"), num(r, "--moe-router-num-groups"));
    EXPECT_EQ(r.flags.at("--moe-router-topk-scaling-factor"), "2.5");
    EXPECT_EQ(r.flags.at("--moe-router-score-function"), "sigmoid");
    EXPECT_TRUE(r.flags.count("--moe-router-enable-expert-bias"));
    EXPECT_EQ(r.flags.at("--moe-router-bias-update-rate"), "0.001");
    EXPECT_EQ(r.flags.at("--moe-router-load-balancing-type"), name);
    // top_k = 2 x group_topk: Megatron's group score (top top_k / group_topk) is moe4d's (top 2).
    EXPECT_EQ(text.find("routing differs"), std::string::npos);
  }
  // Softmax scores: no expert bias flag (Megatron refuses it), a comment instead; another group score.
  moe.score_function = RouterScore::kSoftmax;
  moe.top_k = 2;
  const std::string text = export_megatron(ctx, layout);
  const MegatronRun r = parse_run(text);
  expect_megatron_accepts(r, 64, true, "softmax with bias");
  EXPECT_FALSE(r.flags.count("--moe-router-enable-expert-bias"));
  EXPECT_NE(text.find("cannot be expressed"), std::string::npos);
  EXPECT_NE(text.find("routing differs"), std::string::npos);
}

}  // namespace
}  // namespace moe4d
