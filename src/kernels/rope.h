// kernels/rope.h — rotary position embedding (theta = model.rope_theta, default 10000, rotating pairs
// (2i, 2i+1)).
//
// For a head vector v at position p: (v[2i], v[2i+1]) is rotated by angle p * theta^(-2i/head_dim).
// The activations use the grouped attention layout qkv[token, group, {q_0..q_{g-1}, k, v}, head_dim]
// (see attention.h); RoPE rotates every query and key head in place and leaves v alone. Token t of a [batch, seq] block
// has position t % seq.
#pragma once

#include <vector>

namespace moe4d {

// cos/sin of every (position, pair), computed once per model.
struct RopeTable {
  RopeTable(int seq, int head_dim, float theta = 10000.0f);
  // Pair i turns by p * inv_freq[i] (head_dim = 2 inv_freq.size()), cos and sin scaled by
  // attention_factor (YaRN's, model/rope_scaling.h).
  RopeTable(int seq, const std::vector<double>& inv_freq, double attention_factor);
  int seq;
  int head_dim;
  std::vector<float> cos;  // [seq, head_dim / 2]
  std::vector<float> sin;  // [seq, head_dim / 2]
};

// qkv: [batch * seq, kv_heads, heads / kv_heads + 2, head_dim]; rotates q and k in place.
void rope_forward(float* qkv, const RopeTable& table, int batch, int heads, int kv_heads);

// qkv: [tokens, kv_heads, heads / kv_heads + 2, head_dim] at the consecutive positions first, first + 1,
// ... (a decoding step's new tokens; first + tokens <= table.seq); rotates q and k in place.
void rope_forward_at(float* qkv, const RopeTable& table, int first, int tokens, int heads, int kv_heads);

// dqkv: same layout; applies the inverse rotation to dq and dk in place (the transpose of forward).
void rope_backward(float* dqkv, const RopeTable& table, int batch, int heads, int kv_heads);

}  // namespace moe4d
