// model/attention_cached.cc — AttentionBlock::forward_cached: one decoding step of attention over a
// KV cache. Same math as forward (RMSNorm, fused q/k/v projection, RoPE rotating pairs (2i, 2i+1),
// softmax(q k^T / sqrt(head_dim)) over positions <= the token's, W_o, TP all-reduce, residual), but
// at absolute positions and over the cached keys and values instead of a full window.
#include <cmath>
#include <cstring>

#include "core/error.h"
#include "kernels/optimizer_kernels.h"
#include "kernels/rmsnorm.h"
#include "kernels/rope.h"
#include "model/attention_block.h"
#include "model/block_matmul.h"
#include "model/param_store.h"

namespace moe4d {
namespace {
constexpr GemmLabels kQkvLabels{"attention input (attn_norm output)", "attention q/k/v projection"};
constexpr GemmLabels kOutLabels{"attention core output", "attention output"};

// Rotates pairs (v[2i], v[2i+1]) by the angles of `position` (kernels/rope.cc's rotation).
void rotate(float* v, const RopeTable& table, int position) {
  const int half = table.head_dim / 2;
  const float* c = table.cos.data() + size_t(position) * half;
  const float* s = table.sin.data() + size_t(position) * half;
  for (int i = 0; i < half; ++i) {
    const float x0 = v[2 * i], x1 = v[2 * i + 1];
    v[2 * i] = x0 * c[i] - x1 * s[i];
    v[2 * i + 1] = x0 * s[i] + x1 * c[i];
  }
}
}  // namespace

void AttentionBlock::forward_cached(const float* x_in, float* x_out, KvCache& cache, int layer,
                                    BlockContext& ctx) const {
  const int n = ctx.tokens(), d = hidden_, hd = head_dim_, heads = local_heads_, kv = local_kv_heads_;
  const int group = heads / kv;                  // query heads per KV head
  const int ld = heads * hd, lqkv = (heads + 2 * kv) * hd;
  const int start = cache.length;
  if (start + n > cache.capacity || start + n > ctx.rope.seq)
    fail("decoding position {} is beyond the model's seq_length {} (its KV cache and RoPE table)", start + n - 1,
         cache.capacity);
  MOE4D_CHECK(cache.heads == kv && cache.head_dim == hd);
  float* rstd = ctx.scratch.alloc_f32(n);
  float* xn = ctx.scratch.alloc_f32(size_t(n) * d);
  float* qkv = ctx.scratch.alloc_f32(size_t(n) * lqkv);
  float* attn = ctx.scratch.alloc_f32(size_t(n) * ld);
  float* scores = ctx.scratch.alloc_f32(size_t(start + n));
  rmsnorm_forward(xn, rstd, x_in, ctx.params.value(norm_id_), n, d, float(ctx.model.norm_eps));
  block_matmul_forward(ctx, {.labels = kQkvLabels, .weight_id = qkv_id_}, qkv, xn, n, d, lqkv);
  // Group-major columns (kernels/attention.h): per KV head j, its `group` query heads, key, value.
  const auto head_of = [&](int t, int j, int slot) { return qkv + size_t(t) * lqkv + (size_t(j) * (group + 2) + slot) * hd; };
  for (int t = 0; t < n; ++t) {
    const int position = start + t;
    for (int j = 0; j < kv; ++j) {
      for (int slot = 0; slot <= group; ++slot) rotate(head_of(t, j, slot), ctx.rope, position);  // queries, key
      std::memcpy(cache.keys(layer, position) + size_t(j) * hd, head_of(t, j, group), sizeof(float) * hd);
      std::memcpy(cache.values(layer, position) + size_t(j) * hd, head_of(t, j, group + 1), sizeof(float) * hd);
    }
  }
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  for (int t = 0; t < n; ++t) {
    const int last = start + t;  // causal: positions 0..last
    for (int h = 0; h < heads; ++h) {
      const int j = h / group;
      const float* q = head_of(t, j, h % group);
      float top = -INFINITY;
      for (int p = 0; p <= last; ++p) {
        const float* k = cache.keys(layer, p) + size_t(j) * hd;
        float dot = 0.0f;
        for (int i = 0; i < hd; ++i) dot += q[i] * k[i];
        scores[p] = dot * scale;
        top = std::max(top, scores[p]);
      }
      float sum = 0.0f;
      for (int p = 0; p <= last; ++p) {
        scores[p] = std::exp(scores[p] - top);
        sum += scores[p];
      }
      float* out = attn + size_t(t) * ld + size_t(h) * hd;
      std::memset(out, 0, sizeof(float) * hd);
      for (int p = 0; p <= last; ++p) {
        const float w = scores[p] / sum;
        const float* v = cache.values(layer, p) + size_t(j) * hd;
        for (int i = 0; i < hd; ++i) out[i] += w * v[i];
      }
    }
  }
  block_matmul_forward(ctx, {.labels = kOutLabels, .weight_id = out_id_}, x_out, attn, n, ld, d);
  if (ctx.pc.tp_size() > 1) ctx.pc.tp->all_reduce(x_out, size_t(n) * d);
  axpy(x_out, x_in, 1.0f, int64_t(n) * d);
}

}  // namespace moe4d
