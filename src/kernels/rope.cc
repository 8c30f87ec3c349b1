// kernels/rope.cc — rotary position embedding applied in place to q and k of the qkv layout.
#include "kernels/rope.h"

#include <cmath>
#include <cstdint>

#include "core/check.h"

namespace moe4d {

RopeTable::RopeTable(int seq_in, int head_dim_in, float theta) : seq(seq_in), head_dim(head_dim_in) {
  MOE4D_CHECK_GT(seq, 0);
  MOE4D_CHECK_MSG(head_dim > 0 && head_dim % 2 == 0, "RoPE needs an even head_dim, got {}", head_dim);
  const int half = head_dim / 2;
  cos.resize(static_cast<size_t>(seq) * half);
  sin.resize(static_cast<size_t>(seq) * half);
  // Built once per model, in double so that angles at long positions keep full float accuracy.
  for (int p = 0; p < seq; ++p)
    for (int i = 0; i < half; ++i) {
      const double freq = std::pow(static_cast<double>(theta), -2.0 * i / head_dim);
      const double angle = p * freq;
      cos[static_cast<size_t>(p) * half + i] = static_cast<float>(std::cos(angle));
      sin[static_cast<size_t>(p) * half + i] = static_cast<float>(std::sin(angle));
    }
}

RopeTable::RopeTable(int seq_in, const std::vector<double>& inv_freq, double attention_factor)
    : seq(seq_in), head_dim(2 * static_cast<int>(inv_freq.size())) {
  MOE4D_CHECK(seq > 0 && !inv_freq.empty());
  const size_t half = inv_freq.size();
  cos.resize(static_cast<size_t>(seq) * half);
  sin.resize(static_cast<size_t>(seq) * half);
  for (int p = 0; p < seq; ++p)
    for (size_t i = 0; i < half; ++i) {
      const double angle = p * inv_freq[i];
      cos[static_cast<size_t>(p) * half + i] = static_cast<float>(std::cos(angle) * attention_factor);
      sin[static_cast<size_t>(p) * half + i] = static_cast<float>(std::sin(angle) * attention_factor);
    }
}

namespace {

// Rotates each pair (v[2i], v[2i+1]) of q and k of every head of every token by the angle of its
// position: `batch` sequences of `seq` tokens at positions first .. first + seq - 1; `sign` = -1
// rotates backwards (the transpose, used by the backward pass).
void rope_apply(float* qkv, const RopeTable& table, int batch, int seq, int first, int heads, int kv_heads,
                float sign) {
  MOE4D_CHECK(kv_heads > 0 && heads % kv_heads == 0);
  MOE4D_CHECK(first >= 0 && first + seq <= table.seq);
  const int hd = table.head_dim;
  const int half = hd / 2;
  const int g = heads / kv_heads;
  const int64_t row_stride = static_cast<int64_t>(heads + 2 * kv_heads) * hd;
  for (int b = 0; b < batch; ++b)
    for (int t = 0; t < seq; ++t) {
      const int p = first + t;
      float* row = qkv + (static_cast<int64_t>(b) * seq + t) * row_stride;
      const float* c = table.cos.data() + static_cast<int64_t>(p) * half;
      const float* s = table.sin.data() + static_cast<int64_t>(p) * half;
      for (int group = 0; group < kv_heads; ++group)
        for (int slot = 0; slot <= g; ++slot) {  // the g query heads, then k; v is not rotated
          float* v = row + (static_cast<int64_t>(group) * (g + 2) + slot) * hd;
          for (int i = 0; i < half; ++i) {
            const float x0 = v[2 * i], x1 = v[2 * i + 1];
            const float si = sign * s[i];
            v[2 * i] = x0 * c[i] - x1 * si;
            v[2 * i + 1] = x0 * si + x1 * c[i];
          }
        }
    }
}

}  // namespace

void rope_forward(float* qkv, const RopeTable& table, int batch, int heads, int kv_heads) {
  rope_apply(qkv, table, batch, table.seq, 0, heads, kv_heads, 1.0f);
}

void rope_forward_at(float* qkv, const RopeTable& table, int first, int tokens, int heads, int kv_heads) {
  rope_apply(qkv, table, 1, tokens, first, heads, kv_heads, 1.0f);
}

void rope_backward(float* dqkv, const RopeTable& table, int batch, int heads, int kv_heads) {
  rope_apply(dqkv, table, batch, table.seq, 0, heads, kv_heads, -1.0f);
}

}  // namespace moe4d
