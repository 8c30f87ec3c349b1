// model/block_matmul.cc — fp32 or 16-bit block GEMMs, with the optional tensor inspection.
#include "model/block_matmul.h"

#include <optional>

#include "backend/cpu_backend.h"
#include "model/param_store.h"

namespace moe4d {
namespace {

size_t weight_offset(const BlockGemm& g, int in_dim, int out_dim) {
  return g.local_expert >= 0 ? size_t(g.local_expert) * in_dim * out_dim : 0;
}

// The compute type of g's GEMMs: the step's, unless the GEMM stays fp32.
DType compute_type(const BlockContext& ctx, const BlockGemm& g) {
  return g.keep_fp32 ? DType::kF32 : ctx.numerics.compute;
}

TensorSite site(const BlockGemm& g, TensorRole role) {
  return {.param_id = g.weight_id, .expert = g.global_expert, .role = role, .labels = g.labels};
}

void weight_grad(BlockContext& ctx, const BlockGemm& g, const float* dout, const float* in, int n, int in_dim,
                 int out_dim) {
  const size_t offset = weight_offset(g, in_dim, out_dim);
  TensorInspector* inspector = ctx.numerics.inspector;
  const DType compute = compute_type(ctx, g);
  Backend& backend = ctx.backend();
  float* dw = g.weight_grad ? g.weight_grad : ctx.params.grad(g.weight_id) + offset;
  // dW[in, out] += in^T @ dout, or for a transposed weight dW[out, in] += dout^T @ in, on rows
  // [r0, r1) of dW. Never rounded: the gradient of an fp32 master weight accumulates in fp32.
  const int rows = g.weight_transposed ? out_dim : in_dim, row_len = g.weight_transposed ? in_dim : out_dim;
  auto block = [&](size_t r0, size_t r1) {
    if (n == 0) return;  // no rows (an expert nobody routed to): nothing to add
    const int m = int(r1 - r0);
    float* c = dw + r0 * size_t(row_len);
    const float* a = g.weight_transposed ? dout + r0 : in + r0;
    const int lda = g.weight_transposed ? out_dim : in_dim;
    const float* b = g.weight_transposed ? in : dout;
    backend.gemm(compute, true, false, m, row_len, n, 1.0f, a, lda, b, row_len, 1.0f, c, row_len, false);
  };
  if (g.weight_grad) {  // an expert replica slot's own buffer: no parameter range to report
    block(0, size_t(rows));
    if (inspector && n > 0) inspector->on_result(site(g, TensorRole::kWeightGradient), dw, int64_t(in_dim) * out_dim);
    return;
  }
  // The inspector may change the gradient (fault injection), so it must see it before it is reduced.
  for_each_grad_block(ctx, g.weight_id, offset, size_t(rows), size_t(row_len), inspector == nullptr,
                      [&](size_t r0, size_t r1) {
                        block(r0, r1);
                        if (inspector && n > 0)
                          inspector->on_result(site(g, TensorRole::kWeightGradient), dw, int64_t(in_dim) * out_dim);
                      });
}

}  // namespace

Backend& BlockContext::backend() const { return numerics.backend ? *numerics.backend : thread_cpu_backend(); }

ValueUse::ValueUse(BlockContext& ctx, int id) : ValueUse(ctx, id, 0, size_t(ctx.params.info(id).numel())) {}

ValueUse::ValueUse(BlockContext& ctx, int id, size_t begin, size_t end)
    : hooks_(ctx.value_hooks), id_(id), begin_(begin), end_(end) {
  if (hooks_) hooks_->values_needed(id_, begin_, end_);
  data_ = ctx.params.value(id_) + begin_;
}

ValueUse::~ValueUse() {
  if (hooks_) hooks_->values_done(id_, begin_, end_);
}

void block_matmul_values_touch(BlockContext& ctx, const BlockGemm& g, int in_dim, int out_dim) {
  if (g.weight) return;  // a replica slot reads its own buffer
  const size_t offset = weight_offset(g, in_dim, out_dim);
  ValueUse use(ctx, g.weight_id, offset, offset + size_t(in_dim) * out_dim);
}

void grad_ready(BlockContext& ctx, int id, size_t begin, size_t end) {
  if (ctx.grad_hooks) ctx.grad_hooks->grad_ready(id, begin, end);
}

void grad_ready(BlockContext& ctx, int id) { grad_ready(ctx, id, 0, size_t(ctx.params.info(id).numel())); }

void block_matmul_weight_grad(BlockContext& ctx, const BlockGemm& g, const float* dout, const float* in, int n,
                              int in_dim, int out_dim) {
  TensorInspector* inspector = ctx.numerics.inspector;
  if (inspector && n > 0) inspector->on_operand(site(g, TensorRole::kOutputGradient), dout, int64_t(n) * out_dim);
  weight_grad(ctx, g, dout, in, n, in_dim, out_dim);
}

void block_matmul_forward(BlockContext& ctx, const BlockGemm& g, float* out, const float* in, int n, int in_dim,
                          int out_dim, bool round_output) {
  const size_t offset = weight_offset(g, in_dim, out_dim);
  std::optional<ValueUse> use;
  if (!g.weight) use.emplace(ctx, g.weight_id, offset, offset + size_t(in_dim) * out_dim);
  const float* w = g.weight ? g.weight : use->data();
  TensorInspector* inspector = ctx.numerics.inspector;
  if (inspector) inspector->on_operand(site(g, TensorRole::kForwardInput), in, int64_t(n) * in_dim);
  const int ldw = g.weight_transposed ? in_dim : out_dim;
  ctx.backend().gemm(compute_type(ctx, g), false, g.weight_transposed, n, out_dim, in_dim, 1.0f, in, in_dim, w, ldw,
                     0.0f, out, out_dim, round_output);
  if (inspector) inspector->on_result(site(g, TensorRole::kForwardOutput), out, int64_t(n) * out_dim);
}

void block_matmul_backward(BlockContext& ctx, const BlockGemm& g, float* din, const float* dout, const float* in,
                           int n, int in_dim, int out_dim, bool accumulate_din) {
  const size_t offset = weight_offset(g, in_dim, out_dim);
  TensorInspector* inspector = ctx.numerics.inspector;
  if (inspector) inspector->on_operand(site(g, TensorRole::kOutputGradient), dout, int64_t(n) * out_dim);
  if (din != nullptr) {
    // din = dout @ W^T: W [in, out] is read transposed; a transposed weight [out, in] as stored.
    std::optional<ValueUse> use;
    if (!g.weight) use.emplace(ctx, g.weight_id, offset, offset + size_t(in_dim) * out_dim);
    const float* w = g.weight ? g.weight : use->data();
    const bool trans_w = !g.weight_transposed;
    const int ldw = g.weight_transposed ? in_dim : out_dim;
    const float beta = accumulate_din ? 1.0f : 0.0f;
    ctx.backend().gemm(compute_type(ctx, g), false, trans_w, n, in_dim, out_dim, 1.0f, dout, out_dim, w, ldw, beta, din,
                       in_dim, true);
    if (inspector) inspector->on_result(site(g, TensorRole::kInputGradient), din, int64_t(n) * in_dim);
  }
  if (in != nullptr) weight_grad(ctx, g, dout, in, n, in_dim, out_dim);
}

}  // namespace moe4d
