// backend/backend.h — the compute-backend seam: every kernel the model, the optimizer and the loss
// run, behind one small virtual interface (ggml's backend vtable, c10d's Backend).
//
// A Backend owns an Allocator for its device and runs kernels on pointers into that device's memory.
// src/model and src/train call kernels only through the Backend handed to them (BlockContext::
// backend), never the free functions of src/kernels, so a new device (CUDA, Ascend) is a new folder
// implementing this class plus its tests (docs/architecture.md). Two implementations exist:
//   CpuBackend       (backend/cpu_backend.h)       today's OpenBLAS / oneDNN kernels, unchanged;
//   ReferenceBackend (backend/reference_backend.h) plain loops with fp64 accumulation, the yardstick
//                                                  of the cross-backend op tests (tests/backend).
//
// Queues: ops are enqueued on the backend's current queue in call order (a CUDA stream, an Ascend
// stream); the CPU backends run each op at its call, so their queues are no-ops. Where the host
// must read data an op wrote (the MoE routing counts, the loss, the gradient norm), the caller
// calls synchronize() first. The ops that return a host value (sum_squares, all_finite, the router
// losses, moe_route_plan's row count) synchronise themselves.
//
// An op a backend does not implement throws moe4d::Error naming the backend and the op (the base
// class's default), so a partial backend fails loudly, never silently.
//
// Conventions: row-major, fp32 unless a type says otherwise, int32 indices, shapes in [] comments
// in elements; "overwritten" outputs are fully written, "+=" outputs accumulate.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "core/allocator.h"
#include "core/tensor.h"
#include "kernels/optimizer_kernels.h"
#include "kernels/rope.h"
#include "kernels/router.h"

namespace moe4d {

class Backend {
 public:
  virtual ~Backend() = default;

  virtual const char* name() const = 0;  // "cpu", "reference", ...
  virtual Device device() const = 0;
  virtual Allocator& allocator() = 0;

  // ---- queues and synchronisation ----
  void set_queue(Queue queue) { queue_ = queue; }
  Queue queue() const { return queue_; }
  // Waits for every op enqueued so far; afterwards the host may read what they wrote.
  virtual void synchronize() {}

  // ---- memory: fills and copies on the device ----
  // x[n] = value (overwritten).
  virtual void fill(float* x, float value, int64_t n);
  // bytes zero bytes at x.
  virtual void zero(void* x, size_t bytes);
  // dst[bytes] = src[bytes], both on this device (may overlap).
  virtual void copy(void* dst, const void* src, size_t bytes);
  // dst[r, 0:row_bytes] = src[r, 0:row_bytes] for r < rows, with byte pitches dst_pitch / src_pitch.
  virtual void copy_rows(void* dst, size_t dst_pitch, const void* src, size_t src_pitch, size_t row_bytes, size_t rows);

  // ---- GEMM (kernels/gemm.h, kernels/precision_gemm.h) ----
  // C[m, n] = alpha * op(A) @ op(B) + beta * C; op(A) [m, k], op(B) [k, n]; lda/ldb/ldc in elements.
  // compute kF32: fp32 operands; kBF16 / kF16: operands rounded to that type, fp32 products and sums,
  // and then, if round_c, the [m, n] block of C rounded to that type. beta == 0 overwrites C.
  virtual void gemm(DType compute, bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a,
                    int lda, const float* b, int ldb, float beta, float* c, int ldc, bool round_c);
  // Grouped GEMM: for each group g < groups, rows [offsets[g], offsets[g+1]) of A [*, k] (lda) and
  // C [*, n] (ldc) against B_g = b + g * b_stride, op(B_g) [k, n]:
  //   C[rows_g, n] = alpha * A[rows_g, k] @ op(B_g) + beta * C[rows_g, n]. Groups without rows are skipped.
  virtual void grouped_gemm(DType compute, bool trans_b, int groups, const int* offsets, int n, int k, float alpha,
                            const float* a, int lda, const float* b, int64_t b_stride, int ldb, float beta, float* c,
                            int ldc, bool round_c);

  // ---- casts (kernels/precision.h) ----
  // out[n] = in[n] rounded to `type` (kBF16 / kF16; kF32 copies), as fp32; out may equal in.
  virtual void round_to(DType type, const float* in, float* out, int64_t n);
  // out[n] = the 16-bit bit patterns of in[n] in `type` (kBF16 / kF16).
  virtual void to_half(DType type, const float* in, uint16_t* out, int64_t n);
  // out[n] = the fp32 values of 16-bit patterns in[n] of `type`.
  virtual void from_half(DType type, const uint16_t* in, float* out, int64_t n);

