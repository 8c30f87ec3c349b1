// backend/cpu_backend.cc — the host backend: forwards to the kernels of src/kernels.
#include "backend/cpu_backend.h"

#include <cstring>

#include "core/check.h"
#include "kernels/attention.h"
#include "kernels/cross_entropy.h"
#include "kernels/embedding.h"
#include "kernels/gemm.h"
#include "kernels/moe_dispatch.h"
#include "kernels/onebit_kernels.h"
#include "kernels/precision.h"
#include "kernels/rmsnorm.h"
#include "kernels/swiglu.h"

namespace moe4d {

CpuBackend::CpuBackend(GemmBackend gemm_backend) : gemm_backend_(gemm_backend) {}
CpuBackend::~CpuBackend() = default;

CpuBackend& thread_cpu_backend() {
  thread_local CpuBackend backend;
  return backend;
}

PrecisionGemm& CpuBackend::precision_gemm(DType type) {
  const int slot = type == DType::kF32 ? 0 : type == DType::kBF16 ? 1 : 2;
  MOE4D_CHECK_MSG(type == DType::kF32 || is_half_precision(type), "GEMM compute type {}", dtype_name(type));
  if (!gemm_[slot]) gemm_[slot] = std::make_unique<PrecisionGemm>(type, gemm_backend_);
  return *gemm_[slot];
}

void CpuBackend::fill(float* x, float value, int64_t n) { std::fill(x, x + n, value); }

void CpuBackend::zero(void* x, size_t bytes) {
  if (bytes > 0) std::memset(x, 0, bytes);
}

void CpuBackend::copy(void* dst, const void* src, size_t bytes) {
  if (bytes > 0 && dst != src) std::memmove(dst, src, bytes);
}

void CpuBackend::copy_rows(void* dst, size_t dst_pitch, const void* src, size_t src_pitch, size_t row_bytes,
                           size_t rows) {
  for (size_t r = 0; r < rows; ++r)
    std::memcpy(static_cast<char*>(dst) + r * dst_pitch, static_cast<const char*>(src) + r * src_pitch, row_bytes);
}

void CpuBackend::gemm(DType compute, bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a,
                      int lda, const float* b, int ldb, float beta, float* c, int ldc, bool round_c) {
  if (compute == DType::kF32 && gemm_backend_ != GemmBackend::kOneDnn)
    ::moe4d::gemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  else
    precision_gemm(compute).gemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, round_c);
}

void CpuBackend::grouped_gemm(DType compute, bool trans_b, int groups, const int* offsets, int n, int k, float alpha,
                              const float* a, int lda, const float* b, int64_t b_stride, int ldb, float beta, float* c,
                              int ldc, bool round_c) {
  for (int g = 0; g < groups; ++g) {
    const int rows = offsets[g + 1] - offsets[g];
    if (rows == 0) continue;
    gemm(compute, false, trans_b, rows, n, k, alpha, a + int64_t(offsets[g]) * lda, lda, b + g * b_stride, ldb, beta,
         c + int64_t(offsets[g]) * ldc, ldc, round_c);
  }
}

void CpuBackend::round_to(DType type, const float* in, float* out, int64_t n) {
  if (type == DType::kF32)
    copy(out, in, size_t(n) * sizeof(float));
  else
    round_to_precision(type, in, out, n);
}

void CpuBackend::to_half(DType type, const float* in, uint16_t* out, int64_t n) {
  convert_matrix_to_half(type, in, 1, n, n, out);
}

void CpuBackend::from_half(DType type, const uint16_t* in, float* out, int64_t n) {
  MOE4D_CHECK(is_half_precision(type));
  if (type == DType::kBF16)
    for (int64_t i = 0; i < n; ++i) out[i] = float_from_bf16_bits(in[i]);
  else
    for (int64_t i = 0; i < n; ++i) out[i] = float_from_fp16_bits(in[i]);
}

void CpuBackend::scale(float* x, float alpha, int64_t n) { scale_inplace(x, alpha, n); }

void CpuBackend::axpy(float* y, const float* x, float alpha, int64_t n) { ::moe4d::axpy(y, x, alpha, n); }

