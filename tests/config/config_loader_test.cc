// Tests of config/config_loader.h: a full config round-trips through config_to_yaml, defaults and
// MindFormers aliases apply, and every kind of bad input gets its exact one-line message.
#include "config/config_loader.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "core/error.h"

namespace moe4d {
namespace {

// The smallest valid config: only the required keys.
constexpr const char* kMinimal = R"(model:
  vocab_size: 512
  hidden_size: 64
  num_layers: 2
  num_heads: 4
  ffn_hidden_size: 128
  seq_length: 32
train:
  global_batch_size: 8
  steps: 10
data:
  train: data/train.bin
)";

// A config that sets every key to a non-default value, so that a round trip through
// config_to_yaml proves that every field is written and read back.
constexpr const char* kFull = R"(model:
  vocab_size: 32000
  hidden_size: 256
  num_layers: 6
  num_heads: 8
  ffn_hidden_size: 704
  seq_length: 128
  tie_embeddings: true
  num_kv_heads: 4
  rope_theta: 1.0e6
  norm_eps: 1.0e-6
  head_dim: 40
  qk_layernorm: true
  moe:
    num_experts: 8
    top_k: 1
    layer_freq: 2
    capacity_factor: 1.25
    aux_loss_coeff: 0.001
    z_loss_coeff: 1e-4
    router_bias_update_rate: 0.003
    a2a_chunks: 2
    first_dense_layers: 1
    dense_layers: [3]
    expert_ffn_hidden_size: 352
    shared_experts: 2
    shared_expert_ffn_hidden_size: 176
    score_function: sigmoid
    normalize_top_k: false
    redundant_experts: 2
    rebalance_interval: 50
parallel_config:
  data_parallel: 2
  expert_parallel: 4
  tensor_parallel: 2
  pipeline_parallel: 3
  micro_batch_num: 6
  gradient_aggregation_group: 3
  recompute: {granularity: selective}
  zero_stage: 2
  pipeline_schedule: interleaved
  virtual_pipeline: 2
  stage_layers: [1, 1, 1, 1, 1, 1]
  rank_order: ep-tp-pp-dp
  device_list: [3, 2, 1, 0]
  local_worker_num: 8
  collective_timeout: 42.5
  overlap_grad_reduce: false
train:
  global_batch_size: 96
  steps: 1000
  lr: 6.0e-4
  min_lr: 1.0e-5
  warmup_steps: 100
  weight_decay: 0.05
  grad_clip: 0.5
  beta1: 0.8
  beta2: 0.99
  eps: 1.0e-6
  seed: 18446744073709551615
  precision: bf16
  backend: reference
  loss_scale: {initial: 1024, factor: 4, window: 200, hysteresis: 3}
  grad_compression: fp16
  optimizer: onebit_adam
  freeze_steps: 50
  max_nonfinite_steps: 5
  log_interval: 10
  eval_interval: 100
  eval_batches: 8
  metrics_file: "runs/with: colon.jsonl"
data:
  train: data/train.bin
  valid: data/valid.bin
  tokenizer: "null"
checkpoint:
  dir: runs/ckpt
  interval: 50
  keep: 3
  format: sharded
  async: true
)";

// Equality of everything a YAML key sets (Config::source is not a key). Config's defaulted
// operator== covers every field, including ones added later; on a mismatch the YAML of both says
// which field differs.
void expect_same(const Config& a, const Config& b) {
  Config a_with_b_source = a;
  a_with_b_source.source = b.source;
  EXPECT_TRUE(a_with_b_source == b) << "first:\n" << config_to_yaml(a) << "second:\n" << config_to_yaml(b);
}

