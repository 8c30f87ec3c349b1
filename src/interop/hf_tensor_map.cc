// interop/hf_tensor_map.cc — the index maps of interop/hf_tensor_map.h.
//
// HF names follow the tensor names of the Hub checkpoints (what transformers' save_pretrained of
// MixtralForCausalLM / Glm4MoeForCausalLM / Qwen3(Moe)ForCausalLM writes): model.embed_tokens,
// model.layers.N.{input_layernorm, self_attn.{q,k,v,o}_proj, self_attn.{q,k}_norm (Qwen3),
// post_attention_layernorm}, Mixtral's block_sparse_moe.{gate, experts.J.{w1,w2,w3}}, GLM-4-MoE's and
// Qwen3-MoE's mlp.{gate, experts.J.{gate,up,down}_proj} (GLM-4-MoE and DeepSeek-V3 also
// gate.e_score_correction_bias and shared_experts.*; DeepSeek-V3's latent attention self_attn.{q_a_proj,
// q_a_layernorm, q_b_proj (or q_proj), kv_a_proj_with_mqa, kv_a_layernorm, kv_b_proj, o_proj}) and dense mlp.{gate,up,down}_proj, model.norm, lm_head (absent when tied).
#include "interop/hf_tensor_map.h"

#include <fmt/format.h>

#include "model/param_store.h"
#include "model/transformer.h"
#include "parallel/parallel_context.h"

namespace moe4d {
namespace {

// The shape of moe4d's fused attention projection (copied into the index functions).
struct QkvLayout {
  int64_t hd = 0, heads = 0, kv_heads = 0;
  // Column holding element j of part (0 q, 1 k, 2 v) of query head / KV head `head`. The columns
  // are grouped by KV head (kernels/attention.h): group g holds its heads / kv_heads query heads,
  // then its key head, then its value head.
  int64_t column(int part, int64_t head, int64_t j) const {
    const int64_t per_group = heads / kv_heads;
    const int64_t slot = part == 0 ? (head / per_group) * (per_group + 2) + head % per_group
                                   : head * (per_group + 2) + per_group + (part - 1);
    return slot * hd + j;
  }
};

// HF row i of a rotated head (rotate_half) is moe4d column pair_of(i) of that head.
int64_t pair_of(int64_t i, int64_t hd) { return i < hd / 2 ? 2 * i : 2 * (i - hd / 2) + 1; }

class RuleList {
 public:
  explicit RuleList(const std::map<std::string, Shape>& shapes) : shapes_(shapes) {}

  const Shape& shape(const std::string& name) const { return shapes_.at(name); }

  void copy(const std::string& hf, const std::string& ours) {
    const Shape s = shape(ours);
    if (s.ndim() == 1) {
      add(hf, {s[0]}, ours, [](int64_t, int64_t c) { return c; });
    } else {
      const int64_t cols = s[1];
      add(hf, {s[0], s[1]}, ours, [cols](int64_t r, int64_t c) { return r * cols + c; });
    }
  }
  // HF [b, a] from moe4d [a, b].
  void transpose(const std::string& hf, const std::string& ours) {
    const Shape s = shape(ours);
    const int64_t b = s[1];
    add(hf, {s[1], s[0]}, ours, [b](int64_t r, int64_t c) { return c * b + r; });
  }
  // HF [b, a] from expert e of moe4d [E, a, b].
  void expert_transpose(const std::string& hf, const std::string& ours, int64_t e) {
    const Shape s = shape(ours);
    const int64_t a = s[1], b = s[2];
    add(hf, {b, a}, ours, [a, b, e](int64_t r, int64_t c) { return e * a * b + c * b + r; });
  }
  void add(const std::string& hf, std::vector<int64_t> hf_shape, const std::string& ours,
           std::function<int64_t(int64_t, int64_t)> source) {
    rules_.push_back(HfTensorRule{hf, std::move(hf_shape), ours, -1, std::move(source)});
  }
  void add_bias(const std::string& hf, int64_t experts, int layer) {
    rules_.push_back(HfTensorRule{hf, {experts}, "", layer, [](int64_t, int64_t c) { return c; }});
  }
  void add_empty(const std::string& hf, std::vector<int64_t> hf_shape) {
    rules_.push_back(HfTensorRule{hf, std::move(hf_shape), "", -1, [](int64_t, int64_t) -> int64_t { return 0; }});
  }
  std::vector<HfTensorRule> take() { return std::move(rules_); }