double CpuBackend::sum_squares(const float* x, int64_t n) { return ::moe4d::sum_squares(x, n); }

bool CpuBackend::all_finite(const float* x, int64_t n) { return ::moe4d::all_finite(x, n); }

void CpuBackend::rmsnorm_forward(float* out, float* rstd, const float* x, const float* w, int n, int d, float eps) {
  ::moe4d::rmsnorm_forward(out, rstd, x, w, n, d, eps);
}

void CpuBackend::rmsnorm_backward(float* dx, float* dw, const float* dout, const float* x, const float* w,
                                  const float* rstd, int n, int d) {
  ::moe4d::rmsnorm_backward(dx, dw, dout, x, w, rstd, n, d);
}

void CpuBackend::rope_forward(float* qkv, const RopeTable& table, int batch, int heads, int kv_heads) {
  ::moe4d::rope_forward(qkv, table, batch, heads, kv_heads);
}

void CpuBackend::rope_backward(float* dqkv, const RopeTable& table, int batch, int heads, int kv_heads) {
  ::moe4d::rope_backward(dqkv, table, batch, heads, kv_heads);
}

void CpuBackend::rope_forward_at(float* qkv, const RopeTable& table, int first, int tokens, int heads, int kv_heads) {
  ::moe4d::rope_forward_at(qkv, table, first, tokens, heads, kv_heads);
}

void CpuBackend::attention_forward(float* out, float* probs, const float* qkv, int batch, int seq, int heads,
                                   int kv_heads, int head_dim) {
  ::moe4d::attention_forward(out, probs, qkv, batch, seq, heads, kv_heads, head_dim);
}

void CpuBackend::attention_backward(float* dqkv, float* scratch, const float* dout, const float* qkv,
                                    const float* probs, int batch, int seq, int heads, int kv_heads, int head_dim) {
  ::moe4d::attention_backward(dqkv, scratch, dout, qkv, probs, batch, seq, heads, kv_heads, head_dim);
}

void CpuBackend::attention_decode(float* out, float* scores, const float* qkv, const float* keys, const float* values,
                                  int tokens, int start, int heads, int kv_heads, int head_dim) {
  ::moe4d::attention_decode(out, scores, qkv, keys, values, tokens, start, heads, kv_heads, head_dim);
}

void CpuBackend::swiglu_forward(float* g, const float* a, const float* b, int64_t n) {
  ::moe4d::swiglu_forward(g, a, b, n);
}

void CpuBackend::swiglu_backward(float* da, float* db, const float* dg, const float* a, const float* b, int64_t n) {
  ::moe4d::swiglu_backward(da, db, dg, a, b, n);
}

void CpuBackend::router_forward(float* scores, float* lse, int* topk_idx, float* topk_w, const float* logits,
                                const float* select_bias, int tokens, int experts, int k,
                                const RouterScoring& scoring) {
  ::moe4d::router_forward(scores, lse, topk_idx, topk_w, logits, select_bias, tokens, experts, k, scoring);
}

void CpuBackend::router_expert_counts(int* counts, const int* topk_idx, int tokens, int experts, int k) {
  ::moe4d::router_expert_counts(counts, topk_idx, tokens, experts, k);
}

float CpuBackend::router_aux_loss(const float* scores, const RouterBalance& balance, int tokens, int experts, int k,
                                  const RouterScoring& scoring) {
  return ::moe4d::router_aux_loss(scores, balance, tokens, experts, k, scoring);
}

float CpuBackend::router_z_loss(const float* lse, int tokens, int total_tokens) {
  return ::moe4d::router_z_loss(lse, tokens, total_tokens);
}

void CpuBackend::router_backward(float* dlogits, const float* dtopk_w, const float* scores, const float* lse,
                                 const int* topk_idx, const float* topk_w, const RouterBalance& balance, int tokens, int experts,
                                 int k, float aux_coef, float z_coef, const RouterScoring& scoring, const float* logits,
                                 int total_tokens) {
  ::moe4d::router_backward(dlogits, dtopk_w, scores, lse, topk_idx, topk_w, balance, tokens, experts, k, aux_coef,
                           z_coef, scoring, logits, total_tokens);
}

