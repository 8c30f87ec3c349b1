// Export to the Hugging Face layout and import back: bit-identical tensors, save_pretrained-style
// sharding, config.json fields, the RoPE row permutation, and the refusals (capacity dropping,
// routing bias without an architecture for it, alternating dense layers, non-empty output).
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "../common/hf_tokenizer_fixture.h"
#include "checkpoint/checkpoint.h"
#include "config/config_loader.h"
#include "core/error.h"
#include "core/rng.h"
#include "data/tokenizer_identity.h"
#include "interop/hf_export.h"
#include "interop/hf_tensor_map.h"

namespace moe4d {
namespace {
namespace fs = std::filesystem;

Config mixtral_config() {
  Config c;
  c.model.vocab_size = 260;  // the byte tokenizer's 257 ids, padded
  c.model.hidden_size = 16;
  c.model.num_layers = 2;
  c.model.num_heads = 2;
  c.model.ffn_hidden_size = 24;
  c.model.seq_length = 8;
  c.model.moe.num_experts = 4;
  c.model.moe.top_k = 2;
  c.model.moe.layer_freq = 1;
  c.train.global_batch_size = 2;
  c.train.steps = 1;
  c.data.train = "unused.bin";
  c.data.tokenizer = "bytes";
  return c;
}

nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

class HfRoundTripTest : public testing::Test {
 protected:
  void SetUp() override {
    root_ = fmt::format("{}/moe4d_hf_test_{}", fs::temp_directory_path().string(), getpid());
    fs::remove_all(root_);
    fs::create_directories(root_);
  }
  void TearDown() override { fs::remove_all(root_); }

  // A step-7 checkpoint of `config` with distinct random values in every parameter.
  std::string write_checkpoint(const Config& config, double bias = 0.0) {
    const auto shapes = moe4d_parameter_shapes(config.model);
    std::vector<Buffer> buffers;
    NamedTensors named;
    uint64_t key = 1;
    for (const auto& [name, shape] : shapes) {
      Buffer b(sizeof(float) * shape.numel());
      for (int64_t i = 0; i < shape.numel(); ++i) b.f32()[i] = normal_at(key, i);
      ++key;
      named.emplace_back(name, Tensor::f32(b.f32(), shape));
      buffers.push_back(std::move(b));
    }
    nlohmann::json biases = nlohmann::json::object();
    for (int l = 0; l < config.model.num_layers; ++l)
      if (config.model.is_moe_layer(l)) biases[std::to_string(l)] = std::vector<double>(config.model.moe.num_experts, bias);
    CheckpointWriter writer(root_ + "/ckpt", 7);
    writer.add_safetensors("model.safetensors", named);
    writer.add_json("state.json", {{"step", 7}, {"config", config_to_yaml(config)}, {"router_bias", biases}});
    return writer.commit(1);
  }

