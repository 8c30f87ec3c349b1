// model/mla_cached.cc — MlaBlock::forward_cached: one decoding step of multi-head latent attention
// over a latent KV cache, in DeepSeek's absorbed form.
//
// The cache keeps, per position, the normalised latent c (kv_lora_rank) and the rotated key kr
// (qk_rope_head_dim), shared by every head, instead of each head's key (nope + rope) and value (v).
// With W_uk_h, W_uv_h head h's key and value columns of kv_b, q_nope . (c W_uk_h) = (q_nope W_uk_h^T) . c
// and sum_p P_p (c_p W_uv_h) = (sum_p P_p c_p) W_uv_h, so attention runs as multi-query attention
// over the cache rows [c, kr] (the same rows serve as keys and values) with the query
// [q_nope W_uk_h^T, RoPE(q_rope)], and W_uv_h maps the attended latent to the head's output.
#include <cmath>

#include "backend/backend.h"
#include "core/error.h"
#include "model/block_matmul.h"
#include "model/mla_block.h"
#include "model/param_store.h"

namespace moe4d {

void MlaBlock::forward_cached(const float* x_in, float* x_out, KvCache& cache, int layer, BlockContext& ctx) const {
  const int n = ctx.tokens(), d = hidden_, lh = local_heads_, qk = nope_ + rope_, kvb_w = nope_ + v_;
  const int row = kv_lora_ + rope_;  // a cache row and the width of the absorbed heads
  const int start = cache.length;
  if (start + n > cache.capacity || start + n > ctx.rope.seq)
    fail("decoding position {} is beyond the model's seq_length {} (its KV cache and RoPE table)", start + n - 1,
         cache.capacity);
  MOE4D_CHECK(cache.heads == 1 && cache.head_dim == row);
  Backend& be = ctx.backend();
  const auto f = [&](size_t count) { return ctx.scratch.alloc_f32(count); };
  float *rstd = f(n), *xn = f(size_t(n) * d), *q = f(size_t(n) * lh * qk);
  float *qa = f(size_t(n) * q_lora_), *qa_rstd = f(n), *qan = f(size_t(n) * q_lora_);
  float *kva = f(size_t(n) * row), *c = f(size_t(n) * kv_lora_), *c_rstd = f(n), *cn = f(size_t(n) * kv_lora_);
  float *pe = f(size_t(n) * (lh + 2) * rope_), *qlat = f(size_t(n) * (lh + 2) * row);
  float *lat = f(size_t(n) * lh * row), *o = f(size_t(n) * lh * v_), *scores = f(size_t(start + n));
  {
    const ValueUse w(ctx, norm_id_);
    be.rmsnorm_forward(xn, rstd, x_in, w.data(), n, d, float(ctx.model.norm_eps));
  }
  project_q(xn, q, qa, qa_rstd, qan, n, ctx);
  block_matmul_forward(ctx, {.labels = {"attention input (attn_norm output)", "mla kv down-projection"},
                             .weight_id = kv_a_id_},
                       kva, xn, n, d, row);
  norm_latent(kva, c, c_rstd, cn, n, ctx);
  gather_rotary(pe, q, kva, n, ctx);
  be.rope_forward_at(pe, ctx.rope, start, n, lh, 1);
  const size_t pe_pitch = sizeof(float) * (lh + 2) * rope_, rope_bytes = sizeof(float) * rope_;
  const size_t row_bytes = sizeof(float) * row, lat_bytes = sizeof(float) * kv_lora_;
  be.copy_rows(cache.keys(layer, start), row_bytes, cn, lat_bytes, lat_bytes, n);
  be.copy_rows(cache.keys(layer, start) + kv_lora_, row_bytes, pe + lh * rope_, pe_pitch, rope_bytes, n);

  const ValueUse kv_b(ctx, kv_b_id_);
  const float* w = kv_b.data();  // [kv_lora, lh (nope + v)]
  const DType type = ctx.numerics.compute;
  const double head_scale = std::sqrt(double(row));  // the decode kernel divides by sqrt(row)
  be.zero(qlat, sizeof(float) * n * (lh + 2) * row);
  for (int h = 0; h < lh; ++h) {
    // qlat_h = [q_nope_h W_uk_h^T, RoPE(q_rope_h)], scaled so that the kernel's scores are MLA's.
    be.gemm(type, false, true, n, kv_lora_, nope_, 1.0f, q + h * qk, lh * qk, w + h * kvb_w, lh * kvb_w, 0.0f,
            qlat + h * row, (lh + 2) * row, false);
    be.copy_rows(qlat + h * row + kv_lora_, sizeof(float) * (lh + 2) * row, pe + h * rope_, pe_pitch, rope_bytes, n);
  }
  be.scale(qlat, float(softmax_scale_ * head_scale), int64_t(n) * (lh + 2) * row);
  be.attention_decode(lat, scores, qlat, cache.keys(layer, 0), cache.keys(layer, 0), n, start, lh, 1, row);
  for (int h = 0; h < lh; ++h)  // o_h = (attended latent) W_uv_h; the attended rotary keys are dropped
    be.gemm(type, false, false, n, v_, kv_lora_, 1.0f, lat + h * row, lh * row, w + h * kvb_w + nope_, lh * kvb_w,
            0.0f, o + h * v_, lh * v_, false);
  block_matmul_forward(ctx, {.labels = {"attention core output", "attention output"}, .weight_id = out_id_}, x_out, o,
                       n, lh * v_, d);
  if (ctx.pc.tp_size() > 1) ctx.pc.tp->all_reduce(x_out, size_t(n) * d);
  be.axpy(x_out, x_in, 1.0f, int64_t(n) * d);
}

}  // namespace moe4d
