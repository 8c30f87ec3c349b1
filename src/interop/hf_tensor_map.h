// interop/hf_tensor_map.h — how every tensor of a Hugging Face checkpoint is made of moe4d's tensors.
//
// Each HF tensor is a pure re-indexing of one moe4d tensor (no arithmetic), so export followed by
// import gives back bit-identical values:
//   * nn.Linear weights are [out, in]; moe4d stores [in, out]: transposed. Experts are 3-D in moe4d
//     ([E, in, out]) and one [out, in] tensor per expert in HF.
//   * moe4d's fused attention projection holds q, k, v per head; HF has q_proj / k_proj / v_proj.
//   * RoPE: moe4d rotates pairs (2i, 2i+1) of a head, HF's Llama-family code rotates (i, i + hd/2)
//     (rotate_half). Row i of an HF q/k head is column 2i of moe4d's head for i < hd/2 and column
//     2(i - hd/2) + 1 above, the same permutation as transformers' convert_llama_weights_to_hf.py
//     `permute`. Both q and k move alike, so every attention score is unchanged; v is not rotated
//     and keeps its order. Qwen3's q_norm / k_norm weights (over a head's elements, before RoPE)
//     move with the rows: HF element i is moe4d element pair_of(i).
//   * The aux-loss-free router bias lives in state.json (router_bias), not in model.safetensors; it
//     becomes GLM-4-MoE's mlp.gate.e_score_correction_bias (float32).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "config/config.h"
#include "core/tensor.h"
#include "interop/hf_architecture.h"

namespace moe4d {

struct HfTensorRule {
  std::string hf_name;
  std::vector<int64_t> hf_shape;  // 1-D or 2-D
  // The moe4d tensor it comes from; empty for a router bias (then bias_layer is set) and for the
  // zero-element tensors of an absent module (GLM-4-MoE's shared experts when there are none).
  std::string moe4d_name;
  int bias_layer = -1;
  // Flat index into the moe4d tensor (or the layer's bias vector) of HF element (row, col); a 1-D HF
  // tensor has row 0.
  std::function<int64_t(int64_t row, int64_t col)> source;
};

// The rules of every tensor of the HF checkpoint, in the order save_pretrained lays them out
// (embedding, layers, final norm, head). Together they cover every element of every moe4d parameter
// exactly once (tested).
std::vector<HfTensorRule> hf_tensor_rules(const ModelConfig& model, HfArchitecture arch);

// The global shape of every moe4d parameter of `model`, by name (a single-rank model's registry).
std::map<std::string, Shape> moe4d_parameter_shapes(const ModelConfig& model);

}  // namespace moe4d
