// interop/hf_architecture.cc — architecture choice and config.json for Mixtral, GLM-4-MoE, Qwen3-MoE,
// Qwen3 and DeepSeek-V3.
//
// Key names follow transformers' MixtralConfig, Glm4MoeConfig, Qwen3MoeConfig, Qwen3Config and
// DeepseekV3Config (models/{mixtral,glm4_moe,qwen3_moe,qwen3,deepseek_v3}/configuration_*.py), i.e.
// what their save_pretrained writes and from_pretrained reads.
#include "interop/hf_architecture.h"

#include <cmath>

#include <fmt/format.h>

#include "core/error.h"

namespace moe4d {
namespace {

constexpr const char* kMixtral = "MixtralForCausalLM";
constexpr const char* kGlm4Moe = "Glm4MoeForCausalLM";
constexpr const char* kQwen3Moe = "Qwen3MoeForCausalLM";
constexpr const char* kQwen3 = "Qwen3ForCausalLM";
constexpr const char* kDeepseekV3 = "DeepseekV3ForCausalLM";

// The key `key` of `config` as T, or a one-line error naming the file and the key.
template <typename T>
T get(const nlohmann::json& config, const char* key, const std::string& origin) {
  if (!config.contains(key) || config[key].is_null()) fail("{}: missing \"{}\"", origin, key);
  try {
    return config[key].get<T>();
  } catch (const nlohmann::json::exception&) {
    fail("{}: \"{}\" is {}, expected a {}", origin, key, config[key].dump(),
         std::is_same_v<T, bool> ? "boolean" : "number");
  }
}

template <typename T>
T get_or(const nlohmann::json& config, const char* key, T fallback, const std::string& origin) {
  if (!config.contains(key) || config[key].is_null()) return fallback;
  return get<T>(config, key, origin);
}

// `fallback` >= 0: the value when the key is absent (a Qwen3 config class default); < 0: required.
int positive_int(const nlohmann::json& config, const char* key, const std::string& origin, int64_t fallback = -1) {
  const bool absent = !config.contains(key) || config[key].is_null();
  const int64_t v = absent && fallback >= 0 ? fallback : get<int64_t>(config, key, origin);
  if (v <= 0 || v > (int64_t{1} << 31) - 1) fail("{}: \"{}\" is {}, expected a positive 32-bit integer", origin, key, v);
  return static_cast<int>(v);
}

// The context YaRN scales to, factor x original_max_position_embeddings (choose_hf_architecture
// refuses a product that is not an integer).
int64_t yarn_context(const ModelConfig& m) {
  return std::llround(m.rope_scaling.factor * m.rope_scaling.original_max_position_embeddings);
}

// DeepSeek-V3's attention keys: MLA dims, rope_interleave, head_dim (DeepseekV3Config sets it to
// qk_rope_head_dim) and YaRN as rope_scaling (zeros of moe4d's RopeScaling are HF's absent keys).
void hf_write_mla(const ModelConfig& m, nlohmann::json& c) {
  c["q_lora_rank"] = m.mla.q_lora_rank > 0 ? nlohmann::json(m.mla.q_lora_rank) : nlohmann::json(nullptr);
  c["kv_lora_rank"] = m.mla.kv_lora_rank;
  c["qk_nope_head_dim"] = m.mla.qk_nope_head_dim;
  c["qk_rope_head_dim"] = m.mla.qk_rope_head_dim;
  c["v_head_dim"] = m.mla.v_head_dim;
  c["head_dim"] = m.mla.qk_rope_head_dim;
  c["rope_interleave"] = true;
  if (!m.rope_scaling.enabled()) return;
  const RopeScaling& rs = m.rope_scaling;
  // HF's YaRN takes the factor as max_position_embeddings / original_max_position_embeddings when
  // the latter is given (the scaled context, as DeepSeek-V3's 163840 = 40 x 4096), not from "factor".
  c["max_position_embeddings"] = yarn_context(m);
  nlohmann::json r = {{"type", "yarn"}, {"rope_type", "yarn"}, {"factor", rs.factor},
                      {"original_max_position_embeddings", rs.original_max_position_embeddings}};
  if (rs.beta_fast > 0) r["beta_fast"] = rs.beta_fast;
  if (rs.beta_slow > 0) r["beta_slow"] = rs.beta_slow;
  if (rs.mscale > 0) r["mscale"] = rs.mscale;
  if (rs.mscale_all_dim > 0) r["mscale_all_dim"] = rs.mscale_all_dim;
  c["rope_scaling"] = r;
}

// The DeepSeek-V3 attention of config.json `c` into `m` (absent keys: DeepseekV3Config's defaults);
// `theta` takes rope_parameters.rope_theta where given. `refuse` is the caller's one-line refusal.
template <typename Refuse>
void hf_read_mla(const nlohmann::json& c, const std::string& origin, ModelConfig& m, double& theta,
                 const Refuse& refuse_unless) {
  m.mla.q_lora_rank = c.contains("q_lora_rank") && c["q_lora_rank"].is_null()
                          ? 0
                          : positive_int(c, "q_lora_rank", origin, 1536);
  m.mla.kv_lora_rank = positive_int(c, "kv_lora_rank", origin, 512);
  m.mla.qk_nope_head_dim = positive_int(c, "qk_nope_head_dim", origin, 128);
  m.mla.qk_rope_head_dim = positive_int(c, "qk_rope_head_dim", origin, 64);
  m.mla.v_head_dim = positive_int(c, "v_head_dim", origin, 128);
  refuse_unless(m.mla.qk_rope_head_dim % 2 == 0, "qk_rope_head_dim", "an even width (RoPE rotates pairs)");
  refuse_unless(get_or<bool>(c, "rope_interleave", true, origin), "rope_interleave",
                "true (DeepSeek's interleaved rotary pairs)");
  refuse_unless(get_or<int64_t>(c, "num_nextn_predict_layers", 0, origin) == 0, "num_nextn_predict_layers",
                "0: moe4d has no multi-token-prediction layers; set it to 0 to import the main model (the MTP "
                "layers' tensors are then ignored with a warning, as transformers' DeepseekV3ForCausalLM does)");
  const char* key = c.contains("rope_scaling") && !c["rope_scaling"].is_null() ? "rope_scaling" : "rope_parameters";
  if (!c.contains(key) || c[key].is_null()) return;
  const nlohmann::json& r = c[key];
  refuse_unless(r.is_object(), key, "an object");
  theta = get_or<double>(r, "rope_theta", theta, origin);
  const std::string type = r.value("rope_type", r.value("type", std::string("default")));
  if (type == "default") return;
  refuse_unless(type == "yarn", key, "rope_type \"default\" or \"yarn\"");
  refuse_unless(!r.contains("attention_factor") || r["attention_factor"].is_null(), key,
                "YaRN without an explicit attention_factor (it follows from factor and mscale)");
  refuse_unless(r.value("truncate", true), key, "YaRN with truncate true (floor/ceil correction range)");
  RopeScaling& rs = m.rope_scaling;
  rs.factor = get<double>(r, "factor", origin);
  refuse_unless(rs.factor > 0, key, "a positive YaRN factor");
  rs.original_max_position_embeddings = positive_int(r, "original_max_position_embeddings", origin, m.seq_length);
  // HF's rotary frequencies then use max_position_embeddings / original as the factor, its softmax
  // scale "factor": moe4d has one factor for both.
  refuse_unless(double(m.seq_length) / rs.original_max_position_embeddings == rs.factor, key,
                fmt::format("a YaRN factor equal to max_position_embeddings / original_max_position_embeddings ({})",
                            double(m.seq_length) / rs.original_max_position_embeddings));
  for (auto [name, field] : {std::pair{"beta_fast", &rs.beta_fast}, std::pair{"beta_slow", &rs.beta_slow},
                             std::pair{"mscale", &rs.mscale}, std::pair{"mscale_all_dim", &rs.mscale_all_dim}}) {
    *field = get_or<double>(r, name, 0.0, origin);
    refuse_unless(*field >= 0, key, fmt::format("a non-negative YaRN {}", name));
  }
}

}  // namespace

const char* hf_architecture_name(HfArchitecture arch) {
  switch (arch) {
    case HfArchitecture::kMixtral: return kMixtral;
    case HfArchitecture::kGlm4Moe: return kGlm4Moe;
    case HfArchitecture::kQwen3Moe: return kQwen3Moe;
    case HfArchitecture::kQwen3: return kQwen3;
    case HfArchitecture::kDeepseekV3: return kDeepseekV3;
  }
  return kMixtral;
}

HfModelFeatures hf_model_features(const ModelConfig& model) {
  HfModelFeatures f;
  f.num_kv_heads = model.kv_heads();
  f.rope_theta = model.rope_theta;
  f.norm_eps = model.norm_eps;
  f.expert_ffn = model.expert_ffn();
  f.shared_experts = model.moe.shared_experts;
  f.shared_expert_ffn = model.moe.shared_experts > 0 ? model.shared_ffn() / model.moe.shared_experts : 0;
  f.first_dense_layers = model.moe.first_dense_layers;
  f.sigmoid_scores = model.moe.score_function == RouterScore::kSigmoid;
  f.normalize_top_k = model.moe.normalize_top_k;
  return f;
}

HfArchitecture choose_hf_architecture(const ModelConfig& model, bool router_bias_nonzero) {
  const HfModelFeatures f = hf_model_features(model);
  const auto refuse = [](const std::string& what) {
    fail("cannot export to the Hugging Face format: {}", what);
  };
  if (model.rope_scaling.enabled() && !model.is_mla())
    refuse(fmt::format("model.rope_scaling.factor {}: YaRN RoPE scaling is exported only with multi-head latent "
                       "attention (DeepSeek-V3); Mixtral, GLM-4-MoE and Qwen3 would be written with plain RoPE",
                       model.rope_scaling.factor));
  if (model.rope_scaling.enabled() &&
      double(yarn_context(model)) != model.rope_scaling.factor * model.rope_scaling.original_max_position_embeddings)
    refuse(fmt::format("model.rope_scaling.factor {} x original_max_position_embeddings {} is not an integer; HF "
                       "derives the YaRN factor from max_position_embeddings / original_max_position_embeddings",
                       model.rope_scaling.factor, model.rope_scaling.original_max_position_embeddings));
  if (model.is_mla() && !model.is_moe())
    refuse("multi-head latent attention in a dense model (model.moe.num_experts 0): DeepseekV3ForCausalLM "
           "(the architecture with MLA) is a mixture of experts");
  if (model.qk_norm && !model.is_moe()) return HfArchitecture::kQwen3;
  if (!model.is_moe())
    refuse("the model is dense (model.moe.num_experts 0) without model.qk_layernorm; dense models are exported "
           "as Qwen3 (qk_layernorm: true)");
  if (model.moe.capacity_factor)
    refuse(fmt::format("the model uses capacity dropping (model.moe.capacity_factor {}), which no Hugging Face "
                       "architecture computes; train dropless (capacity_factor: null) to export",
                       *model.moe.capacity_factor));
  if (model.moe.num_experts < 2) refuse("a single expert is not a mixture (num_experts < 2)");
  if (model.qk_norm) {  // Qwen3-MoE: the one MoE architecture with per-head q/k RMSNorm
    if (f.sigmoid_scores)
      refuse("model.qk_layernorm with sigmoid router scores: Qwen3-MoE (the architecture with q/k norm) routes "
             "with softmax scores");
    if (f.shared_experts > 0) refuse("model.qk_layernorm with shared experts: Qwen3-MoE has no shared expert");
    if (router_bias_nonzero)
      refuse("the checkpoint has a non-zero aux-loss-free router bias (state.json router_bias); Qwen3-MoE (the "
             "architecture with q/k norm) has no routing bias");
    return HfArchitecture::kQwen3Moe;
  }
  if (!model.moe.dense_layers.empty())
    refuse("model.moe.dense_layers (Qwen3-MoE's mlp_only_layers) is expressible only as Qwen3-MoE, which also "
           "needs model.qk_layernorm: true");
  const int moe_from = f.first_dense_layers;
  if (model.moe.layer_freq != 1 && moe_from < model.num_layers)
    refuse(fmt::format("model.moe.layer_freq {} alternates dense and MoE layers; Mixtral and GLM-4-MoE need every "
                       "layer after the leading dense ones to be MoE (layer_freq 1), and Qwen3-MoE (its "
                       "decoder_sparse_step) needs model.qk_layernorm: true",
                       model.moe.layer_freq));
  if (moe_from >= model.num_layers)
    refuse("model.moe.first_dense_layers leaves no MoE layer");

  const bool plain_routing = model.moe.num_groups == 1 && model.moe.routed_scaling_factor == 1.0;
  const bool mixtral_exact = !model.is_mla() && moe_from == 0 && f.shared_experts == 0 && !f.sigmoid_scores &&
                             f.normalize_top_k && !router_bias_nonzero && plain_routing;
  if (mixtral_exact) return HfArchitecture::kMixtral;
  if (!f.sigmoid_scores) {
    if (model.is_mla())
      refuse("multi-head latent attention with softmax router scores: DeepSeek-V3 (the architecture with MLA) "
             "routes with sigmoid scores; use model.moe.score_function: sigmoid");
    if (!plain_routing)
      refuse("group-limited routing (model.moe.num_groups > 1) or routed_scaling_factor != 1 with softmax router "
             "scores: Mixtral has neither, and GLM-4-MoE (which has both) routes with sigmoid scores");
    if (router_bias_nonzero)
      refuse("the checkpoint has a non-zero aux-loss-free router bias (state.json router_bias) with softmax "
             "scores; Mixtral has no routing bias and GLM-4-MoE's score-correction bias needs sigmoid scores");
    if (!f.normalize_top_k)
      refuse("softmax scores without top-k renormalisation (model.moe.normalize_top_k false) are not Mixtral's "
             "routing, and GLM-4-MoE routes with sigmoid scores");
    refuse("shared experts or leading dense layers with softmax router scores: GLM-4-MoE (the architecture with "
           "both) routes with sigmoid scores, Qwen2-MoE gates its shared expert, DeepSeek uses latent attention; "
           "use model.moe.score_function: sigmoid");
  }
  if (model.shared_ffn() % f.expert_ffn != 0)
    refuse(fmt::format("{}'s shared experts are n_shared_experts x moe_intermediate_size ({}) wide; "
                       "{} shared expert(s) of width {} ({} in all) are not a multiple of it",
                       model.is_mla() ? "DeepSeek-V3" : "GLM-4-MoE", f.expert_ffn, f.shared_experts,
                       f.shared_expert_ffn, model.shared_ffn()));
  return model.is_mla() ? HfArchitecture::kDeepseekV3 : HfArchitecture::kGlm4Moe;
}

nlohmann::json hf_config_json(const ModelConfig& model, HfArchitecture arch, const HfConfigExtras& extras) {
  const HfModelFeatures f = hf_model_features(model);
  nlohmann::json c;
  c["architectures"] = {hf_architecture_name(arch)};
  c["vocab_size"] = model.vocab_size;
  c["hidden_size"] = model.hidden_size;
  c["num_hidden_layers"] = model.num_layers;
  c["num_attention_heads"] = model.num_heads;
  c["num_key_value_heads"] = f.num_kv_heads;
  c["head_dim"] = model.head_dim();
  c["hidden_act"] = "silu";
  c["max_position_embeddings"] = model.seq_length;
  c["initializer_range"] = 0.02;
  c["rms_norm_eps"] = f.norm_eps;
  c["rope_theta"] = f.rope_theta;
  c["rope_scaling"] = nullptr;
  c["attention_dropout"] = 0.0;
  c["tie_word_embeddings"] = model.tie_embeddings;
  c["use_cache"] = true;
  if (arch != HfArchitecture::kQwen3) {
    c["num_experts_per_tok"] = model.moe.top_k;
    c["output_router_logits"] = false;
    c["router_aux_loss_coef"] = model.moe.aux_loss_coeff;
  }
  c["bos_token_id"] = nullptr;
  c["pad_token_id"] = nullptr;
  c["eos_token_id"] = extras.eos_token_id >= 0 ? nlohmann::json(extras.eos_token_id) : nlohmann::json(nullptr);
  c["torch_dtype"] = "float32";
  if (arch == HfArchitecture::kMixtral) {
    c["model_type"] = "mixtral";
    c["intermediate_size"] = f.expert_ffn;
    c["num_local_experts"] = model.moe.num_experts;
    c["sliding_window"] = nullptr;
    c["router_jitter_noise"] = 0.0;
  } else if (arch == HfArchitecture::kQwen3Moe || arch == HfArchitecture::kQwen3) {
    c["model_type"] = arch == HfArchitecture::kQwen3 ? "qwen3" : "qwen3_moe";
    c["intermediate_size"] = model.ffn_hidden_size;  // the dense layers (mlp_only_layers)
    c["attention_bias"] = false;
    c["use_sliding_window"] = false;
    c["sliding_window"] = nullptr;
    c["max_window_layers"] = model.num_layers;
    if (arch == HfArchitecture::kQwen3Moe) {
      c["moe_intermediate_size"] = f.expert_ffn;
      c["num_experts"] = model.moe.num_experts;
      c["norm_topk_prob"] = f.normalize_top_k;
      c["decoder_sparse_step"] = model.moe.layer_freq;
      // The layers decoder_sparse_step makes sparse that moe4d keeps dense (first_dense_layers and
      // model.moe.dense_layers).
      nlohmann::json dense = nlohmann::json::array();
      for (int l = 0; l < model.num_layers; ++l)
        if ((l + 1) % model.moe.layer_freq == 0 && !model.is_moe_layer(l)) dense.push_back(l);
      c["mlp_only_layers"] = dense;
    }
  } else {
    c["model_type"] = arch == HfArchitecture::kDeepseekV3 ? "deepseek_v3" : "glm4_moe";
    c["intermediate_size"] = model.ffn_hidden_size;  // the leading dense layers
    c["moe_intermediate_size"] = f.expert_ffn;
    c["n_routed_experts"] = model.moe.num_experts;
    c["n_shared_experts"] = model.shared_ffn() / f.expert_ffn;
    c["first_k_dense_replace"] = f.first_dense_layers;
    c["norm_topk_prob"] = f.normalize_top_k;
    c["routed_scaling_factor"] = model.moe.routed_scaling_factor;
    c["n_group"] = model.moe.num_groups;
    c["topk_group"] = model.moe.group_topk;
    c["attention_bias"] = false;
    c["num_nextn_predict_layers"] = 0;
    if (arch == HfArchitecture::kDeepseekV3) {
      hf_write_mla(model, c);
    } else {
      c["partial_rotary_factor"] = 1.0;
      c["use_qk_norm"] = false;
    }
  }
  // Not read by transformers (extra keys become plain attributes): the tokenizer's real size, since
  // vocab_size may be padded above it (ids beyond it are never produced by the tokenizer).
  if (extras.tokenizer_vocab_size > 0) c["tokenizer_vocab_size"] = extras.tokenizer_vocab_size;
  return c;
}

HfImportedModel hf_model_from_config_json(const nlohmann::json& c, const std::string& origin) {
  if (!c.is_object()) fail("{}: expected a JSON object", origin);
  std::string arch_name;
  if (c.contains("architectures") && c["architectures"].is_array() && c["architectures"].size() == 1 &&
      c["architectures"][0].is_string())
    arch_name = c["architectures"][0].get<std::string>();
  HfImportedModel out;
  if (arch_name == kMixtral) out.arch = HfArchitecture::kMixtral;
  else if (arch_name == kGlm4Moe) out.arch = HfArchitecture::kGlm4Moe;
  else if (arch_name == kQwen3Moe) out.arch = HfArchitecture::kQwen3Moe;
  else if (arch_name == kQwen3) out.arch = HfArchitecture::kQwen3;
  else if (arch_name == kDeepseekV3) out.arch = HfArchitecture::kDeepseekV3;
  else
    fail("{}: architectures is {}, expected [\"{}\"], [\"{}\"], [\"{}\"], [\"{}\"] or [\"{}\"]", origin,
         c.contains("architectures") ? c["architectures"].dump() : "missing", kMixtral, kGlm4Moe, kQwen3Moe, kQwen3,
         kDeepseekV3);
  const bool qwen = out.arch == HfArchitecture::kQwen3Moe || out.arch == HfArchitecture::kQwen3;
  const bool qwen_moe = out.arch == HfArchitecture::kQwen3Moe;
  const bool deepseek = out.arch == HfArchitecture::kDeepseekV3;

  const auto refuse_unless = [&](bool ok, const char* key, const std::string& expected) {
    if (!ok) fail("{}: \"{}\" is {}, moe4d computes only {}", origin, key, c.contains(key) ? c[key].dump() : "absent",
                  expected);
  };
  if (c.contains("quantization_config") && !c["quantization_config"].is_null())
    fail("{}: \"quantization_config\" is {}: quantized (e.g. FP8 block-quantized) weights are not read; dequantize "
         "them to bf16 or fp32 first (e.g. load with transformers and save_pretrained with torch_dtype=bfloat16)",
         origin, c["quantization_config"].dump());
  // Qwen3 and DeepSeek-V3 configs may omit keys: they take the class defaults (Qwen3MoeConfig,
  // Qwen3Config, DeepseekV3Config).
  const auto dims = [&](const char* key, int64_t qwen_moe_default, int64_t qwen_default, int64_t ds_default = -1) {
    return positive_int(c, key, origin, qwen_moe ? qwen_moe_default : qwen ? qwen_default : deepseek ? ds_default : -1);
  };
  ModelConfig& m = out.model;
  m.vocab_size = dims("vocab_size", 151936, 151936, 129280);
  m.hidden_size = dims("hidden_size", 2048, 4096, 7168);
  m.num_layers = dims("num_hidden_layers", 24, 32, 61);
  m.num_heads = dims("num_attention_heads", 32, 32, 128);
  m.seq_length = dims("max_position_embeddings", 32768, 32768, 4096);
  m.tie_embeddings = get_or<bool>(c, "tie_word_embeddings", false, origin);
  m.moe.top_k = out.arch == HfArchitecture::kQwen3 ? 2 : dims("num_experts_per_tok", 8, 8, 8);
  m.moe.layer_freq = 1;
  m.moe.capacity_factor.reset();
  m.moe.aux_loss_coeff = get_or<double>(c, "router_aux_loss_coef", qwen_moe ? 0.001 : 0.0, origin);
  m.moe.z_loss_coeff = 0.0;
  // head_dim: Qwen3Config's default 128, else hidden_size / num_attention_heads (as the HF attention
  // classes' getattr(config, "head_dim", ...)).
  // DeepSeek-V3: head_dim is qk_rope_head_dim (read with the MLA keys).
  const bool head_dim_given = c.contains("head_dim") && !c["head_dim"].is_null();
  double theta = get_or<double>(c, "rope_theta", 10000.0, origin);
  if (deepseek) {
    hf_read_mla(c, origin, m, theta, refuse_unless);
  } else if (head_dim_given || out.arch == HfArchitecture::kQwen3) {
    const int hd = positive_int(c, "head_dim", origin, 128);
    refuse_unless(hd % 2 == 0, "head_dim", "an even head dimension (RoPE rotates pairs)");
    if (m.hidden_size % m.num_heads != 0 || hd != m.hidden_size / m.num_heads) m.head_size = hd;
  } else if (m.hidden_size % m.num_heads != 0) {
    fail("{}: num_attention_heads {} does not divide hidden_size {} and there is no head_dim", origin, m.num_heads,
         m.hidden_size);
  }
  refuse_unless(!c.contains("hidden_act") || c["hidden_act"] == "silu", "hidden_act", "\"silu\" (SwiGLU)");
  refuse_unless(deepseek || !c.contains("rope_scaling") || c["rope_scaling"].is_null(), "rope_scaling",
                "null (plain RoPE)");
  if (!deepseek && c.contains("rope_parameters") && c["rope_parameters"].is_object()) {  // newer transformers
    const nlohmann::json& rope = c["rope_parameters"];
    refuse_unless(rope.value("rope_type", std::string("default")) == "default", "rope_parameters",
                  "rope_type \"default\" (plain RoPE)");
    theta = get_or<double>(rope, "rope_theta", theta, origin);
  }
  const int kv_heads = c.contains("num_key_value_heads") && !c["num_key_value_heads"].is_null()
                           ? positive_int(c, "num_key_value_heads", origin)
                           : qwen_moe ? 4 : m.num_heads;
  const double eps = get_or<double>(c, "rms_norm_eps", qwen || deepseek ? 1e-6 : 1e-5, origin);
  refuse_unless(!deepseek || kv_heads == m.num_heads, "num_key_value_heads",
                "num_attention_heads (latent attention has one key and value per query head)");

  HfModelFeatures f;
  f.num_kv_heads = kv_heads;
  f.rope_theta = theta;
  f.norm_eps = eps;
  if (out.arch == HfArchitecture::kMixtral) {
    m.moe.num_experts = positive_int(c, "num_local_experts", origin);
    m.ffn_hidden_size = positive_int(c, "intermediate_size", origin);
    f.expert_ffn = m.ffn_hidden_size;
    refuse_unless(!c.contains("sliding_window") || c["sliding_window"].is_null() ||
                      get<int64_t>(c, "sliding_window", origin) >= m.seq_length,
                  "sliding_window", "full causal attention (null or >= max_position_embeddings)");
    refuse_unless(get_or<double>(c, "router_jitter_noise", 0.0, origin) == 0.0, "router_jitter_noise", "0");
  } else if (qwen) {
    m.qk_norm = true;
    m.ffn_hidden_size = dims("intermediate_size", 6144, 22016);
    refuse_unless(!get_or<bool>(c, "use_sliding_window", false, origin), "use_sliding_window",
                  "false (full causal attention)");
    refuse_unless(!get_or<bool>(c, "attention_bias", false, origin), "attention_bias", "false (no biases)");
    if (qwen_moe) {
      m.moe.num_experts = dims("num_experts", 128, 0);
      f.expert_ffn = dims("moe_intermediate_size", 768, 0);
      f.normalize_top_k = get_or<bool>(c, "norm_topk_prob", false, origin);
      m.moe.layer_freq = dims("decoder_sparse_step", 1, 0);
      if (c.contains("mlp_only_layers") && !c["mlp_only_layers"].is_null()) {
        refuse_unless(c["mlp_only_layers"].is_array(), "mlp_only_layers", "a list of layer indices");
        for (const auto& l : c["mlp_only_layers"]) {
          refuse_unless(l.is_number_integer() && l.get<int64_t>() >= 0 && l.get<int64_t>() < m.num_layers,
                        "mlp_only_layers", "layer indices in [0, num_hidden_layers)");
          if (m.is_moe_layer(l.get<int>())) m.moe.dense_layers.push_back(l.get<int>());
        }
      }
    } else {
      f.expert_ffn = m.ffn_hidden_size;
    }
  } else {
    m.moe.num_experts = dims("n_routed_experts", 0, 0, 256);
    m.ffn_hidden_size = dims("intermediate_size", 0, 0, 18432);
    f.expert_ffn = dims("moe_intermediate_size", 0, 0, 2048);
    const int64_t shared = get_or<int64_t>(c, "n_shared_experts", deepseek ? 1 : 0, origin);
    refuse_unless(shared >= 0, "n_shared_experts", "a count >= 0");
    f.shared_experts = static_cast<int>(shared);  // each moe_intermediate_size wide
    f.shared_expert_ffn = f.expert_ffn;
    f.first_dense_layers = static_cast<int>(get_or<int64_t>(c, "first_k_dense_replace", deepseek ? 3 : 0, origin));
    refuse_unless(f.first_dense_layers >= 0 && f.first_dense_layers < m.num_layers, "first_k_dense_replace",
                  "a number of leading dense layers below num_hidden_layers");
    f.sigmoid_scores = true;
    f.normalize_top_k = get_or<bool>(c, "norm_topk_prob", true, origin);
    // Group-limited routing and the scaling factor: Glm4MoeMoE.route_tokens_to_experts is moe4d's
    // (groups scored by their top-2 biased scores, weights scaled after normalising).
    const double scaling = get_or<double>(c, "routed_scaling_factor", deepseek ? 2.5 : 1.0, origin);
    refuse_unless(scaling > 0, "routed_scaling_factor", "a positive factor");
    const int64_t groups = get_or<int64_t>(c, "n_group", deepseek ? 8 : 1, origin);
    const int64_t topk_group = get_or<int64_t>(c, "topk_group", deepseek ? 4 : 1, origin);
    refuse_unless(groups >= 1 && m.moe.num_experts % groups == 0 && (groups == 1 || m.moe.num_experts / groups >= 2),
                  "n_group", "a divisor of n_routed_experts leaving at least 2 experts per group");
    refuse_unless(topk_group >= 1 && topk_group <= groups && topk_group * (m.moe.num_experts / groups) >= m.moe.top_k,
                  "topk_group", "a number of groups in [1, n_group] holding at least num_experts_per_tok experts");
    m.moe.routed_scaling_factor = scaling;
    m.moe.num_groups = static_cast<int>(groups);
    m.moe.group_topk = static_cast<int>(topk_group);
    refuse_unless(deepseek || get_or<double>(c, "partial_rotary_factor", 0.5, origin) == 1.0,
                  "partial_rotary_factor", "1.0 (RoPE over the whole head)");
    refuse_unless(deepseek || !get_or<bool>(c, "use_qk_norm", false, origin), "use_qk_norm", "false");
    refuse_unless(!get_or<bool>(c, "attention_bias", false, origin), "attention_bias", "false (no biases)");
  }
  if (out.arch == HfArchitecture::kQwen3) m.moe = MoeConfig{};  // dense
  else if (m.moe.top_k > m.moe.num_experts)
    fail("{}: num_experts_per_tok {} exceeds the {} experts", origin, m.moe.top_k, m.moe.num_experts);

  m.num_kv_heads = f.num_kv_heads == m.num_heads ? 0 : f.num_kv_heads;
  if (m.num_heads % f.num_kv_heads != 0)
    fail("{}: num_key_value_heads {} does not divide num_attention_heads {}", origin, f.num_kv_heads, m.num_heads);
  m.rope_theta = f.rope_theta;
  m.norm_eps = f.norm_eps;
  m.moe.expert_ffn_hidden_size = f.expert_ffn == m.ffn_hidden_size ? 0 : f.expert_ffn;
  m.moe.shared_experts = f.shared_experts;
  m.moe.shared_expert_ffn_hidden_size = 0;  // the routed experts' width, as GLM-4-MoE's
  m.moe.first_dense_layers = f.first_dense_layers;
  m.moe.score_function = f.sigmoid_scores ? RouterScore::kSigmoid : RouterScore::kSoftmax;
  m.moe.normalize_top_k = f.normalize_top_k;

  if (c.contains("eos_token_id") && c["eos_token_id"].is_number_integer()) out.eos_token_id = c["eos_token_id"];
  else if (c.contains("eos_token_id") && c["eos_token_id"].is_array() && !c["eos_token_id"].empty() &&
           c["eos_token_id"][0].is_number_integer())
    out.eos_token_id = c["eos_token_id"][0];
  else if (deepseek && !c.contains("eos_token_id"))
    out.eos_token_id = 1;  // DeepseekV3Config's default
  return out;
}

}  // namespace moe4d
