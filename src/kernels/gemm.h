// kernels/gemm.h — matrix multiplication (OpenBLAS cblas on CPU).
//
// All matrices are row-major fp32 with explicit leading dimensions (elements). Model code uses the
// matmul_* pair, which follows the design's `y = x @ W` convention with W stored [in, out].
#pragma once

#include <cstdint>

namespace moe4d {

// C[M,N] = alpha * op(A) @ op(B) + beta * C, op(X) = X or X^T. op(A) is [M,K], op(B) is [K,N].
void gemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a, int lda, const float* b,
          int ldb, float beta, float* c, int ldc);

// out[n, out_dim] = in[n, in_dim] @ w[in_dim, out_dim]. Overwrites out.
void matmul_forward(float* out, const float* in, const float* w, int n, int in_dim, int out_dim);

// Backward of matmul_forward for one micro-batch:
//   din[n, in_dim]      = dout @ w^T      (overwritten, or added to if accumulate_din; skipped if null)
//   dw[in_dim, out_dim] += in^T @ dout    (always accumulated: gradients sum over micro-batches; skipped if null)
void matmul_backward(float* din, float* dw, const float* dout, const float* in, const float* w, int n, int in_dim,
                     int out_dim, bool accumulate_din);

}  // namespace moe4d