// The message of the moe4d::Error that parsing `yaml` throws ("" if it parses).
std::string error_of(const std::string& yaml) {
  try {
    parse_config(yaml, "demo.yaml");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// kMinimal with the line `from` (exactly as written) replaced by `to`.
std::string minimal_with(const std::string& from, const std::string& to) {
  std::string text = kMinimal;
  size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  return text.replace(at, from.size(), to);
}

TEST(ConfigLoader, FullConfigParsesEveryField) {
  Config c = parse_config(kFull, "full.yaml");
  EXPECT_EQ(c.source, "full.yaml");
  EXPECT_EQ(c.model.moe.capacity_factor, 1.25);
  EXPECT_EQ(c.model.moe.z_loss_coeff, 1e-4);
  EXPECT_EQ(c.parallel.recompute, RecomputeGranularity::kSelective);
  EXPECT_EQ(c.parallel.pipeline_schedule, PipelineSchedule::kInterleaved);
  EXPECT_EQ(c.parallel.device_list, (std::vector<int>{3, 2, 1, 0}));
  EXPECT_EQ(c.train.seed, 18446744073709551615ull);
  EXPECT_EQ(c.train.precision, Precision::kBF16);
  EXPECT_EQ(c.train.backend, ComputeBackend::kReference);
  EXPECT_EQ(c.train.loss_scale.window, 200);
  EXPECT_EQ(c.train.optimizer, OptimizerKind::kOneBitAdam);
  EXPECT_EQ(c.train.metrics_file, "runs/with: colon.jsonl");
  EXPECT_EQ(c.data.tokenizer, "null");  // a quoted "null" is a string
  EXPECT_EQ(c.checkpoint.keep, 3);
  EXPECT_EQ(c.checkpoint.format, CheckpointFormat::kSharded);
  EXPECT_TRUE(c.checkpoint.async);
  EXPECT_EQ(c.model.num_kv_heads, 4);
  EXPECT_EQ(c.model.qkv_width(), (8 + 2 * 4) * 40);
  EXPECT_EQ(c.model.attn_width(), 8 * 40);
  EXPECT_TRUE(c.model.qk_norm);
  EXPECT_EQ(c.model.rope_theta, 1e6);
  EXPECT_EQ(c.model.norm_eps, 1e-6);
  EXPECT_EQ(c.model.moe.first_dense_layers, 1);
  EXPECT_EQ(c.model.expert_ffn(), 352);
  EXPECT_EQ(c.model.shared_ffn(), 2 * 176);
  EXPECT_EQ(c.model.moe.score_function, RouterScore::kSigmoid);
  EXPECT_FALSE(c.model.moe.normalize_top_k);
  // first_dense_layers 1, then layer_freq 2 on the absolute index: layers 1, 3, 5, less dense_layers [3].
  for (int l = 0; l < 6; ++l) EXPECT_EQ(c.model.is_moe_layer(l), l == 1 || l == 5) << l;
}

TEST(ConfigErrors, ExpertReplicationKeys) {
  const std::string moe = "  seq_length: 32\n  moe:\n    num_experts: 4\n";
  const auto with = [&](const std::string& keys) { return minimal_with("  seq_length: 32\n", moe + keys); };
  EXPECT_EQ(error_of(with("    redundant_experts: 2\n")),
            "demo.yaml: model.moe.rebalance_interval: expected a positive number of steps between replica "
            "placements when redundant_experts > 0, got '0' (the default)");
  EXPECT_EQ(error_of(with("    rebalance_interval: 10\n")),
            "demo.yaml:10: model.moe.rebalance_interval: only applies with model.moe.redundant_experts > 0 (there "
            "are no replicas to place)");
  EXPECT_EQ(error_of(with("    redundant_experts: -2\n    rebalance_interval: 10\n")),
            "demo.yaml:10: model.moe.redundant_experts: expected a non-negative integer, got '-2'");
  EXPECT_EQ(error_of(minimal_with("  seq_length: 32\n", "  seq_length: 32\n  moe:\n    redundant_experts: 2\n")),
            "demo.yaml:9: model.moe.redundant_experts: only applies to MoE models, expected model.moe.num_experts > 0 "
            "with it");
  const Config c = parse_config(with("    redundant_experts: 2\n    rebalance_interval: 10\n"), "moe.yaml");
  EXPECT_EQ(c.model.moe.redundant_experts, 2);
  EXPECT_EQ(c.model.moe.rebalance_interval, 10);
}

TEST(ConfigErrors, GroupLimitedRoutingKeys) {
  const std::string moe = "  seq_length: 32\n  moe:\n    num_experts: 8\n    top_k: 3\n";
  const auto with = [&](const std::string& keys) { return minimal_with("  seq_length: 32\n", moe + keys); };
  EXPECT_EQ(error_of(with("    num_groups: 3\n    group_topk: 2\n")),
            "demo.yaml:11: model.moe.num_groups: expected a divisor of num_experts = 8 leaving at least 2 experts per "
            "group, got '3'");
  EXPECT_EQ(error_of(with("    num_groups: 8\n    group_topk: 2\n")),
            "demo.yaml:11: model.moe.num_groups: expected a divisor of num_experts = 8 leaving at least 2 experts per "
            "group, got '8'");
  EXPECT_EQ(error_of(with("    num_groups: 4\n    group_topk: 1\n")),
            "demo.yaml:12: model.moe.group_topk: expected an integer in [1, num_groups = 4] whose groups hold at least "
            "top_k = 3 experts, got '1'");
  EXPECT_EQ(error_of(with("    num_groups: 4\n    group_topk: 5\n")),
            "demo.yaml:12: model.moe.group_topk: expected an integer in [1, num_groups = 4] whose groups hold at least "
            "top_k = 3 experts, got '5'");
  EXPECT_EQ(error_of(with("    group_topk: 2\n")),
            "demo.yaml:11: model.moe.group_topk: only applies with model.moe.num_groups > 1, expected 1 without it");
  EXPECT_EQ(error_of(with("    routed_scaling_factor: 0\n")),
            "demo.yaml:11: model.moe.routed_scaling_factor: expected a positive number, got '0'");
  EXPECT_EQ(error_of(with("    load_balancing_type: sinkhorn\n")),
            "demo.yaml:11: model.moe.load_balancing_type: expected one of aux_loss, seq_aux_loss, global_aux_loss, "
            "got 'sinkhorn'");
  const Config c = parse_config(with("    num_groups: 4\n    group_topk: 2\n    routed_scaling_factor: 2.5\n"
                                     "    load_balancing_type: seq_aux_loss\n"),
                                "moe.yaml");
  EXPECT_EQ(c.model.moe.num_groups, 4);
  EXPECT_EQ(c.model.moe.group_topk, 2);
  EXPECT_EQ(c.model.moe.routed_scaling_factor, 2.5);
  EXPECT_EQ(c.model.moe.load_balancing_type, LoadBalancing::kSeqAuxLoss);
}

TEST(ConfigErrors, QwenAttentionAndDenseLayerKeys) {
  const std::string moe = "  seq_length: 32\n  moe:\n    num_experts: 4\n";
  const auto with = [&](const std::string& keys) { return minimal_with("  seq_length: 32\n", moe + keys); };
  EXPECT_EQ(error_of(with("    dense_layers: [0, 2]\n")),
            "demo.yaml:10: model.moe.dense_layers[1]: expected a layer index in [0, num_layers = 2), got '2'");
  EXPECT_EQ(error_of(with("    dense_layers: [1, 0]\n")),
            "demo.yaml:10: model.moe.dense_layers: lists every MoE layer, expected at least one layer to stay MoE");
  EXPECT_EQ(error_of(minimal_with("  seq_length: 32\n", "  seq_length: 32\n  head_dim: 7\n")),
            "demo.yaml:8: model.head_dim: expected an even head dimension (RoPE rotates pairs), got '7'");
  // An explicit head_dim frees num_heads from dividing hidden_size (64 / 3).
  const Config c = parse_config(
      minimal_with("  num_heads: 4\n", "  num_heads: 3\n  head_dim: 32\n  qk_layernorm: true\n"), "qwen.yaml");
  EXPECT_EQ(c.model.attn_width(), 96);
  EXPECT_EQ(c.model.qkv_width(), 9 * 32);
  EXPECT_TRUE(c.model.qk_norm);
  EXPECT_NE(error_of(minimal_with("  num_heads: 4\n", "  num_heads: 3\n")).find("does not divide hidden_size 64"),
            std::string::npos);
}

TEST(ConfigLoader, ModelOptionDefaultsAreTheReferenceModel) {
  const std::string moe = "  seq_length: 32\n  moe:\n    num_experts: 4\n";
  Config c = parse_config(minimal_with("  seq_length: 32\n", moe + "    shared_experts: 1\n"), "moe.yaml");
  EXPECT_EQ(c.model.num_kv_heads, 4);  // multi-head attention: [d, 3d] QKV
  EXPECT_EQ(c.model.qkv_width(), 3 * 64);
  EXPECT_EQ(c.model.rope_theta, 10000.0);
  EXPECT_EQ(c.model.norm_eps, 1e-5);
  EXPECT_EQ(c.model.moe.expert_ffn_hidden_size, 128);         // ffn_hidden_size
  EXPECT_EQ(c.model.moe.shared_expert_ffn_hidden_size, 128);  // the routed experts' width
  EXPECT_EQ(c.model.moe.score_function, RouterScore::kSoftmax);
  EXPECT_TRUE(c.model.moe.normalize_top_k);
  EXPECT_EQ(c.model.moe.first_dense_layers, 0);
  expect_same(c, parse_config(config_to_yaml(c), "echo.yaml"));
  // Structs built in code (tests, planner presets) leave the zeros; the accessors resolve them.
  ModelConfig m;
  m.num_heads = 4;
  m.hidden_size = 64;
  m.ffn_hidden_size = 96;
  m.moe.shared_experts = 2;
  EXPECT_EQ(m.kv_heads(), 4);
  EXPECT_EQ(m.expert_ffn(), 96);
  EXPECT_EQ(m.shared_ffn(), 192);
}

TEST(ConfigLoader, MultiHeadLatentAttentionAndYarn) {
  const std::string mla =
      "  num_heads: 4\n  q_lora_rank: 24\n  kv_lora_rank: 16\n  qk_nope_head_dim: 8\n  qk_rope_head_dim: 4\n"
      "  v_head_dim: 8\n  rope_scaling:\n    factor: 40\n    original_max_position_embeddings: 16\n"
      "    mscale: 1\n    mscale_all_dim: 1\n";
  Config c = parse_config(minimal_with("  num_heads: 4\n", mla), "mla.yaml");
  EXPECT_TRUE(c.model.is_mla());
  EXPECT_EQ(c.model.mla.q_lora_rank, 24);
  EXPECT_EQ(c.model.mla.qk_head_dim(), 12);
  EXPECT_EQ(c.model.rope_scaling.factor, 40);
  EXPECT_EQ(c.model.rope_scaling.beta_fast, 0);  // HF's default 32 (model/rope_scaling.h)
  expect_same(c, parse_config(config_to_yaml(c), "echo.yaml"));
  const auto with = [&](const std::string& from, const std::string& to) {
    std::string text = minimal_with("  num_heads: 4\n", mla);
    text.replace(text.find(from), from.size(), to);
    return error_of(text);
  };
  EXPECT_EQ(with("  kv_lora_rank: 16\n", ""),
            "demo.yaml:6: model.q_lora_rank: only applies with model.kv_lora_rank (multi-head latent attention)");
  EXPECT_EQ(with("  v_head_dim: 8\n", ""),
            "demo.yaml: model.v_head_dim: expected a positive integer with model.kv_lora_rank (MLA), got 'missing' (the default)");
  EXPECT_EQ(with("qk_rope_head_dim: 4", "qk_rope_head_dim: 5"),
            "demo.yaml:9: model.qk_rope_head_dim: expected an even integer (RoPE rotates pairs), got '5'");
  EXPECT_EQ(with("  q_lora_rank: 24\n", "  num_kv_heads: 2\n"),
            "demo.yaml:6: model.num_kv_heads: 2 differs from num_heads 4: with model.kv_lora_rank (MLA) every head "
            "has its own key and value, expanded from one shared latent");
  EXPECT_EQ(with("    factor: 40\n", ""),
            "demo.yaml:13: model.rope_scaling.mscale: only applies with model.rope_scaling.factor (YaRN)");
  EXPECT_EQ(with("factor: 40", "factor: 0.5"),
            "demo.yaml:12: model.rope_scaling.factor: expected a number >= 1 (YaRN extends the context), got '0.5'");
}

TEST(ConfigErrors, ModelOptions) {
  EXPECT_EQ(error_of(minimal_with("  num_heads: 4\n", "  num_heads: 4\n  num_kv_heads: 3\n")),
            "demo.yaml:6: model.num_kv_heads: 3 does not divide num_heads 4, expected a divisor (each KV head serves "
            "num_heads / num_kv_heads query heads)");
  EXPECT_EQ(error_of(minimal_with("  num_heads: 4\n", "  num_heads: 4\n  num_kv_heads: 0\n")),
            "demo.yaml:6: model.num_kv_heads: expected a positive integer (1: multi-query attention), got '0'");
  EXPECT_EQ(error_of(minimal_with("  num_heads: 4\n", "  num_heads: 4\n  rope_theta: 0\n")),
            "demo.yaml:6: model.rope_theta: expected a positive number, got '0'");
  EXPECT_EQ(error_of(minimal_with("  num_heads: 4\n", "  num_heads: 4\n  norm_eps: 1\n")),
            "demo.yaml:6: model.norm_eps: expected a number in (0, 1), got '1'");
  const std::string moe = "  seq_length: 32\n  moe:\n    num_experts: 4\n";
  EXPECT_EQ(error_of(minimal_with("  seq_length: 32\n", moe + "    first_dense_layers: 2\n")),
            "demo.yaml:10: model.moe.first_dense_layers: expected an integer in [0, num_layers = 2) (at least one "
            "layer must stay MoE), got '2'");
  EXPECT_EQ(error_of(minimal_with("  seq_length: 32\n", moe + "    first_dense_layers: 1\n    layer_freq: 4\n")),
            "demo.yaml:10: model.moe.first_dense_layers: expected a value leaving at least one MoE layer after the "
            "first_dense_layers = 1 of 2 layers, got '1'");
  EXPECT_EQ(error_of(minimal_with("  seq_length: 32\n", moe + "    expert_ffn_hidden_size: 0\n")),
            "demo.yaml:10: model.moe.expert_ffn_hidden_size: expected a positive integer, got '0'");
  EXPECT_EQ(error_of(minimal_with("  seq_length: 32\n", moe + "    shared_experts: -1\n")),
            "demo.yaml:10: model.moe.shared_experts: expected a non-negative integer, got '-1'");
  EXPECT_EQ(error_of(minimal_with("  seq_length: 32\n", moe + "    shared_expert_ffn_hidden_size: 64\n")),
            "demo.yaml:10: model.moe.shared_expert_ffn_hidden_size: expected only together with "
            "model.moe.shared_experts > 0, got '64'");
  EXPECT_EQ(error_of(minimal_with("  seq_length: 32\n", moe + "    score_function: tanh\n")),
            "demo.yaml:10: model.moe.score_function: expected one of softmax, sigmoid, got 'tanh'");
  EXPECT_EQ(error_of(minimal_with("  seq_length: 32\n", "  seq_length: 32\n  moe: {shared_experts: 1}\n")),
            "demo.yaml:8: model.moe.shared_experts: only applies to MoE models, expected model.moe.num_experts > 0 "
            "with it");
}

TEST(ConfigLoader, FullConfigRoundTripsThroughYaml) {
  Config original = parse_config(kFull, "full.yaml");
  std::string yaml = config_to_yaml(original);
  Config again = parse_config(yaml, "echo.yaml");
  expect_same(original, again);
  EXPECT_EQ(config_to_yaml(again), yaml);
}

TEST(ConfigLoader, DefaultsRoundTrip) {
  // Defaults include capacity_factor null (dropless), empty lists and strings, recompute off.
  Config original = parse_config(kMinimal, "min.yaml");
  Config again = parse_config(config_to_yaml(original), "echo.yaml");
  expect_same(original, again);
  for (auto recompute : {RecomputeGranularity::kNone, RecomputeGranularity::kFull}) {
    original.parallel.recompute = recompute;
    EXPECT_EQ(parse_config(config_to_yaml(original), "echo.yaml").parallel.recompute, recompute);
  }
}

TEST(ConfigLoader, DefaultsComeFromConfigStructs) {
  Config c = parse_config(kMinimal, "min.yaml");
  const Config defaults;
  EXPECT_EQ(c.model.vocab_size, 512);
  EXPECT_EQ(c.model.head_dim(), 16);
  EXPECT_FALSE(c.model.is_moe());
  EXPECT_FALSE(c.model.moe.capacity_factor.has_value());
  EXPECT_EQ(c.model.moe.top_k, defaults.model.moe.top_k);
  EXPECT_EQ(c.parallel.world_size(), 1);
  EXPECT_EQ(c.parallel.rank_order, "tp-ep-dp-pp");
  EXPECT_EQ(c.parallel.pipeline_schedule, PipelineSchedule::k1F1B);
  EXPECT_EQ(c.parallel.recompute, RecomputeGranularity::kNone);
  EXPECT_EQ(c.parallel.gradient_aggregation_group, defaults.parallel.gradient_aggregation_group);
  EXPECT_EQ(c.train.lr, defaults.train.lr);
  EXPECT_EQ(c.train.min_lr, defaults.train.min_lr);
  EXPECT_EQ(c.train.seed, defaults.train.seed);
  EXPECT_EQ(c.train.loss_scale.initial, 65536.0);
  EXPECT_EQ(c.train.precision, Precision::kFP32);
  EXPECT_EQ(c.train.backend, ComputeBackend::kCpu);
  EXPECT_EQ(c.checkpoint.keep, 2);
  EXPECT_EQ(c.checkpoint.timeout, 600.0);
  EXPECT_EQ(c.checkpoint.dir, "");
  EXPECT_EQ(c.checkpoint.format, CheckpointFormat::kFull);
  EXPECT_FALSE(c.checkpoint.async);
}

TEST(ConfigLoader, MindFormersAliases) {
  const std::string base = std::string(kMinimal) + "parallel_config:\n";
  Config c = parse_config(base + "  model_parallel: 4\n  pipeline_stage: 2\n  enable_parallel_optimizer: true\n",
                          "alias.yaml");
  EXPECT_EQ(c.parallel.tensor_parallel, 4);
  EXPECT_EQ(c.parallel.pipeline_parallel, 2);
  EXPECT_EQ(c.parallel.zero_stage, 1);
  c = parse_config(base + "  enable_parallel_optimizer: false\n", "alias.yaml");
  EXPECT_EQ(c.parallel.zero_stage, 0);
  c = parse_config(base + "  recompute: true\n", "alias.yaml");
  EXPECT_EQ(c.parallel.recompute, RecomputeGranularity::kFull);
  c = parse_config(base + "  recompute:\n    granularity: full\n", "alias.yaml");
  EXPECT_EQ(c.parallel.recompute, RecomputeGranularity::kFull);
  EXPECT_FALSE(c.parallel.sequence_parallel);
  c = parse_config(base + "  use_seq_parallel: true\n", "alias.yaml");
  EXPECT_TRUE(c.parallel.sequence_parallel);
  c = parse_config(base + "  sequence_parallel: true\n", "alias.yaml");
  EXPECT_TRUE(c.parallel.sequence_parallel);
}

TEST(ConfigLoader, LoadsFileAndNamesItInErrors) {
  const std::string path = fmt::format("{}/moe4d_config_test_{}.yaml", std::filesystem::temp_directory_path().string(), getpid());
  std::ofstream(path) << minimal_with("  num_heads: 4\n", "  num_heads: 6\n");
  try {
    load_config(path);
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), path + ":5: model.num_heads: 6 does not divide hidden_size 64");
  }
  std::ofstream(path) << kMinimal;
  EXPECT_EQ(load_config(path).source, path);
  std::remove(path.c_str());
}

