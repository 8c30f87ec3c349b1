// backend/cpu_backend.h — the host backend: today's OpenBLAS / oneDNN kernels of src/kernels behind
// the Backend interface, unchanged (every op forwards to the kernel of the same name).
//
// GEMMs: fp32 goes to OpenBLAS sgemm (moe4d::gemm); bf16 / fp16 to a PrecisionGemm of that type
// (oneDNN where it has an optimised kernel, else the rounded-operand sgemm; kernels/precision_gemm.h),
// made on first use with the GemmBackend choice given here. Not thread-safe (one per thread: the
// PrecisionGemm objects own conversion buffers).
#pragma once

#include <memory>

#include "backend/backend.h"
#include "kernels/precision_gemm.h"

namespace moe4d {

class CpuBackend final : public Backend {
 public:
  explicit CpuBackend(GemmBackend gemm_backend = GemmBackend::kAuto);
  ~CpuBackend() override;

  const char* name() const override { return "cpu"; }
  Device device() const override { return kHostDevice; }
  Allocator& allocator() override { return host_allocator(); }

  // The 16-bit GEMM of `type` (kBF16 / kF16), made on first use: which implementation runs.
  PrecisionGemm& precision_gemm(DType type);

  void fill(float* x, float value, int64_t n) override;
  void zero(void* x, size_t bytes) override;
  void copy(void* dst, const void* src, size_t bytes) override;
  void copy_rows(void* dst, size_t dst_pitch, const void* src, size_t src_pitch, size_t row_bytes,
                 size_t rows) override;
  void gemm(DType compute, bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a, int lda,
            const float* b, int ldb, float beta, float* c, int ldc, bool round_c) override;
  void grouped_gemm(DType compute, bool trans_b, int groups, const int* offsets, int n, int k, float alpha,
                    const float* a, int lda, const float* b, int64_t b_stride, int ldb, float beta, float* c, int ldc,
                    bool round_c) override;
  void round_to(DType type, const float* in, float* out, int64_t n) override;
  void to_half(DType type, const float* in, uint16_t* out, int64_t n) override;
  void from_half(DType type, const uint16_t* in, float* out, int64_t n) override;
  void axpy(float* y, const float* x, float alpha, int64_t n) override;
  void scale(float* x, float alpha, int64_t n) override;
  double sum_squares(const float* x, int64_t n) override;
  bool all_finite(const float* x, int64_t n) override;
  void rmsnorm_forward(float* out, float* rstd, const float* x, const float* w, int n, int d, float eps) override;
  void rmsnorm_backward(float* dx, float* dw, const float* dout, const float* x, const float* w, const float* rstd,
                        int n, int d) override;
  void rope_forward(float* qkv, const RopeTable& table, int batch, int heads, int kv_heads) override;
  void rope_backward(float* dqkv, const RopeTable& table, int batch, int heads, int kv_heads) override;
  void rope_forward_at(float* qkv, const RopeTable& table, int first, int tokens, int heads, int kv_heads) override;
  void attention_forward(float* out, float* probs, const float* qkv, int batch, int seq, int heads, int kv_heads,
                         int head_dim) override;
  void attention_backward(float* dqkv, float* scratch, const float* dout, const float* qkv, const float* probs,
                          int batch, int seq, int heads, int kv_heads, int head_dim) override;
  void attention_decode(float* out, float* scores, const float* qkv, const float* keys, const float* values, int tokens,
                        int start, int heads, int kv_heads, int head_dim) override;
  void swiglu_forward(float* g, const float* a, const float* b, int64_t n) override;
  void swiglu_backward(float* da, float* db, const float* dg, const float* a, const float* b, int64_t n) override;
  void router_forward(float* scores, float* lse, int* topk_idx, float* topk_w, const float* logits,
                      const float* select_bias, int tokens, int experts, int k, const RouterScoring& scoring) override;
  void router_expert_counts(int* counts, const int* topk_idx, int tokens, int experts, int k) override;
  float router_aux_loss(const float* scores, const RouterBalance& balance, int tokens, int experts, int k,
                        const RouterScoring& scoring) override;
  float router_z_loss(const float* lse, int tokens, int total_tokens) override;
  void router_backward(float* dlogits, const float* dtopk_w, const float* scores, const float* lse, const int* topk_idx,
                       const float* topk_w, const RouterBalance& balance, int tokens, int experts, int k, float aux_coef,
                       float z_coef, const RouterScoring& scoring, const float* logits, int total_tokens) override;
  int moe_route_plan(int* expert_offsets, int* row_slot, int* slot_row, int* scratch, const int* topk_idx,
                     const float* topk_w, int tokens, int experts, int k, int capacity) override;
  void moe_permute_forward(float* xp, const float* x, const int* row_slot, int rows, int k, int d) override;
  void moe_permute_backward(float* dx, const float* dxp, const int* row_slot, int rows, int k, int d) override;
  void moe_unpermute_forward(float* out, const float* y, const int* slot_row, const float* topk_w, int tokens, int k,
                             int d) override;
  void moe_unpermute_backward(float* dy, float* dtopk_w, const float* dout, const float* y, const int* slot_row,
                              const float* topk_w, int tokens, int k, int d) override;
  void embedding_forward(float* out, const float* table, const int* tokens, int n, int d, int v0,
                         int vocab_local) override;
  void embedding_backward(float* dtable, const float* dout, const int* tokens, int n, int d, int v0,
                          int vocab_local) override;
  void ce_row_max(float* m, const float* logits, int tokens, int vocab_local) override;
  void ce_row_sumexp(float* s, const float* logits, const float* m, int tokens, int vocab_local) override;
  void ce_target_logit(float* tl, const float* logits, const int* targets, int tokens, int vocab_local,
                       int v0) override;
  void ce_loss(float* loss, const float* m, const float* s, const float* tl, int tokens) override;
  void ce_backward(float* dlogits, const float* logits, const float* m, const float* s, const int* targets,
                   float dloss_per_token, int tokens, int vocab_local, int v0) override;
  void adamw_update(float* param, const float* grad, float* m, float* v, int64_t n, const AdamWStep& step) override;
  void onebit_compress(const float* x, size_t n, size_t chunk, float* error, uint8_t* block) override;
  void onebit_decompress(const uint8_t* block, size_t n, float weight, float* out, bool accumulate) override;
  void momentum_update(float* m, const float* grad, float beta1, float coef, size_t n) override;
  void onebit_adam_update(float* param, const float* m, const float* v, size_t n, float lr, float inv_bc1,
                          float inv_bc2, float eps, float decay) override;

 private:
  GemmBackend gemm_backend_;
  std::unique_ptr<PrecisionGemm> gemm_[3];  // by compute type: fp32 (only under kOneDnn), bf16, fp16
};

// This thread's CpuBackend (kAuto GEMMs), for code that is handed no backend: tools and tests that
// build a BlockContext by hand (model/block_context.h).
CpuBackend& thread_cpu_backend();

}  // namespace moe4d
