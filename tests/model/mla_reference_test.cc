// MlaBlock's forward against a plain-loop implementation of Hugging Face's DeepseekV3Attention
// written from modeling_deepseek_v3.py and rope_utils' _compute_yarn_parameters (not from moe4d's
// code): q_b(RMSNorm(q_a(x))), kv_a_proj_with_mqa's split into the latent and the rotary key,
// kv_b(RMSNorm(latent)) split per head into k_nope and v, RoPE of rope_interleave (the rotary
// part's pairs de-interleaved into halves, then rotate_half) with YaRN frequencies and attention
// factor, softmax scale qk_head_dim^-0.5 x mscale(factor, mscale_all_dim)^2, causal mask, o_proj.
// In double precision; weights as moe4d stores them ([in, out], the transpose of nn.Linear's).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numbers>
#include <vector>

#include "model/mla_block.h"
#include "model/param_store.h"
#include "model/rope_scaling.h"

namespace moe4d {
namespace {

using Matrix = std::vector<double>;  // row-major

Matrix matmul(const Matrix& a, const float* w, int rows, int in, int out) {
  Matrix c(size_t(rows) * out, 0.0);
  for (int r = 0; r < rows; ++r)
    for (int k = 0; k < in; ++k)
      for (int j = 0; j < out; ++j) c[size_t(r) * out + j] += a[size_t(r) * in + k] * w[size_t(k) * out + j];
  return c;
}

Matrix rms_norm(const Matrix& x, const float* w, int rows, int d, double eps) {
  Matrix y(x.size());
  for (int r = 0; r < rows; ++r) {
    double ss = 0;
    for (int i = 0; i < d; ++i) ss += x[size_t(r) * d + i] * x[size_t(r) * d + i];
    const double inv = 1.0 / std::sqrt(ss / d + eps);
    for (int i = 0; i < d; ++i) y[size_t(r) * d + i] = x[size_t(r) * d + i] * inv * w[i];
  }
  return y;
}

double get_mscale(double scale, double mscale) { return scale <= 1 ? 1.0 : 0.1 * mscale * std::log(scale) + 1.0; }

// rope_utils._compute_yarn_parameters with dim = qk_rope_head_dim.
std::vector<double> yarn_inv_freq(const RopeScaling& rs, double base, int dim) {
  const auto correction = [&](double rotations) {
    return dim * std::log(rs.original_max_position_embeddings / (rotations * 2 * std::numbers::pi)) /
           (2 * std::log(base));
  };
  const double low = std::max(std::floor(correction(32)), 0.0);
  double high = std::min(std::ceil(correction(1)), double(dim - 1));
  if (low == high) high += 0.001;  // linear_ramp_factor's guard
  std::vector<double> inv(dim / 2);
  for (int i = 0; i < dim / 2; ++i) {
    const double pos = std::pow(base, 2.0 * i / dim);
    const double extrapolation_factor = 1 - std::clamp((i - low) / (high - low), 0.0, 1.0);
    inv[i] = 1 / (rs.factor * pos) * (1 - extrapolation_factor) + 1 / pos * extrapolation_factor;
  }
  return inv;
}

// apply_rotary_pos_emb_interleave on one rotary vector at position p.
std::vector<double> rope_interleave(const double* x, int dim, int p, const std::vector<double>& inv, double factor) {
  std::vector<double> h(dim), out(dim);
  for (int i = 0; i < dim / 2; ++i) {  // view(d/2, 2).transpose: evens, then odds
    h[i] = x[2 * i];
    h[dim / 2 + i] = x[2 * i + 1];
  }
  for (int i = 0; i < dim; ++i) {
    const double angle = p * inv[i % (dim / 2)];
    const double rotated = i < dim / 2 ? -h[i + dim / 2] : h[i - dim / 2];  // rotate_half
    out[i] = h[i] * std::cos(angle) * factor + rotated * std::sin(angle) * factor;
  }
  return out;
}

TEST(MlaReference, ForwardMatchesHuggingFaceSemantics) {
  ModelConfig m;
  m.vocab_size = 16;
  m.hidden_size = 24;
  m.num_layers = 1;
  m.num_heads = 3;
  m.ffn_hidden_size = 8;
  m.seq_length = 12;
  m.norm_eps = 1e-6;
  m.rope_theta = 500;
  m.mla = {.q_lora_rank = 10, .kv_lora_rank = 8, .qk_nope_head_dim = 6, .qk_rope_head_dim = 8, .v_head_dim = 5};
  // Rotary pairs 0 .. 3: the correction range of 64 positions is pairs 0 .. 2, so all three regimes occur.
  m.rope_scaling = {.factor = 4, .original_max_position_embeddings = 64, .mscale = 0.7, .mscale_all_dim = 0.9};
  const int T = m.seq_length, d = m.hidden_size, H = m.num_heads, nope = 6, rope = 8, v = 5, qk = nope + rope;
  const int ql = 10, kvl = 8;
  auto pc = make_single_rank_context();
  ParamStore params;
  const MlaBlock block(0, m, *pc, params);
  params.finalize();
  params.init_values(5);
  const auto w = [&](const char* name) { return params.value(params.find(std::string("layers.0.") + name)); };
  for (const char* norm : {"attn_norm.weight", "attn.q_a_norm.weight", "attn.kv_a_norm.weight"}) {
    const int id = params.find(std::string("layers.0.") + norm);
    for (int64_t i = 0; i < params.info(id).numel(); ++i) params.value(id)[i] = 0.6f + 0.05f * float(i % 9);
  }
  // Scores of order 1 (not the near-uniform softmax of 0.02-std weights), so that RoPE and the scale matter.
  for (const char* name : {"attn.q_b.weight", "attn.kv_b.weight", "attn.out.weight"}) {
    const int id = params.find(std::string("layers.0.") + name);
    for (int64_t i = 0; i < params.info(id).numel(); ++i) params.value(id)[i] *= 25.0f;
  }
  std::vector<float> x(size_t(T) * d), y(size_t(T) * d);
  for (size_t i = 0; i < x.size(); ++i) x[i] = float(std::sin(0.37 * double(i) + 0.1));

  const RopeTable table = make_rope_table(m);
  Arena saved, scratch;
  BlockContext ctx{*pc, params, m, table, saved, scratch, 1, T, 1.0f, RecomputeGranularity::kNone, nullptr};
  block.forward(x.data(), y.data(), ctx);

  // The reference.
  const Matrix xd(x.begin(), x.end());
  const Matrix xn = rms_norm(xd, w("attn_norm.weight"), T, d, m.norm_eps);
  const Matrix q = matmul(rms_norm(matmul(xn, w("attn.q_a.weight"), T, d, ql), w("attn.q_a_norm.weight"), T, ql, 1e-6),
                          w("attn.q_b.weight"), T, ql, H * qk);
  const Matrix kva = matmul(xn, w("attn.kv_a.weight"), T, d, kvl + rope);
  Matrix latent(size_t(T) * kvl);
  for (int t = 0; t < T; ++t)
    for (int i = 0; i < kvl; ++i) latent[size_t(t) * kvl + i] = kva[size_t(t) * (kvl + rope) + i];
  const Matrix kv = matmul(rms_norm(latent, w("attn.kv_a_norm.weight"), T, kvl, 1e-6), w("attn.kv_b.weight"), T, kvl,
                           H * (nope + v));
  const RopeScaling& rs = m.rope_scaling;
  const std::vector<double> inv = yarn_inv_freq(rs, m.rope_theta, rope);
  const double factor = get_mscale(rs.factor, rs.mscale) / get_mscale(rs.factor, rs.mscale_all_dim);
  const double mscale = get_mscale(rs.factor, rs.mscale_all_dim);
  const double scaling = std::pow(double(qk), -0.5) * mscale * mscale;
  Matrix attn(size_t(T) * H * v, 0.0);
  for (int h = 0; h < H; ++h)
    for (int t = 0; t < T; ++t) {
      const double* qt = &q[(size_t(t) * H + h) * qk];
      const std::vector<double> q_rot = rope_interleave(qt + nope, rope, t, inv, factor);
      std::vector<double> scores(t + 1);
      for (int p = 0; p <= t; ++p) {
        const double* kp = &kv[(size_t(p) * H + h) * (nope + v)];
        const std::vector<double> k_rot = rope_interleave(&kva[size_t(p) * (kvl + rope) + kvl], rope, p, inv, factor);
        double s = 0;
        for (int i = 0; i < nope; ++i) s += qt[i] * kp[i];
        for (int i = 0; i < rope; ++i) s += q_rot[i] * k_rot[i];
        scores[p] = s * scaling;
      }
      const double top = *std::max_element(scores.begin(), scores.end());
      double sum = 0;
      for (double& s : scores) sum += (s = std::exp(s - top));
      for (int p = 0; p <= t; ++p)
        for (int i = 0; i < v; ++i)
          attn[(size_t(t) * H + h) * v + i] += scores[p] / sum * kv[(size_t(p) * H + h) * (nope + v) + nope + i];
    }
  const Matrix out = matmul(attn, w("attn.out.weight"), T, H * v, d);
  double worst = 0, largest = 0;
  for (size_t i = 0; i < y.size(); ++i) {
    worst = std::max(worst, std::abs(double(y[i]) - (xd[i] + out[i])));
    largest = std::max(largest, std::abs(out[i]));
  }
  EXPECT_GT(largest, 1e-3) << "the attention output should not vanish";
  EXPECT_LT(worst, 2e-6 * std::max(1.0, largest)) << "largest attention output " << largest;
}

}  // namespace
}  // namespace moe4d