TEST(ConfigErrors, MissingFile) {
  try {
    load_config("no/such/x.yaml");
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "cannot read config 'no/such/x.yaml': No such file or directory");
  }
}

TEST(ConfigErrors, YamlSyntaxErrorKeepsLineAndColumn) {
  EXPECT_EQ(error_of(minimal_with("  steps: 10\n", "  steps: [10\n")),
            "demo.yaml:11:5: invalid YAML: end of sequence flow not found");
  EXPECT_EQ(error_of("model:\n  a: b: c\n"), "demo.yaml:2:7: invalid YAML: illegal map value");
}

TEST(ConfigErrors, UnknownKeyAtThreeLevels) {
  EXPECT_EQ(error_of(std::string(kMinimal) + "optimizer: adamw\n"),
            "demo.yaml:13: optimizer: unknown key (expected one of: model, parallel_config, train, data, checkpoint)");
  EXPECT_EQ(error_of(minimal_with("  seq_length: 32\n", "  seq_length: 32\n  num_kv_head: 2\n")),
            "demo.yaml:8: model.num_kv_head: unknown key (expected one of: vocab_size, hidden_size, num_layers, "
            "num_heads, ffn_hidden_size, seq_length, tie_embeddings, num_kv_heads, rope_theta, q_lora_rank, "
            "kv_lora_rank, qk_nope_head_dim, qk_rope_head_dim, v_head_dim, rope_scaling, norm_eps, head_dim, "
            "qk_layernorm, moe)");
  EXPECT_EQ(error_of(minimal_with("  seq_length: 32\n", "  seq_length: 32\n  moe:\n    num_experts: 4\n"
                                                       "    topk: 2\n")),
            "demo.yaml:10: model.moe.topk: unknown key (expected one of: num_experts, top_k, layer_freq, "
            "capacity_factor, aux_loss_coeff, z_loss_coeff, router_bias_update_rate, a2a_chunks, "
            "dispatcher, first_dense_layers, dense_layers, expert_ffn_hidden_size, shared_experts, "
            "shared_expert_ffn_hidden_size, score_function, normalize_top_k, num_groups, group_topk, "
            "routed_scaling_factor, load_balancing_type, redundant_experts, rebalance_interval)");
}

