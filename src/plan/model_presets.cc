// plan/model_presets.cc — the built-in models (shapes in plan/model_presets.h).
#include "plan/model_presets.h"

#include <fmt/ranges.h>

#include "core/error.h"

namespace moe4d {
namespace {

ModelConfig make_model(int vocab, int hidden, int layers, int heads, int ffn, int seq, int experts, int top_k,
                       int layer_freq) {
  ModelConfig m;
  m.vocab_size = vocab;
  m.hidden_size = hidden;
  m.num_layers = layers;
  m.num_heads = heads;
  m.ffn_hidden_size = ffn;
  m.seq_length = seq;
  m.tie_embeddings = false;
  m.moe.num_experts = experts;
  m.moe.top_k = top_k;
  m.moe.layer_freq = layer_freq;
  m.moe.capacity_factor.reset();  // dropless
  return m;
}

TrainingSetup make_setup(int64_t global_batch, int seq) {
  TrainingSetup s;
  s.global_batch = global_batch;
  s.seq_length = seq;
  s.precision = Precision::kBF16;
  return s;
}

}  // namespace

std::vector<std::string> model_preset_names() {
  return {"moe-120b",        "dense-70b",       "mixtral-8x7b", "deepseek-moe-16b",
          "deepseek-v3-like", "qwen3-30b-a3b",   "qwen3-235b-a22b", "moe-1t"};
}

bool is_model_preset(const std::string& name) {
  for (const std::string& known : model_preset_names())
    if (known == name) return true;
  return false;
}

ModelPreset model_preset(const std::string& name) {
  ModelPreset p;
  p.name = name;
  if (name == "moe-120b") {
    // Dense part = attention 64 x 4 x 12288^2 = 38.7B + embeddings 2 x 65536 x 12288 = 1.6B (~40B);
    // experts 64 layers x 16 x 3 x 12288 x 2048 = 77.3B (~80B): the articles' 40B + 80B split.
    p.description = "the articles' 120B MoE: ~40B dense + ~77B experts (16 experts, top-2, every layer)";
    p.model = make_model(65536, 12288, 64, 96, 2048, 4096, 16, 2, 1);
    // The articles' parallel_config: 16 data replicas (DP2 x EP8) x 16 micro-batches.
    p.setup = make_setup(256, 4096);
  } else if (name == "dense-70b") {
    p.description = "the articles' 70B dense model (Llama-2-70B shape with multi-head attention)";
    p.model = make_model(32000, 8192, 80, 64, 24576, 4096, 0, 2, 1);
    p.setup = make_setup(256, 4096);
  } else if (name == "mixtral-8x7b") {
    // Mixtral-8x7B's config.json: 32 heads on 8 KV heads, rope_theta 1e6 -> 46.7B parameters, 12.9B active.
    p.description = "Mixtral 8x7B: 8 experts of 14336, top-2, every layer, GQA (8 KV heads), rope_theta 1e6";
    p.model = make_model(32000, 4096, 32, 32, 14336, 4096, 8, 2, 1);
    p.model.num_kv_heads = 8;
    p.model.rope_theta = 1e6;
    p.setup = make_setup(512, 4096);
  } else if (name == "deepseek-moe-16b") {
    // DeepSeek-MoE-16B's config.json: layer 0 dense (10944), then 64 fine-grained experts of 1408, top-6,
    // plus 2 shared experts of 1408; softmax scores without renormalising (norm_topk_prob false);
    // multi-head attention -> 16.4B parameters, ~2.8B active.
    p.description = "DeepSeek-MoE 16B: layer 0 dense, then 64 experts of 1408 top-6 + 2 shared experts, MHA";
    p.model = make_model(102400, 2048, 28, 16, 10944, 4096, 64, 6, 1);
    p.model.moe.first_dense_layers = 1;
    p.model.moe.expert_ffn_hidden_size = 1408;
    p.model.moe.shared_experts = 2;
    p.model.moe.shared_expert_ffn_hidden_size = 1408;
    p.model.moe.normalize_top_k = false;
    p.model.norm_eps = 1e-6;
    // The paper's 4.5M-token batches at 4K sequences.
    p.setup = make_setup(1152, 4096);
  } else if (name == "deepseek-v3-like") {
    p.description = "DeepSeek-V3 proportions: 256 experts of 2048, top-8, 60 layers (no MLA, no shared expert)";
    p.model = make_model(129280, 7168, 60, 128, 2048, 4096, 256, 8, 1);
    p.setup = make_setup(15360, 4096);
  } else if (name == "qwen3-30b-a3b" || name == "qwen3-235b-a22b") {
    // Qwen3-30B-A3B / Qwen3-235B-A22B's config.json: every layer MoE (decoder_sparse_step 1, no
    // mlp_only_layers), 128 experts top-8 renormalised (norm_topk_prob true), no shared expert, GQA on 4
    // KV heads of head_dim 128 (num_heads x 128 != hidden_size) with q/k RMSNorm, rope_theta 1e6, eps
    // 1e-6, untied -> 30.5B / 3.3B active and 235B / 22B active.
    const bool big = name == "qwen3-235b-a22b";
    p.description = big ? "Qwen3-235B-A22B: 94 layers, 128 experts of 1536 top-8, 64 heads x 128 on 4 KV heads, q/k norm"
                        : "Qwen3-30B-A3B: 48 layers, 128 experts of 768 top-8, 32 heads x 128 on 4 KV heads, q/k norm";
    p.model = big ? make_model(151936, 4096, 94, 64, 12288, 4096, 128, 8, 1)
                  : make_model(151936, 2048, 48, 32, 6144, 4096, 128, 8, 1);
    p.model.num_kv_heads = 4;
    p.model.head_size = 128;
    p.model.qk_norm = true;
    p.model.moe.expert_ffn_hidden_size = big ? 1536 : 768;
    p.model.rope_theta = 1e6;
    p.model.norm_eps = 1e-6;
    p.model.moe.aux_loss_coeff = 0.001;  // Qwen3MoeConfig's router_aux_loss_coef
    // 4M-token batches of 4K sequences (the report gives no batch size; a template value).
    p.setup = make_setup(1024, 4096);
  } else if (name == "moe-1t") {
    p.description = "a 1.05T-parameter MoE: 64 experts of 6656, top-2, 64 layers";
    p.model = make_model(65536, 12288, 64, 96, 6656, 4096, 64, 2, 1);
    p.setup = make_setup(8192, 4096);
  } else {
    fail("unknown model preset '{}', expected a moe4d config YAML or one of: {}", name,
         fmt::join(model_preset_names(), ", "));
  }
  return p;
}

}  // namespace moe4d