  std::string root_;
};

TEST_F(HfRoundTripTest, ShardedExportThenImportIsBitIdentical) {
  const Config config = mixtral_config();
  const std::string ckpt = write_checkpoint(config);
  const HfExportResult ex = export_hf({.checkpoint = ckpt, .output_dir = root_ + "/hf", .max_shard_bytes = 6000});
  EXPECT_EQ(ex.arch, HfArchitecture::kMixtral);

  // Sharded as save_pretrained does: numbered shards and an index naming a shard for every tensor.
  const nlohmann::json index = read_json(root_ + "/hf/model.safetensors.index.json");
  const auto& weight_map = index["weight_map"];
  EXPECT_EQ(weight_map.size(), hf_tensor_rules(config.model, HfArchitecture::kMixtral).size());
  EXPECT_EQ(weight_map["model.layers.1.block_sparse_moe.experts.3.w2.weight"].get<std::string>().substr(0, 6), "model-");
  EXPECT_FALSE(fs::exists(root_ + "/hf/model.safetensors"));
  EXPECT_EQ(index["metadata"]["total_size"].get<uint64_t>(), ex.tensor_bytes);
  const SafetensorsFile shard = SafetensorsFile::open(root_ + "/hf/" + weight_map["lm_head.weight"].get<std::string>());
  EXPECT_EQ(shard.metadata().at("format"), "pt");
  EXPECT_EQ(shard.tensor("lm_head.weight").shape, (Shape{260, 16}));  // [vocab, hidden]: nn.Linear [out, in]

  const nlohmann::json hf_config = read_json(root_ + "/hf/config.json");
  EXPECT_EQ(hf_config["architectures"][0], "MixtralForCausalLM");
  EXPECT_EQ(hf_config["eos_token_id"], 256);  // the byte tokenizer's end of document, not HF's default 2
  EXPECT_EQ(hf_config["vocab_size"], 260);
  EXPECT_EQ(hf_config["tokenizer_vocab_size"], 257);
  EXPECT_EQ(hf_config["num_local_experts"], 4);
  EXPECT_EQ(hf_config["intermediate_size"], 24);
  EXPECT_EQ(read_json(root_ + "/hf/generation_config.json")["eos_token_id"], 256);

  const HfImportResult im =
      import_hf({.input_dir = root_ + "/hf", .output = root_ + "/imported", .train_data = "train.bin"});
  EXPECT_EQ(im.config.model, config.model);
  const Checkpoint original = Checkpoint::open(ckpt);
  const Checkpoint back = Checkpoint::open(im.checkpoint_path);
  EXPECT_EQ(back.step(), 0);
  const auto& a = original.tensors("model.safetensors").tensors();
  const auto& b = back.tensors("model.safetensors").tensors();
  ASSERT_EQ(a.size(), b.size());
  for (const auto& [name, t] : a) {
    ASSERT_TRUE(b.count(name)) << name;
    ASSERT_EQ(t.shape, b.at(name).shape) << name;
    EXPECT_EQ(std::memcmp(t.data, b.at(name).data, t.nbytes()), 0) << name << " differs after the round trip";
  }
  // The written config parses and points train.init_from at the imported weights.
  const Config written = load_config(im.config_path);
  EXPECT_EQ(written.train.init_from, fs::path(root_ + "/imported").lexically_normal().string());
  EXPECT_EQ(written.checkpoint.dir, fs::path(root_ + "/imported/train").lexically_normal().string());
}

TEST_F(HfRoundTripTest, TokenizerJsonTravelsThroughExportAndImport) {
  Config config = mixtral_config();
  config.model.vocab_size = 264;  // the fixture's 263 ids, padded
  const std::string tokenizer = root_ + "/tokenizer.json";
  test::write_json(tokenizer, test::tiny_hf_tokenizer());
  config.data.tokenizer = tokenizer;
  export_hf({.checkpoint = write_checkpoint(config), .output_dir = root_ + "/hf"});
  EXPECT_TRUE(fs::exists(root_ + "/hf/tokenizer.json"));
  const nlohmann::json tokenizer_config = read_json(root_ + "/hf/tokenizer_config.json");
  EXPECT_EQ(tokenizer_config["tokenizer_class"], "PreTrainedTokenizerFast");
  EXPECT_EQ(tokenizer_config["eos_token"], "<|endoftext|>");
  EXPECT_EQ(read_json(root_ + "/hf/config.json")["eos_token_id"], 260);

  // Import brings it along: beside the config as data.tokenizer, and in the checkpoint.
  const HfImportResult im =
      import_hf({.input_dir = root_ + "/hf", .output = root_ + "/imported", .train_data = "train.bin"});
  EXPECT_EQ(im.config.data.tokenizer, root_ + "/imported/tokenizer.json");
  const TokenizerIdentity identity = tokenizer_identity_of(tokenizer);
  EXPECT_EQ(identity.kind, "huggingface");
  EXPECT_EQ(tokenizer_identity_of(im.config.data.tokenizer), identity);
  const Checkpoint back = Checkpoint::open(im.checkpoint_path);
  ASSERT_TRUE(back.has_file(kCheckpointTokenizerFile));
  EXPECT_EQ(tokenizer_identity_of(back.file_path(kCheckpointTokenizerFile)), identity);
  EXPECT_EQ(back.json("state.json")["tokenizer"]["sha256"], identity.sha256);

  // A tokenizer.json moe4d cannot read is refused in one line naming its model type.
  nlohmann::json wordpiece = test::tiny_hf_tokenizer();
  wordpiece["model"]["type"] = "WordPiece";
  test::write_json(root_ + "/hf/tokenizer.json", wordpiece);
  try {
    import_hf({.input_dir = root_ + "/hf", .output = root_ + "/imported2", .train_data = "train.bin"});
    ADD_FAILURE() << "expected a refusal";
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("model type WordPiece is not supported"), std::string::npos) << message;
    EXPECT_NE(message.find("--tokenizer"), std::string::npos) << message;
  }
}

TEST_F(HfRoundTripTest, QueryRowsArePermutedFromPairsToHalves) {
  // HF row i of head h (rotate_half layout) holds moe4d's column 2i (i < hd/2) or 2(i - hd/2) + 1.
  const Config config = mixtral_config();
  const int64_t hd = config.model.head_dim(), width = 3 * config.model.hidden_size;
  for (const HfTensorRule& rule : hf_tensor_rules(config.model, HfArchitecture::kMixtral)) {
    if (rule.hf_name != "model.layers.0.self_attn.q_proj.weight" &&
        rule.hf_name != "model.layers.0.self_attn.v_proj.weight")
      continue;
    const bool q = rule.hf_name.find("q_proj") != std::string::npos;
    const int part = q ? 0 : 2;
    for (int64_t h = 0; h < 2; ++h)
      for (int64_t i = 0; i < hd; ++i) {
        const int64_t j = q ? (i < hd / 2 ? 2 * i : 2 * (i - hd / 2) + 1) : i;
        EXPECT_EQ(rule.source(h * hd + i, 5), 5 * width + (h * 3 + part) * hd + j) << rule.hf_name;
      }
  }
}

// DeepseekV3Attention's tensors of an MLA model: nn.Linear's [out, in] of each moe4d [in, out] weight,
// the latent norms copied, every element of every attention parameter used once.
TEST_F(HfRoundTripTest, MlaAttentionTensorsAreDeepSeekV3s) {
  ModelConfig m = mixtral_config().model;
  m.num_kv_heads = 0;
  m.mla = {.q_lora_rank = 6, .kv_lora_rank = 8, .qk_nope_head_dim = 4, .qk_rope_head_dim = 2, .v_head_dim = 3};
  const std::map<std::string, Shape> shapes = moe4d_parameter_shapes(m);
  std::map<std::string, std::vector<int>> used;
  for (const auto& [name, shape] : shapes) used[name].assign(size_t(shape.numel()), 0);
  const int64_t d = m.hidden_size, h = m.num_heads;
  const std::map<std::string, std::vector<int64_t>> expected = {
      {"q_a_proj.weight", {6, d}},        {"q_a_layernorm.weight", {6}},     {"q_b_proj.weight", {h * 6, 6}},
      {"kv_a_proj_with_mqa.weight", {10, d}}, {"kv_a_layernorm.weight", {8}}, {"kv_b_proj.weight", {h * 7, 8}},
      {"o_proj.weight", {d, h * 3}}};
  int seen = 0;
  for (const HfTensorRule& rule : hf_tensor_rules(m, HfArchitecture::kDeepseekV3)) {
    const std::string prefix = "model.layers.1.self_attn.";
    if (rule.hf_name.rfind(prefix, 0) == 0) {
      ++seen;
      EXPECT_EQ(rule.hf_shape, expected.at(rule.hf_name.substr(prefix.size()))) << rule.hf_name;
    }
    if (rule.moe4d_name.empty()) continue;
    const int64_t rows = rule.hf_shape.size() == 2 ? rule.hf_shape[0] : 1, cols = rule.hf_shape.back();
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c) ++used.at(rule.moe4d_name).at(size_t(rule.source(r, c)));
  }
  EXPECT_EQ(seen, 7);
  for (const auto& [name, counts] : used) {
    if (name.find(".attn") != std::string::npos) {
      EXPECT_TRUE(std::all_of(counts.begin(), counts.end(), [](int n) { return n == 1; })) << name;
    }
  }
  // kv_b_proj row j of head 1 is moe4d's column 1 x (nope + v) + j: the transpose, heads in order.
  for (const HfTensorRule& rule : hf_tensor_rules(m, HfArchitecture::kDeepseekV3)) {
    if (rule.hf_name == "model.layers.0.self_attn.kv_b_proj.weight") {
      EXPECT_EQ(rule.source(7 + 2, 3), 3 * h * 7 + 9);
    }
  }
}