TEST(ConfigErrors, RepeatedKey) {
  EXPECT_EQ(error_of(minimal_with("  steps: 10\n", "  steps: 10\n  steps: 20\n")),
            "demo.yaml:11: train.steps: repeated key (first given on line 10), expected each key once");
}

TEST(ConfigErrors, WrongTypes) {
  EXPECT_EQ(error_of(minimal_with("  hidden_size: 64\n", "  hidden_size: sixty-four\n")),
            "demo.yaml:3: model.hidden_size: expected a 32-bit integer, got 'sixty-four'");
  EXPECT_EQ(error_of(minimal_with("  hidden_size: 64\n", "  hidden_size: 64.5\n")),
            "demo.yaml:3: model.hidden_size: expected a 32-bit integer, got '64.5'");
  EXPECT_EQ(error_of(minimal_with("train:\n", "train:\n  lr: fast\n")),
            "demo.yaml:9: train.lr: expected a finite number, got 'fast'");
  EXPECT_EQ(error_of("model:\n  - vocab_size\n  - 512\n"), "demo.yaml:1: model: expected a map, got a list");
  EXPECT_EQ(error_of(minimal_with("  steps: 10\n", "  steps: 10\n  loss_scale: [1, 2]\n")),
            "demo.yaml:11: train.loss_scale: expected a map, got a list");
  EXPECT_EQ(error_of(minimal_with("  seq_length: 32\n", "  seq_length: {a: 1}\n")),
            "demo.yaml:7: model.seq_length: expected a 32-bit integer, got a map");
  EXPECT_EQ(error_of(minimal_with("  seq_length: 32\n", "  seq_length: 32\n  tie_embeddings: yes please\n")),
            "demo.yaml:8: model.tie_embeddings: expected true or false, got 'yes please'");
  EXPECT_EQ(error_of(std::string(kMinimal) + "parallel_config: {device_list: [0, one]}\n"),
            "demo.yaml:13: parallel_config.device_list[1]: expected an integer, got 'one'");
  EXPECT_EQ(error_of(std::string(kMinimal) + "parallel_config: {recompute: sometimes}\n"),
            "demo.yaml:13: parallel_config.recompute: expected true, false or {granularity: full|selective}, got "
            "'sometimes'");
  EXPECT_EQ(error_of("- 1\n- 2\n"),
            "demo.yaml:1: expected a map of sections (model, parallel_config, train, data, checkpoint), got a list");
}