  // ---- element-wise and reductions (kernels/optimizer_kernels.h) ----
  // y[n] += alpha * x[n]
  virtual void axpy(float* y, const float* x, float alpha, int64_t n);
  // x[n] *= alpha
  virtual void scale(float* x, float alpha, int64_t n);
  // sum of x[n]^2 in fp64 (synchronises; the gradient norm).
  virtual double sum_squares(const float* x, int64_t n);
  // true if every x[n] is finite (synchronises).
  virtual bool all_finite(const float* x, int64_t n);

  // ---- RMSNorm (kernels/rmsnorm.h) ----
  // out, x: [n, d]; w: [d]; rstd: [n] = 1 / sqrt(mean(x^2) + eps) (overwritten).
  virtual void rmsnorm_forward(float* out, float* rstd, const float* x, const float* w, int n, int d, float eps);
  // dx[n, d] += d loss / d x; dw[d] += d loss / d w; dout: [n, d].
  virtual void rmsnorm_backward(float* dx, float* dw, const float* dout, const float* x, const float* w,
                                const float* rstd, int n, int d);

  // ---- RoPE (kernels/rope.h) ----
  // qkv: [batch * table.seq, kv_heads, heads / kv_heads + 2, table.head_dim]; rotates q and k in place.
  virtual void rope_forward(float* qkv, const RopeTable& table, int batch, int heads, int kv_heads);
  // dqkv: same layout; the inverse rotation of dq and dk in place.
  virtual void rope_backward(float* dqkv, const RopeTable& table, int batch, int heads, int kv_heads);
  // Decoding: qkv [tokens, kv_heads, heads / kv_heads + 2, table.head_dim] at positions first .. first +
  // tokens - 1 (first + tokens <= table.seq); rotates q and k in place.
  virtual void rope_forward_at(float* qkv, const RopeTable& table, int first, int tokens, int heads, int kv_heads);

  // ---- causal grouped-query attention (kernels/attention.h) ----
  // qkv: [batch * seq, kv_heads, heads / kv_heads + 2, head_dim]; out: [batch * seq, heads * head_dim]
  // (overwritten); probs: [batch, heads, seq, seq] (overwritten; zero above the diagonal).
  virtual void attention_forward(float* out, float* probs, const float* qkv, int batch, int seq, int heads,
                                 int kv_heads, int head_dim);
  // dqkv: qkv's layout (overwritten); scratch: >= seq * seq floats; dout: out's layout.
  virtual void attention_backward(float* dqkv, float* scratch, const float* dout, const float* qkv, const float* probs,
                                  int batch, int seq, int heads, int kv_heads, int head_dim);
  // Decoding over a KV cache: out [tokens, heads * head_dim] (overwritten) of the query heads of qkv
  // (tokens at positions start + t) over the positions p <= start + t of keys, values [start + tokens,
  // kv_heads, head_dim] (already holding these tokens); scores: >= start + tokens floats of scratch.
  virtual void attention_decode(float* out, float* scores, const float* qkv, const float* keys, const float* values,
                                int tokens, int start, int heads, int kv_heads, int head_dim);

  // ---- SwiGLU (kernels/swiglu.h) ----
  // g[n] = silu(a[n]) * b[n] (overwritten).
  virtual void swiglu_forward(float* g, const float* a, const float* b, int64_t n);
  // da[n] = dg * b * silu'(a), db[n] = dg * silu(a) (overwritten; may alias dg).
  virtual void swiglu_backward(float* da, float* db, const float* dg, const float* a, const float* b, int64_t n);

  // ---- router (kernels/router.h) ----
  // logits: [tokens, experts]; scores [tokens, experts], lse [tokens], topk_idx [tokens, k],
  // topk_w [tokens, k] (overwritten); select_bias [experts] or null.
  virtual void router_forward(float* scores, float* lse, int* topk_idx, float* topk_w, const float* logits,
                              const float* select_bias, int tokens, int experts, int k, const RouterScoring& scoring);
  // counts[experts] = slots routed to each expert (overwritten). Read on the host after synchronize().
  virtual void router_expert_counts(int* counts, const int* topk_idx, int tokens, int experts, int k);
  // The load-balancing loss share of these `tokens` rows (synchronises).
  virtual float router_aux_loss(const float* scores, const RouterBalance& balance, int tokens, int experts, int k,
                                const RouterScoring& scoring);
  // The z-loss share of these rows (synchronises).
  virtual float router_z_loss(const float* lse, int tokens, int total_tokens);
  // dlogits [tokens, experts] (overwritten); dtopk_w [tokens, k] or null; logits needed by sigmoid scoring.
  virtual void router_backward(float* dlogits, const float* dtopk_w, const float* scores, const float* lse,
                               const int* topk_idx, const float* topk_w, const RouterBalance& balance, int tokens, int experts,
                               int k, float aux_coef, float z_coef, const RouterScoring& scoring, const float* logits,
                               int total_tokens);

