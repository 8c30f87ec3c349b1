// model/rope_scaling.h — the model's RoPE table: plain RoPE, or YaRN-scaled frequencies
// (model.rope_scaling, Peng et al. 2023, as Hugging Face's _compute_yarn_parameters computes them),
// and the softmax scale of multi-head latent attention (DeepSeek-V3's mscale_all_dim correction).
#pragma once

#include <vector>

#include "config/config.h"
#include "kernels/rope.h"

namespace moe4d {

// The rotary width: qk_rope_head_dim under MLA, else the head dimension.
int rope_dim(const ModelConfig& model);

// YaRN's inverse frequencies of the dim / 2 pairs and its attention factor (cos and sin are scaled
// by it): HF's defaults beta_fast 32, beta_slow 1, truncated correction range, attention factor
// mscale(factor, mscale) / mscale(factor, mscale_all_dim) when both are given, else mscale(factor).
struct YarnFrequencies {
  std::vector<double> inv_freq;
  double attention_factor = 1.0;
};
YarnFrequencies yarn_frequencies(const ModelConfig& model, int dim);

// The table of seq_length positions and rope_dim(model) dimensions.
RopeTable make_rope_table(const ModelConfig& model);

// MLA's softmax scale: 1 / sqrt(qk_nope_head_dim + qk_rope_head_dim), times mscale(factor,
// mscale_all_dim)^2 under YaRN with mscale_all_dim (HF DeepseekV3Attention.scaling).
double mla_softmax_scale(const ModelConfig& model);

}  // namespace moe4d