TEST(ConfigErrors, MissingRequiredKey) {
  EXPECT_EQ(error_of(minimal_with("  hidden_size: 64\n", "")), "demo.yaml: missing required key model.hidden_size");
  EXPECT_EQ(error_of(minimal_with("data:\n  train: data/train.bin\n", "")),
            "demo.yaml: missing required key data.train");
  EXPECT_EQ(error_of(""), "demo.yaml: missing required key model.vocab_size");
}

TEST(ConfigErrors, ZeroAndNegativeSizes) {
  EXPECT_EQ(error_of(minimal_with("  hidden_size: 64\n", "  hidden_size: -3\n")),
            "demo.yaml:3: model.hidden_size: expected a positive integer, got '-3'");
  EXPECT_EQ(error_of(minimal_with("  num_layers: 2\n", "  num_layers: 0\n")),
            "demo.yaml:4: model.num_layers: expected a positive integer, got '0'");
  EXPECT_EQ(error_of(minimal_with("  global_batch_size: 8\n", "  global_batch_size: 0\n")),
            "demo.yaml:9: train.global_batch_size: expected a positive integer, got '0'");
  EXPECT_EQ(error_of(std::string(kMinimal) + "parallel_config: {model_parallel: 0}\n"),
            "demo.yaml:13: parallel_config.model_parallel: expected a positive integer, got '0'");
  EXPECT_EQ(error_of(std::string(kMinimal) + "checkpoint: {keep: 0}\n"),
            "demo.yaml:13: checkpoint.keep: expected a positive integer, got '0'");
  EXPECT_EQ(error_of(std::string(kMinimal) + "checkpoint: {timeout: 0}\n"),
            "demo.yaml:13: checkpoint.timeout: expected a positive number of seconds, got '0'");
  EXPECT_EQ(error_of(std::string(kMinimal) + "checkpoint: {format: torch_dist}\n").rfind(
                "demo.yaml:13: checkpoint.format: expected one of full, sharded", 0),
            0u);
  EXPECT_EQ(error_of(std::string(kMinimal) + "checkpoint: {async: true}\n"),
            "demo.yaml:13: checkpoint.async: expected false unless checkpoint.format is sharded (an asynchronous "
            "save writes per-rank shards), got 'true'");
  EXPECT_EQ(error_of(std::string(kMinimal) + "parallel_config: {zero_stage: 4}\n"),
            "demo.yaml:13: parallel_config.zero_stage: expected one of 0, 1, 2, 3, got '4'");
}