int CpuBackend::moe_route_plan(int* expert_offsets, int* row_slot, int* slot_row, int* scratch, const int* topk_idx,
                               const float* topk_w, int tokens, int experts, int k, int capacity) {
  return ::moe4d::moe_route_plan(expert_offsets, row_slot, slot_row, scratch, topk_idx, topk_w, tokens, experts, k,
                                 capacity);
}

void CpuBackend::moe_permute_forward(float* xp, const float* x, const int* row_slot, int rows, int k, int d) {
  ::moe4d::moe_permute_forward(xp, x, row_slot, rows, k, d);
}

void CpuBackend::moe_permute_backward(float* dx, const float* dxp, const int* row_slot, int rows, int k, int d) {
  ::moe4d::moe_permute_backward(dx, dxp, row_slot, rows, k, d);
}

void CpuBackend::moe_unpermute_forward(float* out, const float* y, const int* slot_row, const float* topk_w, int tokens,
                                       int k, int d) {
  ::moe4d::moe_unpermute_forward(out, y, slot_row, topk_w, tokens, k, d);
}

void CpuBackend::moe_unpermute_backward(float* dy, float* dtopk_w, const float* dout, const float* y,
                                        const int* slot_row, const float* topk_w, int tokens, int k, int d) {
  ::moe4d::moe_unpermute_backward(dy, dtopk_w, dout, y, slot_row, topk_w, tokens, k, d);
}

void CpuBackend::embedding_forward(float* out, const float* table, const int* tokens, int n, int d, int v0,
                                   int vocab_local) {
  ::moe4d::embedding_forward(out, table, tokens, n, d, v0, vocab_local);
}

void CpuBackend::embedding_backward(float* dtable, const float* dout, const int* tokens, int n, int d, int v0,
                                    int vocab_local) {
  ::moe4d::embedding_backward(dtable, dout, tokens, n, d, v0, vocab_local);
}

void CpuBackend::ce_row_max(float* m, const float* logits, int tokens, int vocab_local) {
  ::moe4d::ce_row_max(m, logits, tokens, vocab_local);
}

void CpuBackend::ce_row_sumexp(float* s, const float* logits, const float* m, int tokens, int vocab_local) {
  ::moe4d::ce_row_sumexp(s, logits, m, tokens, vocab_local);
}

void CpuBackend::ce_target_logit(float* tl, const float* logits, const int* targets, int tokens, int vocab_local,
                                 int v0) {
  ::moe4d::ce_target_logit(tl, logits, targets, tokens, vocab_local, v0);
}

void CpuBackend::ce_loss(float* loss, const float* m, const float* s, const float* tl, int tokens) {
  ::moe4d::ce_loss(loss, m, s, tl, tokens);
}

void CpuBackend::ce_backward(float* dlogits, const float* logits, const float* m, const float* s, const int* targets,
                             float dloss_per_token, int tokens, int vocab_local, int v0) {
  ::moe4d::ce_backward(dlogits, logits, m, s, targets, dloss_per_token, tokens, vocab_local, v0);
}

void CpuBackend::adamw_update(float* param, const float* grad, float* m, float* v, int64_t n, const AdamWStep& step) {
  ::moe4d::adamw_update(param, grad, m, v, n, step);
}

void CpuBackend::onebit_compress(const float* x, size_t n, size_t chunk, float* error, uint8_t* block) {
  ::moe4d::onebit_compress(x, n, chunk, error, block);
}

void CpuBackend::onebit_decompress(const uint8_t* block, size_t n, float weight, float* out, bool accumulate) {
  ::moe4d::onebit_decompress(block, n, weight, out, accumulate);
}

void CpuBackend::momentum_update(float* m, const float* grad, float beta1, float coef, size_t n) {
  ::moe4d::momentum_update(m, grad, beta1, coef, n);
}

void CpuBackend::onebit_adam_update(float* param, const float* m, const float* v, size_t n, float lr, float inv_bc1,
                                    float inv_bc2, float eps, float decay) {
  ::moe4d::onebit_adam_update(param, m, v, n, lr, inv_bc1, inv_bc2, eps, decay);
}

}  // namespace moe4d