TEST_F(HfRoundTripTest, RefusesWhatNoArchitectureExpresses) {
  Config capacity = mixtral_config();
  capacity.model.moe.capacity_factor = 1.25;
  const auto message = [&](const Config& c, double bias, const std::string& out) {
    try {
      export_hf({.checkpoint = write_checkpoint(c, bias), .output_dir = root_ + "/" + out});
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message(capacity, 0.0, "a").find("capacity dropping"), std::string::npos);
  EXPECT_NE(message(mixtral_config(), 0.01, "b").find("non-zero aux-loss-free router bias"), std::string::npos);
  Config alternating = mixtral_config();
  alternating.model.moe.layer_freq = 2;
  EXPECT_NE(message(alternating, 0.0, "c").find("layer_freq 2"), std::string::npos);
  Config grouped_softmax = mixtral_config();  // Mixtral has no groups; GLM-4-MoE's need sigmoid scores
  grouped_softmax.model.moe.num_groups = 2;
  grouped_softmax.model.moe.group_topk = 1;
  EXPECT_NE(message(grouped_softmax, 0.0, "d").find("group-limited routing"), std::string::npos);
  Config mla = mixtral_config();
  mla.model.num_kv_heads = 0;
  mla.model.mla = {.q_lora_rank = 8, .kv_lora_rank = 8, .qk_nope_head_dim = 4, .qk_rope_head_dim = 4, .v_head_dim = 4};
  EXPECT_NE(message(mla, 0.0, "d").find("multi-head latent attention with softmax router scores"), std::string::npos);
  Config yarn = mixtral_config();  // YaRN travels only with MLA (DeepSeek-V3)
  yarn.model.rope_scaling = {.factor = 4, .original_max_position_embeddings = 4};
  EXPECT_NE(message(yarn, 0.0, "d").find("YaRN RoPE scaling is exported only with multi-head latent"),
            std::string::npos);
  EXPECT_FALSE(fs::exists(root_ + "/a") || fs::exists(root_ + "/b") || fs::exists(root_ + "/c") ||
               fs::exists(root_ + "/d"));

  // An existing, non-empty output directory is never overwritten.
  fs::create_directories(root_ + "/taken");
  std::ofstream(root_ + "/taken/keep.txt") << "mine";
  EXPECT_NE(message(mixtral_config(), 0.0, "taken").find("already exists and is not empty"), std::string::npos);
  EXPECT_TRUE(fs::exists(root_ + "/taken/keep.txt"));
}

// DeepSeek-V3-style routing (sigmoid, groups, scaling factor) travels as GLM-4-MoE's n_group,
// topk_group and routed_scaling_factor, and comes back as the same model.
TEST_F(HfRoundTripTest, GroupLimitedRoutingTravelsAsGlm4Moe) {
  Config config = mixtral_config();
  MoeConfig& moe = config.model.moe;
  moe.num_experts = 8;
  moe.top_k = 3;
  moe.score_function = RouterScore::kSigmoid;
  moe.num_groups = 4;
  moe.group_topk = 2;
  moe.routed_scaling_factor = 2.5;
  export_hf({.checkpoint = write_checkpoint(config, 0.01), .output_dir = root_ + "/hf"});
  nlohmann::json c = read_json(root_ + "/hf/config.json");
  EXPECT_EQ(c["architectures"][0], "Glm4MoeForCausalLM");
  EXPECT_EQ(c["n_group"], 4);
  EXPECT_EQ(c["topk_group"], 2);
  EXPECT_EQ(c["routed_scaling_factor"], 2.5);
  const HfImportResult im =
      import_hf({.input_dir = root_ + "/hf", .output = root_ + "/imported", .train_data = "train.bin"});
  EXPECT_EQ(im.config.model, config.model);
  // A config.json moe4d's routing cannot follow is refused, naming the key.
  c["topk_group"] = 1;  // 1 group of 2 experts cannot hold 3 picks
  std::ofstream(root_ + "/hf/config.json") << c.dump();
  try {
    import_hf({.input_dir = root_ + "/hf", .output = root_ + "/imported2", .train_data = "train.bin"});
    FAIL() << "topk_group 1 with top-3 of groups of 2 was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("\"topk_group\""), std::string::npos) << e.what();
  }
}

