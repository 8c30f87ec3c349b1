#include "model/rope_scaling.h"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace moe4d {
namespace {

// YaRN's attention-temperature correction, 0.1 mscale ln(scale) + 1 (1 for scale <= 1).
double yarn_mscale(double scale, double mscale) { return scale <= 1 ? 1.0 : 0.1 * mscale * std::log(scale) + 1.0; }

// The dimension at which a frequency makes num_rotations turns over max_positions.
double correction_dim(double num_rotations, int dim, double base, double max_positions) {
  return dim * std::log(max_positions / (num_rotations * 2 * std::numbers::pi)) / (2 * std::log(base));
}

}  // namespace

int rope_dim(const ModelConfig& model) { return model.is_mla() ? model.mla.qk_rope_head_dim : model.head_dim(); }

YarnFrequencies yarn_frequencies(const ModelConfig& model, int dim) {
  const RopeScaling& rs = model.rope_scaling;
  const double base = model.rope_theta, factor = rs.factor;
  const double beta_fast = rs.beta_fast > 0 ? rs.beta_fast : 32, beta_slow = rs.beta_slow > 0 ? rs.beta_slow : 1;
  const double original = rs.original_max_position_embeddings;
  YarnFrequencies out;
  out.attention_factor = rs.mscale > 0 && rs.mscale_all_dim > 0
                             ? yarn_mscale(factor, rs.mscale) / yarn_mscale(factor, rs.mscale_all_dim)
                             : yarn_mscale(factor, 1.0);
  const double low = std::max(std::floor(correction_dim(beta_fast, dim, base, original)), 0.0);
  double high = std::min(std::ceil(correction_dim(beta_slow, dim, base, original)), double(dim - 1));
  if (low == high) high += 0.001;  // HF's guard against a zero-width ramp
  const int half = dim / 2;
  out.inv_freq.resize(half);
  for (int i = 0; i < half; ++i) {
    // HF computes the frequencies in fp32; so do we, for the same table.
    const float pos_freq = std::pow(float(base), float(2 * i) / float(dim));
    const float extrapolation = 1.0f / pos_freq, interpolation = 1.0f / (float(factor) * pos_freq);
    const float ramp = std::clamp(float((i - low) / (high - low)), 0.0f, 1.0f);
    const float extrapolation_weight = 1.0f - ramp;
    out.inv_freq[i] = interpolation * (1.0f - extrapolation_weight) + extrapolation * extrapolation_weight;
  }
  return out;
}

RopeTable make_rope_table(const ModelConfig& model) {
  const int dim = rope_dim(model);
  if (!model.rope_scaling.enabled()) return RopeTable(model.seq_length, dim, static_cast<float>(model.rope_theta));
  const YarnFrequencies yarn = yarn_frequencies(model, dim);
  return RopeTable(model.seq_length, yarn.inv_freq, yarn.attention_factor);
}

double mla_softmax_scale(const ModelConfig& model) {
  double scale = 1.0 / std::sqrt(double(model.mla.qk_head_dim()));
  const RopeScaling& rs = model.rope_scaling;
  if (rs.enabled() && rs.mscale_all_dim > 0) {
    const double m = yarn_mscale(rs.factor, rs.mscale_all_dim);
    scale *= m * m;
  }
  return scale;
}

}  // namespace moe4d
