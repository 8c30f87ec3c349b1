// tests/moe/moe_test_util.h — a stand-alone MoE block (one layer, its own parameters) driven
// forward and backward on fixed inputs, and a naive per-token reference of its forward pass
// (routing, GShard capacity, SwiGLU experts) computed in double precision.
#pragma once

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "core/rng.h"
#include "kernels/rope.h"
#include "model/moe_block.h"
#include "model/param_store.h"

namespace moe4d::test {

// A small MoE layer: d 32, ffn 48 (divisible by TP 2), 8 experts top-2 (divisible by EP 4).
inline ModelConfig moe_test_config() {
  ModelConfig m;
  m.vocab_size = 64;
  m.hidden_size = 32;
  m.num_layers = 1;
  m.num_heads = 4;
  m.ffn_hidden_size = 48;
  m.seq_length = 16;
  m.moe.num_experts = 8;
  m.moe.top_k = 2;
  m.moe.aux_loss_coeff = 0.01;
  m.moe.z_loss_coeff = 0.001;
  return m;
}

// n values of a standard-normal stream keyed by (what, replica), scaled.
inline std::vector<float> normal_values(uint64_t what, int replica, size_t n, float scale) {
  std::vector<float> v(n);
  const uint64_t key = hash_combine(what, uint64_t(replica));
  for (size_t i = 0; i < n; ++i) v[i] = scale * normal_at(key, i);
  return v;
}

// The input and the upstream gradient of data replica `replica`'s micro-batch.
struct MoeBatch {
  std::vector<float> x, dout;
};
inline MoeBatch moe_batch(const ModelConfig& m, int replica, int tokens) {
  const size_t n = size_t(tokens) * m.hidden_size;
  return {normal_values(101, replica, n, 1.0f), normal_values(202, replica, n, 0.1f)};
}

// One MoE layer (layer index 0) with its own parameters, initialised from `seed` so that every
// layout holds shards of the same global tensors.
struct MoeLayer {
  MoeLayer(const ModelConfig& config, ParallelContext& pc, uint64_t seed = 17)
      : model(config), pc(pc), rope(config.seq_length, config.head_dim()), block(0, model, pc, params) {
    params.finalize();
    params.init_values(seed);
    stats.push_back({.layer = 0, .tokens_per_expert = std::vector<double>(config.moe.num_experts, 0.0)});
  }

  // Forward and backward (if dx) of one micro-batch [batch * seq_length tokens]; gradients
  // accumulate. Returns the block output; dx receives the input gradient. recompute: kNone or
  // kSelective (full recompute is the Transformer's business: it re-runs forward itself).
  std::vector<float> run(const MoeBatch& in, int batch, std::vector<float>* dx, float grad_scale = 1.0f,
                         RecomputeGranularity recompute = RecomputeGranularity::kNone) {
    const size_t n = in.x.size();
    std::vector<float> out(n);
    BlockContext ctx{pc, params, model, rope, saved, scratch, batch, model.seq_length, grad_scale, recompute, &stats};
    void* s = block.forward(in.x.data(), out.data(), ctx);
    scratch.reset();
    if (dx) {
      dx->assign(n, 0.0f);
      block.backward(dx->data(), in.x.data(), s, ctx);
      scratch.reset();
    }
    saved.reset();
    return out;
  }

  int find(const std::string& suffix) const { return params.find("layers.0." + suffix); }
  void reset_stats() {
    stats[0] = {.layer = 0, .tokens_per_expert = std::vector<double>(model.moe.num_experts, 0.0)};
  }

  ModelConfig model;
  ParallelContext& pc;
  RopeTable rope;
  ParamStore params;
  MoeBlock block;
  Arena saved, scratch;
  std::vector<MoeLayerStats> stats;
};

// Naive reference of MoeBlock::forward on one micro-batch: out = x + sum over kept picks of
// weight * SwiGLU expert(RMSNorm(x)). Parameters are full (single-rank) tensors. Capacity per
// expert ceil(T * k / E * cf) over these tokens only, dropping the lowest weight first (ties: the
// later slot). *dropped receives the number of dropped slots.
struct NaiveMoe {
  const ModelConfig& m;
  const float* norm;    // [d]
  const float* router;  // [d, E]
  const float* w1;      // [E, d, f]
  const float* w3;      // [E, d, f]
  const float* w2;      // [E, f, d]
  const float* bias;    // [E] selection bias, or null