TEST(ConfigErrors, HeadsMustDivideHiddenWithEvenHeadDim) {
  EXPECT_EQ(error_of(minimal_with("  num_heads: 4\n", "  num_heads: 6\n")),
            "demo.yaml:5: model.num_heads: 6 does not divide hidden_size 64");
  EXPECT_EQ(error_of(minimal_with("  num_heads: 4\n", "  num_heads: 64\n")),
            "demo.yaml:5: model.num_heads: head dimension hidden_size / num_heads = 64 / 64 = 1 is odd, expected an "
            "even head dimension (RoPE rotates pairs)");
}

TEST(ConfigErrors, MoeRouting) {
  const std::string moe = "  seq_length: 32\n  moe:\n    num_experts: 4\n";
  EXPECT_EQ(error_of(minimal_with("  seq_length: 32\n", moe + "    top_k: 5\n")),
            "demo.yaml:10: model.moe.top_k: expected an integer in [1, num_experts = 4], got '5'");
  EXPECT_EQ(error_of(minimal_with("  seq_length: 32\n", moe + "    capacity_factor: 0\n")),
            "demo.yaml:10: model.moe.capacity_factor: expected null (dropless) or a positive number, got '0'");
  EXPECT_EQ(error_of(minimal_with("  seq_length: 32\n", moe + "    aux_loss_coeff: -0.1\n")),
            "demo.yaml:10: model.moe.aux_loss_coeff: expected a non-negative number, got '-0.1'");
  // A dense model ignores routing keys, so their ranges are only checked when experts exist.
  EXPECT_EQ(error_of(minimal_with("  seq_length: 32\n", "  seq_length: 32\n  moe: {top_k: 5}\n")), "");
}

