// interop/hf_architecture.h — which Hugging Face transformers architecture expresses a moe4d model
// exactly, and its config.json in both directions.
//
// Five architectures are used, each only where its forward pass is the moe4d forward pass (up to
// float summation order):
//   * MixtralForCausalLM: every layer MoE, no shared experts, softmax router with top-k renormalised
//     to sum 1, no routing bias. Grouped-query attention via num_key_value_heads.
//   * Glm4MoeForCausalLM: leading dense layers (first_k_dense_replace), then every layer MoE with
//     `n_shared_experts` always-on experts of moe_intermediate_size each, a sigmoid router whose
//     selection adds e_score_correction_bias (the aux-loss-free bias), top-k optionally renormalised
//     (norm_topk_prob), group-limited routing (n_group, topk_group: moe.num_groups, group_topk) and
//     routed_scaling_factor as moe4d computes them, written with partial_rotary_factor 1,
//     use_qk_norm false and attention_bias false so that nothing else differs from moe4d's math.
//   * Qwen3MoeForCausalLM (model.qk_layernorm): q/k RMSNorm per head before RoPE, explicit head_dim,
//     softmax router with top-k optionally renormalised (norm_topk_prob), no shared experts, MoE
//     layers by decoder_sparse_step (= layer_freq) less mlp_only_layers (= first_dense_layers and
//     model.moe.dense_layers), whose dense MLP is intermediate_size (= ffn_hidden_size) wide.
//   * Qwen3ForCausalLM: the same attention, every layer dense.
//   * DeepseekV3ForCausalLM (model.kv_lora_rank > 0): multi-head latent attention (q_lora_rank,
//     kv_lora_rank, qk_nope/qk_rope/v head dims, rope_interleave true, YaRN rope_scaling as
//     model.rope_scaling) with GLM-4-MoE's routing and layer layout (sigmoid + e_score_correction_bias,
//     n_group / topk_group, routed_scaling_factor, norm_topk_prob, first_k_dense_replace, shared
//     experts). No multi-token-prediction layers: num_nextn_predict_layers > 0 is refused on import.
// Everything else is refused with one line naming what cannot be expressed: Qwen2-MoE gates its
// shared expert with a learned sigmoid (not expressible as moe4d's ungated sum), YaRN without MLA,
// alternating dense/MoE layers (layer_freq > 1) or listed dense layers
// need Qwen3-MoE (so model.qk_layernorm), and no architecture has capacity dropping or a softmax
// router together with shared experts.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "config/config.h"

namespace moe4d {

enum class HfArchitecture { kMixtral, kGlm4Moe, kQwen3Moe, kQwen3, kDeepseekV3 };

// "MixtralForCausalLM" / "Glm4MoeForCausalLM" / "Qwen3MoeForCausalLM" / "Qwen3ForCausalLM" /
// "DeepseekV3ForCausalLM".
const char* hf_architecture_name(HfArchitecture arch);

// The model features the HF mapping depends on, read from a ModelConfig in one place.
struct HfModelFeatures {
  int num_kv_heads = 0;
  double rope_theta = 10000.0;
  double norm_eps = 1e-5;
  int expert_ffn = 0;          // width of one routed expert
  int shared_experts = 0;      // number of always-on experts
  int shared_expert_ffn = 0;   // width of one shared expert
  int first_dense_layers = 0;  // layers 0..k-1 dense
  bool sigmoid_scores = false; // router scores sigmoid (else softmax)
  bool normalize_top_k = true; // top-k weights renormalised to sum 1
};
HfModelFeatures hf_model_features(const ModelConfig& model);

// The architecture that expresses `model` exactly, or a moe4d::Error naming the first feature that
// none expresses. `router_bias_nonzero`: the checkpoint's aux-loss-free bias has a non-zero entry.
HfArchitecture choose_hf_architecture(const ModelConfig& model, bool router_bias_nonzero);

// What config.json records beyond the model shape.
struct HfConfigExtras {
  int eos_token_id = -1;          // moe4d's end-of-document id; -1: unknown (written as null)
  int tokenizer_vocab_size = 0;   // the tokenizer's real size (vocab_size may be padded above it)
};

nlohmann::json hf_config_json(const ModelConfig& model, HfArchitecture arch, const HfConfigExtras& extras);

// Reads config.json (`origin` names the file in messages) into the model section of a moe4d config.
// Refuses, one line each, architectures other than the five above and settings moe4d does not
// compute (biases, qk-norm outside Qwen3, partial rotary, RoPE scaling other than DeepSeek-V3's YaRN,
// sliding windows, activations other than silu, quantized weights, MTP layers). Qwen3 and
// DeepSeek-V3 keys absent from config.json take the defaults of transformers' Qwen3MoeConfig /
// Qwen3Config / DeepseekV3Config.
struct HfImportedModel {
  ModelConfig model;
  HfArchitecture arch = HfArchitecture::kMixtral;
  int eos_token_id = -1;
};
HfImportedModel hf_model_from_config_json(const nlohmann::json& config, const std::string& origin);

}  // namespace moe4d
