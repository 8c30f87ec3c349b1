// kernels/gemm.cc — row-major fp32 GEMM through OpenBLAS (cblas_sgemm), and the matmul pair built on it.
#include "kernels/gemm.h"

#include <cblas.h>

#include <cstdint>

#include "core/check.h"

namespace moe4d {

void gemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a, int lda, const float* b,
          int ldb, float beta, float* c, int ldc) {
  MOE4D_CHECK(m >= 0 && n >= 0 && k >= 0);
  if (m == 0 || n == 0) return;
  MOE4D_CHECK_GE(ldc, n);
  if (k == 0) {
    // Empty product: C = beta * C. Handled here because BLAS rejects the leading dimensions of a
    // zero-width A or B, and beta == 0 must overwrite C (even NaN garbage), not scale it.
    for (int i = 0; i < m; ++i) {
      float* row = c + static_cast<int64_t>(i) * ldc;
      for (int j = 0; j < n; ++j) row[j] = beta == 0.0f ? 0.0f : beta * row[j];
    }
    return;
  }
  MOE4D_CHECK_GE(lda, trans_a ? m : k);
  MOE4D_CHECK_GE(ldb, trans_b ? k : n);
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans, m, n, k, alpha,
              a, lda, b, ldb, beta, c, ldc);
}

void matmul_forward(float* out, const float* in, const float* w, int n, int in_dim, int out_dim) {
  gemm(false, false, n, out_dim, in_dim, 1.0f, in, in_dim, w, out_dim, 0.0f, out, out_dim);
}

void matmul_backward(float* din, float* dw, const float* dout, const float* in, const float* w, int n, int in_dim,
                     int out_dim, bool accumulate_din) {
  if (din != nullptr)
    gemm(false, true, n, in_dim, out_dim, 1.0f, dout, out_dim, w, out_dim, accumulate_din ? 1.0f : 0.0f, din, in_dim);
  if (dw != nullptr) gemm(true, false, in_dim, out_dim, n, 1.0f, in, in_dim, dout, out_dim, 1.0f, dw, out_dim);
}

}  // namespace moe4d