 private:
  const std::map<std::string, Shape>& shapes_;
  std::vector<HfTensorRule> rules_;
};

// DeepseekV3Attention's tensors (rope_interleave: its rotary rows are in moe4d's (2i, 2i+1) pair
// order already, so every tensor is a plain transpose or copy).
void mla_attention_rules(RuleList& rules, const ModelConfig& m, const std::string& ours, const std::string& hf) {
  const std::string attn = hf + "self_attn.";
  if (m.mla.q_lora_rank > 0) {
    rules.transpose(attn + "q_a_proj.weight", ours + "attn.q_a.weight");
    rules.copy(attn + "q_a_layernorm.weight", ours + "attn.q_a_norm.weight");
    rules.transpose(attn + "q_b_proj.weight", ours + "attn.q_b.weight");
  } else {
    rules.transpose(attn + "q_proj.weight", ours + "attn.q.weight");
  }
  rules.transpose(attn + "kv_a_proj_with_mqa.weight", ours + "attn.kv_a.weight");
  rules.copy(attn + "kv_a_layernorm.weight", ours + "attn.kv_a_norm.weight");
  rules.transpose(attn + "kv_b_proj.weight", ours + "attn.kv_b.weight");
  rules.transpose(attn + "o_proj.weight", ours + "attn.out.weight");
}

void attention_rules(RuleList& rules, const ModelConfig& m, int layer) {
  const HfModelFeatures f = hf_model_features(m);
  const std::string ours = fmt::format("layers.{}.", layer);
  const std::string hf = fmt::format("model.layers.{}.", layer);
  if (m.is_mla()) {
    rules.copy(hf + "input_layernorm.weight", ours + "attn_norm.weight");
    mla_attention_rules(rules, m, ours, hf);
    rules.copy(hf + "post_attention_layernorm.weight", ours + "ffn_norm.weight");
    return;
  }
  const std::string qkv = ours + "attn.qkv.weight";
  const int64_t hd = m.head_dim(), heads = m.num_heads, kv = f.num_kv_heads;
  const int64_t width = rules.shape(qkv)[1];
  const QkvLayout layout{hd, heads, kv};
  rules.copy(hf + "input_layernorm.weight", ours + "attn_norm.weight");
  // q/k/v_proj [heads * hd, d]: row = head * hd + i, col = input feature.
  const auto projection = [&](const char* name, int part, int64_t n_heads, bool rotated) {
    rules.add(hf + "self_attn." + name + ".weight", {n_heads * hd, m.hidden_size}, qkv,
              [layout, part, hd, width, rotated](int64_t r, int64_t c) {
                const int64_t head = r / hd, i = r % hd;
                return c * width + layout.column(part, head, rotated ? pair_of(i, hd) : i);
              });
  };
  projection("q_proj", 0, heads, true);
  projection("k_proj", 1, kv, true);
  projection("v_proj", 2, kv, false);
  if (m.qk_norm) {  // Qwen3: weights over a head's rows, which HF orders by rotate_half pairs like q/k
    for (const char* which : {"q_norm", "k_norm"})
      rules.add(hf + "self_attn." + which + ".weight", {hd}, ours + "attn." + which + ".weight",
                [hd](int64_t, int64_t c) { return pair_of(c, hd); });
  }
  rules.transpose(hf + "self_attn.o_proj.weight", ours + "attn.out.weight");
  rules.copy(hf + "post_attention_layernorm.weight", ours + "ffn_norm.weight");
}

}  // namespace

std::map<std::string, Shape> moe4d_parameter_shapes(const ModelConfig& model) {
  auto pc = make_single_rank_context();
  ParamStore params;  // registration only: never finalised, so nothing is allocated
  Transformer transformer(model, *pc, {ChunkSpec{0, model.num_layers, true, true}}, params);
  std::map<std::string, Shape> shapes;
  for (const ParamInfo& info : params.infos())
    if (!info.is_tied_copy) shapes.emplace(info.name, info.global_shape);
  return shapes;
}

std::vector<HfTensorRule> hf_tensor_rules(const ModelConfig& m, HfArchitecture arch) {
  const std::map<std::string, Shape> shapes = moe4d_parameter_shapes(m);
  RuleList rules(shapes);
  rules.copy("model.embed_tokens.weight", "embed.weight");
  const int E = m.moe.num_experts;
  for (int l = 0; l < m.num_layers; ++l) {
    attention_rules(rules, m, l);
    const std::string ours = fmt::format("layers.{}.", l);
    const std::string hf = fmt::format("model.layers.{}.", l);
    if (arch == HfArchitecture::kMixtral) {
      const std::string moe = hf + "block_sparse_moe.";
      rules.transpose(moe + "gate.weight", ours + "moe.router.weight");
      for (int e = 0; e < E; ++e) {
        const std::string expert = fmt::format("{}experts.{}.", moe, e);
        rules.expert_transpose(expert + "w1.weight", ours + "moe.experts.w1", e);
        rules.expert_transpose(expert + "w2.weight", ours + "moe.experts.w2", e);
        rules.expert_transpose(expert + "w3.weight", ours + "moe.experts.w3", e);
      }
      continue;
    }
    const std::string mlp = hf + "mlp.";
    if (!m.is_moe_layer(l)) {
      rules.transpose(mlp + "gate_proj.weight", ours + "ffn.w1.weight");
      rules.transpose(mlp + "up_proj.weight", ours + "ffn.w3.weight");
      rules.transpose(mlp + "down_proj.weight", ours + "ffn.w2.weight");
      continue;
    }
    rules.transpose(mlp + "gate.weight", ours + "moe.router.weight");
    const bool glm_like = arch == HfArchitecture::kGlm4Moe || arch == HfArchitecture::kDeepseekV3;
    if (glm_like) rules.add_bias(mlp + "gate.e_score_correction_bias", E, l);
    for (int e = 0; e < E; ++e) {
      const std::string expert = fmt::format("{}experts.{}.", mlp, e);
      rules.expert_transpose(expert + "gate_proj.weight", ours + "moe.experts.w1", e);
      rules.expert_transpose(expert + "up_proj.weight", ours + "moe.experts.w3", e);
      rules.expert_transpose(expert + "down_proj.weight", ours + "moe.experts.w2", e);
    }
    if (!glm_like) continue;  // Qwen3-MoE: no shared expert
    const std::string shared = mlp + "shared_experts.";
    if (m.shared_ffn() > 0) {
      rules.transpose(shared + "gate_proj.weight", ours + "moe.shared.w1.weight");
      rules.transpose(shared + "up_proj.weight", ours + "moe.shared.w3.weight");
      rules.transpose(shared + "down_proj.weight", ours + "moe.shared.w2.weight");
    } else {  // n_shared_experts 0: GLM-4-MoE and DeepSeek-V3 still have the (zero-width) module
      rules.add_empty(shared + "gate_proj.weight", {0, m.hidden_size});
      rules.add_empty(shared + "up_proj.weight", {0, m.hidden_size});
      rules.add_empty(shared + "down_proj.weight", {m.hidden_size, 0});
    }
  }
  rules.copy("model.norm.weight", "final_norm.weight");
  if (!m.tie_embeddings) rules.transpose("lm_head.weight", "head.weight");
  return rules.take();
}

}  // namespace moe4d