TEST(ConfigErrors, LearningRates) {
  EXPECT_EQ(error_of(minimal_with("  steps: 10\n", "  steps: 10\n  lr: 1e-3\n  min_lr: 1e-2\n")),
            "demo.yaml:12: train.min_lr: min_lr 0.01 exceeds lr 0.001, expected 0 <= min_lr <= lr");
  // Only lr was written: the message points at it (min_lr's default is 3e-5).
  EXPECT_EQ(error_of(minimal_with("  steps: 10\n", "  steps: 10\n  lr: 1e-5\n")),
            "demo.yaml:11: train.lr: min_lr 3e-05 exceeds lr 1e-05, expected 0 <= min_lr <= lr");
  EXPECT_EQ(error_of(minimal_with("  steps: 10\n", "  steps: 10\n  lr: 0\n")),
            "demo.yaml:11: train.lr: expected a positive number, got '0'");
  EXPECT_EQ(error_of(minimal_with("  steps: 10\n", "  steps: 10\n  beta2: 1\n")),
            "demo.yaml:11: train.beta2: expected a number in [0, 1), got '1'");
}

TEST(ConfigErrors, KeyAndAliasTogether) {
  EXPECT_EQ(error_of(std::string(kMinimal) + "parallel_config:\n  tensor_parallel: 2\n  model_parallel: 2\n"),
            "demo.yaml:15: parallel_config.model_parallel: given together with tensor_parallel (line 14), expected "
            "only one of tensor_parallel, model_parallel");
  EXPECT_EQ(error_of(std::string(kMinimal) + "parallel_config:\n  sequence_parallel: true\n  use_seq_parallel: true\n"),
            "demo.yaml:15: parallel_config.use_seq_parallel: given together with sequence_parallel (line 14), expected "
            "only one of sequence_parallel, use_seq_parallel");
  EXPECT_EQ(error_of(std::string(kMinimal) + "parallel_config: {sequence_parallel: 2}\n"),
            "demo.yaml:13: parallel_config.sequence_parallel: expected true or false, got '2'");
  EXPECT_EQ(error_of(std::string(kMinimal) + "parallel_config:\n  pipeline_stage: 2\n  pipeline_parallel: 2\n"),
            "demo.yaml:14: parallel_config.pipeline_stage: given together with pipeline_parallel (line 15), expected "
            "only one of pipeline_parallel, pipeline_stage");
  EXPECT_EQ(error_of(std::string(kMinimal) + "parallel_config: {zero_stage: 1, enable_parallel_optimizer: true}\n"),
            "demo.yaml:13: parallel_config.enable_parallel_optimizer: given together with zero_stage (line 13), "
            "expected only one of zero_stage, enable_parallel_optimizer");
}

