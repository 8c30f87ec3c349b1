// model/attention_cached.cc — AttentionBlock::forward_cached: one decoding step of attention over a
// KV cache. Same math as forward (RMSNorm, fused q/k/v projection, RoPE rotating pairs (2i, 2i+1),
// softmax(q k^T / sqrt(head_dim)) over positions <= the token's, W_o, TP all-reduce, residual), but
// at absolute positions and over the cached keys and values instead of a full window.
#include "backend/backend.h"
#include "core/error.h"
#include "model/attention_block.h"
#include "model/block_matmul.h"
#include "model/param_store.h"

namespace moe4d {
namespace {
constexpr GemmLabels kQkvLabels{"attention input (attn_norm output)", "attention q/k/v projection"};
constexpr GemmLabels kOutLabels{"attention core output", "attention output"};
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
  Backend& backend = ctx.backend();
  float* rstd = ctx.scratch.alloc_f32(n);
  float* xn = ctx.scratch.alloc_f32(size_t(n) * d);
  float* qkv = ctx.scratch.alloc_f32(size_t(n) * lqkv);
  float* attn = ctx.scratch.alloc_f32(size_t(n) * ld);
  float* scores = ctx.scratch.alloc_f32(size_t(start + n));
  backend.rmsnorm_forward(xn, rstd, x_in, ctx.params.value(norm_id_), n, d, float(ctx.model.norm_eps));
  block_matmul_forward(ctx, {.labels = kQkvLabels, .weight_id = qkv_id_}, qkv, xn, n, d, lqkv);
  qk_norm_.forward(qkv, n, heads, kv, ctx.scratch, ctx);
  backend.rope_forward_at(qkv, ctx.rope, start, n, heads, kv);
  // The new tokens' keys and values into the cache: group-major columns (kernels/attention.h), so
  // KV head j of token t is row t * kv + j of pitch (group + 2) heads, at slot group (key) and group + 1.
  const size_t head_bytes = sizeof(float) * hd, qkv_pitch = head_bytes * (group + 2);
  backend.copy_rows(cache.keys(layer, start), head_bytes, qkv + size_t(group) * hd, qkv_pitch, head_bytes,
                    size_t(n) * kv);
  backend.copy_rows(cache.values(layer, start), head_bytes, qkv + size_t(group + 1) * hd, qkv_pitch, head_bytes,
                    size_t(n) * kv);
  backend.attention_decode(attn, scores, qkv, cache.keys(layer, 0), cache.values(layer, 0), n, start, heads, kv, hd);
  block_matmul_forward(ctx, {.labels = kOutLabels, .weight_id = out_id_}, x_out, attn, n, ld, d);
  if (ctx.pc.tp_size() > 1) ctx.pc.tp->all_reduce(x_out, size_t(n) * d);
  backend.axpy(x_out, x_in, 1.0f, int64_t(n) * d);
}

}  // namespace moe4d