  // ---- MoE permutation (kernels/moe_dispatch.h) ----
  // expert_offsets [experts + 1], row_slot [tokens * k], slot_row [tokens * k], scratch >= tokens * k
  // ints; capacity < 0: dropless. Returns the kept rows (synchronises).
  virtual int moe_route_plan(int* expert_offsets, int* row_slot, int* slot_row, int* scratch, const int* topk_idx,
                             const float* topk_w, int tokens, int experts, int k, int capacity);
  // xp[rows, d] = x[row_slot[r] / k, :] (overwritten).
  virtual void moe_permute_forward(float* xp, const float* x, const int* row_slot, int rows, int k, int d);
  // dx[row_slot[r] / k, :] += dxp[r, :]; dx: [tokens, d].
  virtual void moe_permute_backward(float* dx, const float* dxp, const int* row_slot, int rows, int k, int d);
  // out[tokens, d] = sum_j topk_w[t, j] * y[slot_row[t k + j], :] (overwritten; dropped slots add 0).
  virtual void moe_unpermute_forward(float* out, const float* y, const int* slot_row, const float* topk_w, int tokens,
                                     int k, int d);
  // dy[slot_row[s], :] = topk_w[s] * dout[s / k, :]; dtopk_w[tokens * k] = dot(dout, y row), 0 if dropped.
  virtual void moe_unpermute_backward(float* dy, float* dtopk_w, const float* dout, const float* y, const int* slot_row,
                                      const float* topk_w, int tokens, int k, int d);

  // ---- embedding (kernels/embedding.h) ----
  // out[n, d] = table[tokens[t] - v0, :] if owned else 0; table: [vocab_local, d].
  virtual void embedding_forward(float* out, const float* table, const int* tokens, int n, int d, int v0,
                                 int vocab_local);
  // dtable[tokens[t] - v0, :] += dout[t, :] for owned tokens.
  virtual void embedding_backward(float* dtable, const float* dout, const int* tokens, int n, int d, int v0,
                                  int vocab_local);

  // ---- vocab-parallel cross-entropy (kernels/cross_entropy.h) ----
  // logits: [tokens, vocab_local] of ids [v0, v0 + vocab_local); m, s, tl, loss: [tokens].
  virtual void ce_row_max(float* m, const float* logits, int tokens, int vocab_local);
  virtual void ce_row_sumexp(float* s, const float* logits, const float* m, int tokens, int vocab_local);
  virtual void ce_target_logit(float* tl, const float* logits, const int* targets, int tokens, int vocab_local, int v0);
  virtual void ce_loss(float* loss, const float* m, const float* s, const float* tl, int tokens);
  // dlogits [tokens, vocab_local] (may alias logits) = (softmax - onehot) * dloss_per_token.
  virtual void ce_backward(float* dlogits, const float* logits, const float* m, const float* s, const int* targets,
                           float dloss_per_token, int tokens, int vocab_local, int v0);

  // ---- optimizers (kernels/optimizer_kernels.h, kernels/onebit_kernels.h) ----
  // One AdamW step over param, grad, m, v [n].
  virtual void adamw_update(float* param, const float* grad, float* m, float* v, int64_t n, const AdamWStep& step);
  // 1-bit Adam: block [onebit_block_bytes(chunk)] = signs of x[n] and their rms; error[n] = x - decompressed.
  virtual void onebit_compress(const float* x, size_t n, size_t chunk, float* error, uint8_t* block);
  // out[n] = (+=) weight * decompressed block.
  virtual void onebit_decompress(const uint8_t* block, size_t n, float weight, float* out, bool accumulate);
  // m[n] = beta1 * m + coef * grad.
  virtual void momentum_update(float* m, const float* grad, float beta1, float coef, size_t n);
  // param[n] -= lr * m * inv_bc1 / (sqrt(v * inv_bc2) + eps) + decay * param.
  virtual void onebit_adam_update(float* param, const float* m, const float* v, size_t n, float lr, float inv_bc1,
                                  float inv_bc2, float eps, float decay);

 protected:
  // Throws moe4d::Error "backend '<name>' has no op '<op>'".
  [[noreturn]] void unsupported(const char* op) const;

 private:
  Queue queue_;
};

}  // namespace moe4d