  std::vector<double> forward(const std::vector<float>& x, int* dropped) const {
    const int d = m.hidden_size, f = m.ffn_hidden_size, E = m.moe.num_experts, k = m.moe.top_k;
    const int T = static_cast<int>(x.size() / d);
    std::vector<double> xn(size_t(T) * d);
    std::vector<int> pick(size_t(T) * k);
    std::vector<double> weight(size_t(T) * k);
    for (int t = 0; t < T; ++t) {
      double ms = 0;
      for (int i = 0; i < d; ++i) ms += double(x[t * d + i]) * x[t * d + i];
      const double rstd = 1.0 / std::sqrt(ms / d + 1e-5);
      for (int i = 0; i < d; ++i) xn[t * d + i] = x[t * d + i] * rstd * norm[i];
      std::vector<double> p(E);
      for (int e = 0; e < E; ++e) {
        p[e] = 0;
        for (int i = 0; i < d; ++i) p[e] += xn[t * d + i] * router[i * E + e];
      }
      const double mx = *std::max_element(p.begin(), p.end());
      double sum = 0;
      for (double& v : p) sum += (v = std::exp(v - mx));
      for (double& v : p) v /= sum;
      std::vector<int> order(E);
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
        return p[a] + (bias ? bias[a] : 0.0) > p[b] + (bias ? bias[b] : 0.0);
      });
      double picked = 0;
      for (int j = 0; j < k; ++j) picked += p[order[j]];
      for (int j = 0; j < k; ++j) {
        pick[t * k + j] = order[j];
        weight[t * k + j] = p[order[j]] / picked;
      }
    }
    std::vector<bool> kept(size_t(T) * k, true);
    *dropped = 0;
    if (m.moe.capacity_factor) {
      const int cap = static_cast<int>(std::ceil(double(T) * k / E * *m.moe.capacity_factor));
      for (int e = 0; e < E; ++e) {
        std::vector<int> slots;
        for (int s = 0; s < T * k; ++s)
          if (pick[s] == e) slots.push_back(s);
        std::stable_sort(slots.begin(), slots.end(), [&](int a, int b) { return weight[a] > weight[b]; });
        for (size_t i = cap; i < slots.size(); ++i) {
          kept[slots[i]] = false;
          ++*dropped;
        }
      }
    }
    std::vector<double> out(x.begin(), x.end());
    std::vector<double> h(f);
    for (int s = 0; s < T * k; ++s) {
      if (!kept[s]) continue;
      const int t = s / k, e = pick[s];
      const float* a = w1 + size_t(e) * d * f;
      const float* b = w3 + size_t(e) * d * f;
      const float* c = w2 + size_t(e) * f * d;
      for (int j = 0; j < f; ++j) {
        double u = 0, v = 0;
        for (int i = 0; i < d; ++i) {
          u += xn[t * d + i] * a[i * f + j];
          v += xn[t * d + i] * b[i * f + j];
        }
        h[j] = u / (1.0 + std::exp(-u)) * v;
      }
      for (int i = 0; i < d; ++i) {
        double y = 0;
        for (int j = 0; j < f; ++j) y += h[j] * c[j * d + i];
        out[t * d + i] += weight[s] * y;
      }
    }
    return out;
  }
};

inline NaiveMoe naive_moe(const MoeLayer& single, const float* bias = nullptr) {
  const ParamStore& p = single.params;
  return {single.model,
          p.value(single.find("ffn_norm.weight")),
          p.value(single.find("moe.router.weight")),
          p.value(single.find("moe.experts.w1")),
          p.value(single.find("moe.experts.w3")),
          p.value(single.find("moe.experts.w2")),
          bias};
}

}  // namespace moe4d::test
