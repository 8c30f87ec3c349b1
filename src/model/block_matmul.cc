// model/block_matmul.cc — fp32 or 16-bit block GEMMs, with the optional tensor inspection.
#include "model/block_matmul.h"

#include "kernels/gemm.h"
#include "kernels/precision_gemm.h"
#include "model/param_store.h"

namespace moe4d {
namespace {

size_t weight_offset(const BlockGemm& g, int in_dim, int out_dim) {
  return g.local_expert >= 0 ? size_t(g.local_expert) * in_dim * out_dim : 0;
}

TensorSite site(const BlockGemm& g, TensorRole role) {
  return {.param_id = g.weight_id, .expert = g.global_expert, .role = role, .labels = g.labels};
}

}  // namespace

void block_matmul_forward(BlockContext& ctx, const BlockGemm& g, float* out, const float* in, int n, int in_dim,
                          int out_dim, bool round_output) {
  const float* w = g.weight ? g.weight : ctx.params.value(g.weight_id) + weight_offset(g, in_dim, out_dim);
  TensorInspector* inspector = ctx.numerics.inspector;
  if (inspector) inspector->on_operand(site(g, TensorRole::kForwardInput), in, int64_t(n) * in_dim);
  PrecisionGemm* half = g.keep_fp32 ? nullptr : ctx.numerics.gemm;
  const int ldw = g.weight_transposed ? in_dim : out_dim;
  if (half)
    half->gemm(false, g.weight_transposed, n, out_dim, in_dim, 1.0f, in, in_dim, w, ldw, 0.0f, out, out_dim,
               round_output);
  else
    gemm(false, g.weight_transposed, n, out_dim, in_dim, 1.0f, in, in_dim, w, ldw, 0.0f, out, out_dim);
  if (inspector) inspector->on_result(site(g, TensorRole::kForwardOutput), out, int64_t(n) * out_dim);
}

void block_matmul_backward(BlockContext& ctx, const BlockGemm& g, float* din, const float* dout, const float* in,
                           int n, int in_dim, int out_dim, bool accumulate_din) {
  const size_t offset = weight_offset(g, in_dim, out_dim);
  TensorInspector* inspector = ctx.numerics.inspector;
  PrecisionGemm* half = g.keep_fp32 ? nullptr : ctx.numerics.gemm;
  if (inspector) inspector->on_operand(site(g, TensorRole::kOutputGradient), dout, int64_t(n) * out_dim);
  if (din != nullptr) {
    // din = dout @ W^T: W [in, out] is read transposed; a transposed weight [out, in] as stored.
    const float* w = g.weight ? g.weight : ctx.params.value(g.weight_id) + offset;
    const bool trans_w = !g.weight_transposed;
    const int ldw = g.weight_transposed ? in_dim : out_dim;
    const float beta = accumulate_din ? 1.0f : 0.0f;
    if (half)
      half->gemm(false, trans_w, n, in_dim, out_dim, 1.0f, dout, out_dim, w, ldw, beta, din, in_dim, true);
    else
      gemm(false, trans_w, n, in_dim, out_dim, 1.0f, dout, out_dim, w, ldw, beta, din, in_dim);
    if (inspector) inspector->on_result(site(g, TensorRole::kInputGradient), din, int64_t(n) * in_dim);
  }
  if (in != nullptr) {
    float* dw = g.weight_grad ? g.weight_grad : ctx.params.grad(g.weight_id) + offset;
    // dW[in, out] += in^T @ dout, or for a transposed weight dW[out, in] += dout^T @ in. Never
    // rounded: the gradient of an fp32 master weight accumulates in fp32.
    if (g.weight_transposed) {
      if (half)
        half->gemm(true, false, out_dim, in_dim, n, 1.0f, dout, out_dim, in, in_dim, 1.0f, dw, in_dim);
      else
        gemm(true, false, out_dim, in_dim, n, 1.0f, dout, out_dim, in, in_dim, 1.0f, dw, in_dim);
    } else {
      if (half)
        half->gemm(true, false, in_dim, out_dim, n, 1.0f, in, in_dim, dout, out_dim, 1.0f, dw, out_dim);
      else
        gemm(true, false, in_dim, out_dim, n, 1.0f, in, in_dim, dout, out_dim, 1.0f, dw, out_dim);
    }
    if (inspector) inspector->on_result(site(g, TensorRole::kWeightGradient), dw, int64_t(in_dim) * out_dim);
  }
}

}  // namespace moe4d