// Multi-head latent attention with DeepSeek routing (a dense first layer, a shared expert, sigmoid
// scores with a non-zero bias, groups, a scaling factor) and YaRN: DeepseekV3ForCausalLM, back bit for bit.
TEST_F(HfRoundTripTest, MlaWithDeepSeekRoutingTravelsAsDeepseekV3) {
  Config config = mixtral_config();
  ModelConfig& m = config.model;
  m.num_layers = 3;
  m.mla = {.q_lora_rank = 6, .kv_lora_rank = 8, .qk_nope_head_dim = 4, .qk_rope_head_dim = 2, .v_head_dim = 3};
  m.seq_length = 16;  // YaRN: max_position_embeddings is factor x original_max_position_embeddings
  m.rope_scaling = {.factor = 4, .original_max_position_embeddings = 4, .beta_fast = 16, .mscale = 0.5,
                    .mscale_all_dim = 0.7};
  m.moe = {.num_experts = 8, .top_k = 3, .layer_freq = 1, .capacity_factor = std::nullopt};
  m.moe.expert_ffn_hidden_size = 12;
  m.moe.shared_experts = 1;
  m.moe.first_dense_layers = 1;
  m.moe.score_function = RouterScore::kSigmoid;
  m.moe.num_groups = 4;
  m.moe.group_topk = 2;
  m.moe.routed_scaling_factor = 2.5;
  const std::string ckpt = write_checkpoint(config, 0.01);
  const HfExportResult ex = export_hf({.checkpoint = ckpt, .output_dir = root_ + "/hf", .max_shard_bytes = 6000});
  EXPECT_EQ(ex.arch, HfArchitecture::kDeepseekV3);
  nlohmann::json c = read_json(root_ + "/hf/config.json");
  EXPECT_EQ(c["architectures"][0], "DeepseekV3ForCausalLM");
  EXPECT_EQ(c["model_type"], "deepseek_v3");
  EXPECT_EQ(c["q_lora_rank"], 6);
  EXPECT_EQ(c["kv_lora_rank"], 8);
  EXPECT_EQ(c["head_dim"], 2);  // DeepseekV3Config: qk_rope_head_dim
  EXPECT_EQ(c["rope_interleave"], true);
  EXPECT_EQ(c["n_group"], 4);
  EXPECT_EQ(c["first_k_dense_replace"], 1);
  EXPECT_EQ(c["n_shared_experts"], 1);
  EXPECT_EQ(c["moe_intermediate_size"], 12);
  EXPECT_EQ(c["num_nextn_predict_layers"], 0);
  EXPECT_EQ(c["rope_scaling"]["rope_type"], "yarn");
  EXPECT_EQ(c["rope_scaling"]["beta_fast"], 16.0);
  EXPECT_FALSE(c["rope_scaling"].contains("beta_slow"));  // moe4d's 0: HF's default
  const nlohmann::json index = read_json(root_ + "/hf/model.safetensors.index.json");
  EXPECT_EQ(index["weight_map"].size(), hf_tensor_rules(m, HfArchitecture::kDeepseekV3).size());
  for (const char* name :
       {"model.layers.1.mlp.gate.e_score_correction_bias", "model.layers.2.self_attn.q_a_proj.weight",
        "model.layers.1.mlp.shared_experts.down_proj.weight", "model.layers.0.mlp.gate_proj.weight"})
    EXPECT_TRUE(index["weight_map"].contains(name)) << name;

  const HfImportResult im =
      import_hf({.input_dir = root_ + "/hf", .output = root_ + "/imported", .train_data = "train.bin"});
  EXPECT_EQ(im.config.model, m);
  const auto& a = Checkpoint::open(ckpt).tensors("model.safetensors").tensors();
  const Checkpoint back = Checkpoint::open(im.checkpoint_path);
  const auto& b = back.tensors("model.safetensors").tensors();
  ASSERT_EQ(a.size(), b.size());
  for (const auto& [name, t] : a) {
    ASSERT_TRUE(b.count(name)) << name;
    EXPECT_EQ(std::memcmp(t.data, b.at(name).data, t.nbytes()), 0) << name << " differs after the round trip";
  }
  EXPECT_NEAR(back.json("state.json")["router_bias"]["1"][0].get<double>(), 0.01, 1e-6);

  // Absent keys take DeepseekV3Config's defaults; MTP layers are refused naming the key.
  nlohmann::json sparse = c;
  for (const char* key : {"n_group", "topk_group", "routed_scaling_factor", "rope_interleave", "eos_token_id"})
    sparse.erase(key);
  sparse["n_routed_experts"] = 64;
  const HfImportedModel defaults = hf_model_from_config_json(sparse, "config.json");
  EXPECT_EQ(defaults.model.moe.num_groups, 8);
  EXPECT_EQ(defaults.model.moe.group_topk, 4);
  EXPECT_EQ(defaults.model.moe.routed_scaling_factor, 2.5);
  EXPECT_EQ(defaults.eos_token_id, 1);
  nlohmann::json no_q_lora = c;
  no_q_lora["q_lora_rank"] = nullptr;
  EXPECT_EQ(hf_model_from_config_json(no_q_lora, "config.json").model.mla.q_lora_rank, 0);
  // HF's rotary takes the YaRN factor from max_position_embeddings / original (here 8), its softmax
  // scale from "factor" (4): one factor for both or a refusal; on export the product must be whole.
  nlohmann::json two_factors = c;
  two_factors["max_position_embeddings"] = 32;
  try {
    hf_model_from_config_json(two_factors, "config.json");
    FAIL() << "a YaRN factor other than max_position_embeddings / original was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("\"rope_scaling\""), std::string::npos) << e.what();
  }
  ModelConfig fractional = m;
  fractional.rope_scaling.factor = 2.5;
  fractional.rope_scaling.original_max_position_embeddings = 3;
  try {
    choose_hf_architecture(fractional, false);
    FAIL() << "YaRN factor 2.5 x 3 positions was exported";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("is not an integer"), std::string::npos) << e.what();
  }
  nlohmann::json mtp = c;
  mtp["num_nextn_predict_layers"] = 1;
  try {
    hf_model_from_config_json(mtp, "config.json");
    FAIL() << "num_nextn_predict_layers 1 was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("\"num_nextn_predict_layers\" is 1"), std::string::npos) << e.what();
  }
}