TEST(ConfigLoader, GradientBucketsBySizeOrCount) {
  const std::string base = std::string(kMinimal) + "parallel_config:\n";
  EXPECT_EQ(parse_config(base + "  grad_bucket_size: 1000000\n", "demo.yaml").parallel.grad_bucket_size, 1000000);
  EXPECT_EQ(parse_config(base + "  grad_bucket_size: 64MiB\n", "demo.yaml").parallel.grad_bucket_size, 16 << 20);
  EXPECT_EQ(parse_config(base + "  grad_bucket_size: 160MB\n", "demo.yaml").parallel.grad_bucket_size, 40000000);
  const Config counted = parse_config(base + "  gradient_aggregation_group: 8\n", "demo.yaml");
  EXPECT_EQ(counted.parallel.gradient_aggregation_group, 8);
  EXPECT_EQ(counted.parallel.grad_bucket_size, 0);
  // Both round-trip (only the chosen key is written).
  for (const char* line : {"  grad_bucket_size: 64MiB\n", "  gradient_aggregation_group: 8\n"}) {
    const Config c = parse_config(base + line + "  zero3_prefetch_buckets: 3\n", "demo.yaml");
    expect_same(parse_config(config_to_yaml(c), "again.yaml"), c);
  }
  EXPECT_EQ(error_of(base + "  gradient_aggregation_group: 4\n  grad_bucket_size: 1000\n"),
            "demo.yaml:15: parallel_config.grad_bucket_size: given together with gradient_aggregation_group (line 14), "
            "expected only one of grad_bucket_size (bucket size), gradient_aggregation_group (bucket count)");
  for (const char* bad : {"0", "-5", "12 parsecs", "3MiBs", "MiB", "[1, 2]"})
    EXPECT_NE(error_of(base + "  grad_bucket_size: " + bad + "\n").find("parallel_config.grad_bucket_size: expected a "
                                                                     "positive element count or bytes with a unit"),
              std::string::npos)
        << bad << ": " << error_of(base + "  grad_bucket_size: " + bad + "\n");
  // 0 is no prefetch (each ZeRO-3 read gathers its own buckets); below that is refused.
  EXPECT_EQ(error_of(base + "  zero3_prefetch_buckets: 0\n"), "");
  EXPECT_NE(error_of(base + "  zero3_prefetch_buckets: -1\n").find("parallel_config.zero3_prefetch_buckets"),
            std::string::npos);
}

TEST(ConfigErrors, BadEnumValues) {
  EXPECT_EQ(error_of(minimal_with("  steps: 10\n", "  steps: 10\n  precision: fp8\n")),
            "demo.yaml:11: train.precision: expected one of fp32, bf16, fp16, got 'fp8'");
  EXPECT_EQ(error_of(minimal_with("  steps: 10\n", "  steps: 10\n  optimizer: sgd\n")),
            "demo.yaml:11: train.optimizer: expected one of adamw, onebit_adam, got 'sgd'");
  EXPECT_EQ(error_of(minimal_with("  steps: 10\n", "  steps: 10\n  backend: cuda\n")),
            "demo.yaml:11: train.backend: expected one of cpu, reference, got 'cuda'");
  EXPECT_EQ(error_of(std::string(kMinimal) + "parallel_config: {pipeline_schedule: zb}\n"),
            "demo.yaml:13: parallel_config.pipeline_schedule: expected one of gpipe, 1f1b, interleaved, got 'zb'");
  EXPECT_EQ(error_of(std::string(kMinimal) + "parallel_config: {recompute: {granularity: partial}}\n"),
            "demo.yaml:13: parallel_config.recompute.granularity: expected one of full, selective, got 'partial'");
  EXPECT_EQ(error_of(std::string(kMinimal) + "parallel_config: {rank_order: tp-dp-pp}\n"),
            "demo.yaml:13: parallel_config.rank_order: expected a permutation of tp, ep, dp, pp joined by '-' (e.g. "
            "tp-ep-dp-pp), got 'tp-dp-pp'");
  EXPECT_EQ(error_of(std::string(kMinimal) + "parallel_config: {device_list: [0, 1, 1]}\n"),
            "demo.yaml:13: parallel_config.device_list[2]: rank 1 is already listed at device_list[1], expected "
            "distinct ranks");
}

TEST(ConfigLoader, TraceStepsListOrRange) {
  Config c = parse_config(minimal_with("  steps: 10\n", "  steps: 10\n  trace_steps: \"3-5\"\n"), "t.yaml");
  EXPECT_EQ(c.train.trace_steps, (std::vector<int>{3, 4, 5}));
  c = parse_config(minimal_with("  steps: 10\n", "  steps: 10\n  trace_steps: [9, 2, 2]\n  tensorboard_dir: tb\n"),
                   "t.yaml");
  EXPECT_EQ(c.train.trace_steps, (std::vector<int>{2, 9}));
  EXPECT_EQ(c.train.tensorboard_dir, "tb");
  EXPECT_EQ(parse_config(config_to_yaml(c), "echo.yaml").train, c.train);
  EXPECT_EQ(parse_config(minimal_with("  steps: 10\n", "  steps: 10\n  trace_steps: 7\n"), "t.yaml").train.trace_steps,
            (std::vector<int>{7}));
  EXPECT_EQ(error_of(minimal_with("  steps: 10\n", "  steps: 10\n  trace_steps: \"5-3\"\n")),
            "demo.yaml:11: train.trace_steps: expected a list of steps or a range 'first-last' with first <= last, got "
            "'5-3'");
  EXPECT_EQ(error_of(minimal_with("  steps: 10\n", "  steps: 10\n  trace_steps: [4, 11]\n")),
            "demo.yaml:11: train.trace_steps: expected steps in [1, train.steps = 10], got 11");
}

}  // namespace
}  // namespace moe4d