TEST_F(HfRoundTripTest, ImportRefusesUnsupportedConfig) {
  const std::string ckpt = write_checkpoint(mixtral_config());
  export_hf({.checkpoint = ckpt, .output_dir = root_ + "/hf"});
  nlohmann::json c = read_json(root_ + "/hf/config.json");
  c["rope_scaling"] = {{"rope_type", "linear"}, {"factor", 2.0}};
  std::ofstream(root_ + "/hf/config.json") << c.dump();
  try {
    import_hf({.input_dir = root_ + "/hf", .output = root_ + "/imported", .train_data = "train.bin"});
    FAIL() << "rope_scaling was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("\"rope_scaling\""), std::string::npos) << e.what();
  }
  EXPECT_FALSE(fs::exists(root_ + "/imported/latest"));
}

// A published-style Qwen3-MoE config.json with most keys absent: transformers' Qwen3MoeConfig
// defaults fill them (hidden 2048, 24 layers, 32 heads, 4 KV heads, 128 experts top-8 of 768,
// norm_topk_prob false, eps 1e-6), mlp_only_layers and decoder_sparse_step map to dense_layers and
// layer_freq; quantized weights and sliding windows are refused with one line.
TEST(HfQwen3Config, AbsentKeysTakeQwen3MoeConfigDefaults) {
  nlohmann::json c = {{"architectures", {"Qwen3MoeForCausalLM"}}, {"head_dim", 128},
                      {"mlp_only_layers", {0, 5}}, {"decoder_sparse_step", 1}, {"rope_theta", 1e6}};
  const HfImportedModel imported = hf_model_from_config_json(c, "config.json");
  const ModelConfig& m = imported.model;
  EXPECT_EQ(imported.arch, HfArchitecture::kQwen3Moe);
  EXPECT_EQ(m.vocab_size, 151936);
  EXPECT_EQ(m.hidden_size, 2048);
  EXPECT_EQ(m.num_layers, 24);
  EXPECT_EQ(m.num_heads, 32);
  EXPECT_EQ(m.kv_heads(), 4);
  EXPECT_EQ(m.head_dim(), 128);
  EXPECT_EQ(m.attn_width(), 4096);
  EXPECT_TRUE(m.qk_norm);
  EXPECT_EQ(m.moe.num_experts, 128);
  EXPECT_EQ(m.moe.top_k, 8);
  EXPECT_EQ(m.expert_ffn(), 768);
  EXPECT_EQ(m.ffn_hidden_size, 6144);
  EXPECT_FALSE(m.moe.normalize_top_k);
  EXPECT_EQ(m.norm_eps, 1e-6);
  EXPECT_EQ(m.rope_theta, 1e6);
  EXPECT_EQ(m.moe.dense_layers, (std::vector<int>{0, 5}));
  EXPECT_FALSE(m.is_moe_layer(5));
  EXPECT_TRUE(m.is_moe_layer(6));
  // Back out: the same architecture, mlp_only_layers and the q/k norm tensors (rows permuted like q/k).
  EXPECT_EQ(choose_hf_architecture(m, false), HfArchitecture::kQwen3Moe);
  const nlohmann::json out = hf_config_json(m, HfArchitecture::kQwen3Moe, {});
  EXPECT_EQ(out["model_type"], "qwen3_moe");
  EXPECT_EQ(out["mlp_only_layers"], nlohmann::json({0, 5}));
  EXPECT_EQ(out["head_dim"], 128);
  ModelConfig small = m;
  small.num_layers = 2;
  small.moe.dense_layers = {0};
  small.vocab_size = 64;
  small.moe.num_experts = 4;
  small.moe.top_k = 2;
  bool q_norm = false;
  for (const HfTensorRule& rule : hf_tensor_rules(small, HfArchitecture::kQwen3Moe)) {
    EXPECT_EQ(rule.hf_name.find("e_score_correction_bias"), std::string::npos);
    EXPECT_EQ(rule.hf_name.find("shared_experts"), std::string::npos);
    if (rule.hf_name == "model.layers.1.self_attn.q_norm.weight") {
      q_norm = true;
      EXPECT_EQ(rule.source(0, 1), 2);    // HF element 1 is moe4d's pair element 2
      EXPECT_EQ(rule.source(0, 64), 1);   // the second half holds the odd elements
    }
  }
  EXPECT_TRUE(q_norm);

  const auto error = [](nlohmann::json config) {
    try {
      hf_model_from_config_json(config, "config.json");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  nlohmann::json fp8 = c;
  fp8["quantization_config"] = {{"quant_method", "fp8"}, {"weight_block_size", {128, 128}}};
  EXPECT_NE(error(fp8).find("dequantize"), std::string::npos) << error(fp8);
  nlohmann::json window = c;
  window["use_sliding_window"] = true;
  EXPECT_EQ(error(window), "config.json: \"use_sliding_window\" is true, moe4d computes only false (full causal attention)");
  nlohmann::json yarn = c;
  yarn["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}};
  EXPECT_NE(error(yarn).find("\"rope_scaling\""), std::string::npos);
  // Qwen3 dense: Qwen3Config's head_dim 128 when absent.
  const HfImportedModel dense =
      hf_model_from_config_json({{"architectures", {"Qwen3ForCausalLM"}}, {"hidden_size", 1024}, {"num_hidden_layers", 28},
                                 {"num_attention_heads", 16}, {"num_key_value_heads", 8}, {"intermediate_size", 3072}},
                                "config.json");
  EXPECT_FALSE(dense.model.is_moe());
  EXPECT_EQ(dense.model.head_dim(), 128);
  EXPECT_EQ(dense.model.attn_width(), 2048);
  EXPECT_EQ(choose_hf_architecture(dense.model, false), HfArchitecture::kQwen3);
  // Shared experts or sigmoid scores with q/k norm: no architecture.
  ModelConfig shared = m;
  shared.moe.shared_experts = 1;
  EXPECT_THROW(choose_hf_architecture(shared, false), Error);
  ModelConfig no_qk = m;
  no_qk.qk_norm = false;
  EXPECT_THROW(choose_hf_architecture(no_qk, false), Error);  // dense_layers need Qwen3-MoE
}

}  // namespace
}  // namespace moe4d
