// The 16-bit GEMM (kernels/precision_gemm.h) against a naive double-precision reference on
// operands rounded to bf16 / fp16: every transpose combination, alpha, beta, leading dimensions,
// output rounding; fp16 overflow and underflow as real fp16 behaves; the oneDNN path's descriptors
// (checked with oneDNN's fp32 matmul, which every x86 CPU has) and, where this CPU has a 16-bit
// oneDNN kernel, oneDNN against the emulation.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/rng.h"
#include "kernels/gemm.h"
#include "kernels/precision.h"
#include "kernels/precision_gemm.h"

namespace moe4d {
namespace {

struct Case {
  bool trans_a, trans_b;
  float alpha, beta;
  int extra_ld;  // leading dimensions larger than the rows, to exercise strides
};

std::vector<float> random(size_t n, uint64_t seed, float scale) {
  std::vector<float> x(n);
  for (size_t i = 0; i < n; ++i) x[i] = scale * normal_at(seed, i);
  return x;
}

// C = alpha * op(round(A)) op(round(B)) + beta * C0 in double.
std::vector<double> reference(DType type, const Case& c, int m, int n, int k, const std::vector<float>& a, int lda,
                              const std::vector<float>& b, int ldb, const std::vector<float>& c0, int ldc) {
  std::vector<double> out(size_t(m) * ldc);
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) {
      double sum = 0;
      for (int p = 0; p < k; ++p) {
        const float av = c.trans_a ? a[size_t(p) * lda + i] : a[size_t(i) * lda + p];
        const float bv = c.trans_b ? b[size_t(j) * ldb + p] : b[size_t(p) * ldb + j];
        sum += double(round_to_precision(type, av)) * double(round_to_precision(type, bv));
      }
      out[size_t(i) * ldc + j] = c.alpha * sum + (c.beta != 0.0f ? c.beta * double(c0[size_t(i) * ldc + j]) : 0.0);
    }
  return out;
}

void check_against_reference(PrecisionGemm& g, DType rounding, bool round_c) {
  const int m = 7, n = 13, k = 29;
  const std::vector<Case> cases = {{false, false, 1.0f, 0.0f, 0}, {false, true, 0.5f, 1.0f, 3},
                                   {true, false, 1.0f, -0.5f, 1}, {true, true, 2.0f, 0.0f, 5}};
  for (const Case& c : cases) {
    const int lda = (c.trans_a ? m : k) + c.extra_ld, ldb = (c.trans_b ? k : n) + c.extra_ld, ldc = n + c.extra_ld;
    const std::vector<float> a = random(size_t(c.trans_a ? k : m) * lda, 11, 1.3f);
    const std::vector<float> b = random(size_t(c.trans_b ? n : k) * ldb, 12, 0.7f);
    std::vector<float> out = random(size_t(m) * ldc, 13, 1.0f);
    const std::vector<float> c0 = out;
    if (c.beta == 0.0f) out[0] = std::nanf("");  // beta 0 must overwrite, not scale
    g.gemm(c.trans_a, c.trans_b, m, n, k, c.alpha, a.data(), lda, b.data(), ldb, c.beta, out.data(), ldc, round_c);
    const std::vector<double> ref = reference(rounding, c, m, n, k, a, lda, b, ldb, c0, ldc);
    for (int i = 0; i < m; ++i)
      for (int j = 0; j < n; ++j) {
        const double want = ref[size_t(i) * ldc + j];
        const float got = out[size_t(i) * ldc + j];
        // fp32 accumulation of exact products: a few fp32 ulps of the sum's magnitude; a rounded
        // output is within half a 16-bit ulp (2^-8 relative for bf16, 2^-11 for fp16).
        const double rel = round_c ? (rounding == DType::kBF16 ? 0x1p-8 : 0x1p-11) : 2e-6;
        EXPECT_NEAR(got, want, rel * std::abs(want) + 1e-5)
            << g.implementation() << " trans " << c.trans_a << c.trans_b << " at " << i << "," << j;
        if (round_c) {
          EXPECT_EQ(got, round_to_precision(rounding, got)) << "output not a 16-bit value";
        }
      }
    // Elements outside the [m, n] block of C are untouched.
    for (int i = 0; i < m; ++i)
      for (int j = n; j < ldc; ++j) EXPECT_EQ(out[size_t(i) * ldc + j], c0[size_t(i) * ldc + j]);
  }
}

TEST(PrecisionGemm, EmulatedMatchesRoundedOperandReference) {
  for (DType type : {DType::kBF16, DType::kF16})
    for (bool round_c : {false, true}) {
      PrecisionGemm g(type, GemmBackend::kEmulated);
      EXPECT_FALSE(g.uses_onednn());
      EXPECT_NE(g.implementation().find("emulated"), std::string::npos) << g.implementation();
      check_against_reference(g, type, round_c);
      EXPECT_EQ(g.calls(), 4);
    }
}

TEST(PrecisionGemm, AutoBackendMatchesRoundedOperandReference) {
  // Whatever kAuto picked on this CPU (oneDNN where it has a 16-bit kernel, else the emulation)
  // computes the same numbers.
  for (DType type : {DType::kBF16, DType::kF16}) {
    PrecisionGemm g(type);
    SCOPED_TRACE(g.implementation() + " / " + g.onednn_status());
    check_against_reference(g, type, false);
  }
}

TEST(PrecisionGemm, Fp32IsExactlyOpenBlas) {
  PrecisionGemm g(DType::kF32);
  EXPECT_EQ(g.implementation(), "openblas sgemm");
  const int m = 9, n = 10, k = 11;
  const std::vector<float> a = random(size_t(m) * k, 1, 1.0f), b = random(size_t(k) * n, 2, 1.0f);
  std::vector<float> c1(size_t(m) * n), c2(size_t(m) * n);
  g.gemm(false, false, m, n, k, 1.0f, a.data(), k, b.data(), n, 0.0f, c1.data(), n, true);
  gemm(false, false, m, n, k, 1.0f, a.data(), k, b.data(), n, 0.0f, c2.data(), n);
  EXPECT_EQ(c1, c2);
}

TEST(PrecisionGemm, Fp16OverflowsAndUnderflowsLikeRealFp16) {
  PrecisionGemm fp16(DType::kF16, GemmBackend::kEmulated), bf16(DType::kBF16, GemmBackend::kEmulated);
  // An operand beyond 65504 is inf in fp16: the product is inf (finite in bf16).
  const float big[2] = {70000.0f, 1.0f}, ones[2] = {1.0f, 1.0f};
  float c = 0;
  fp16.gemm(false, false, 1, 1, 2, 1.0f, big, 2, ones, 1, 0.0f, &c, 1);
  EXPECT_TRUE(std::isinf(c));
  bf16.gemm(false, false, 1, 1, 2, 1.0f, big, 2, ones, 1, 0.0f, &c, 1);
  EXPECT_FLOAT_EQ(c, round_to_precision(DType::kBF16, 70000.0f) + 1.0f);
  // Finite operands whose fp32 product is finite, rounded output above 65504: inf.
  const float a[1] = {300.0f}, b[1] = {300.0f};
  fp16.gemm(false, false, 1, 1, 1, 1.0f, a, 1, b, 1, 0.0f, &c, 1, /*round_c=*/true);
  EXPECT_TRUE(std::isinf(c));
  fp16.gemm(false, false, 1, 1, 1, 1.0f, a, 1, b, 1, 0.0f, &c, 1, /*round_c=*/false);
  EXPECT_EQ(c, 90000.0f);  // fp32 accumulation itself does not overflow
  // An operand below half of fp16's smallest subnormal (2^-25) is zero: the gradient underflow that
  // loss scaling exists for. bf16 (fp32's exponent range) keeps it.
  const float tiny[1] = {1e-8f}, one[1] = {1.0f};
  fp16.gemm(false, false, 1, 1, 1, 1.0f, tiny, 1, one, 1, 0.0f, &c, 1);
  EXPECT_EQ(c, 0.0f);
  bf16.gemm(false, false, 1, 1, 1, 1.0f, tiny, 1, one, 1, 0.0f, &c, 1);
  EXPECT_NEAR(c, 1e-8f, 1e-10f);
}

TEST(PrecisionGemm, EmptyShapes) {
  PrecisionGemm g(DType::kBF16, GemmBackend::kEmulated);
  std::vector<float> c = {1.5f, std::nanf("")};
  g.gemm(false, false, 1, 2, 0, 1.0f, nullptr, 1, nullptr, 2, 0.0f, c.data(), 2);  // k = 0, beta 0: zeros
  EXPECT_EQ(c, (std::vector<float>{0.0f, 0.0f}));
  g.gemm(false, false, 0, 2, 3, 1.0f, nullptr, 3, nullptr, 2, 0.0f, c.data(), 2);  // m = 0: nothing
}

TEST(PrecisionGemm, RejectsNonFloatComputeTypes) {
  EXPECT_THROW(PrecisionGemm(DType::kI32), Error);
}

#ifdef MOE4D_HAVE_DNNL
TEST(PrecisionGemm, OneDnnDescriptorsMatchOpenBlasInFp32) {
  // The oneDNN path (strides for transposes, leading dimension of C, alpha as output scale, beta as a
  // sum post-op) with fp32 operands, where its result must equal OpenBLAS up to summation order.
  PrecisionGemm g(DType::kF32, GemmBackend::kOneDnn);
  ASSERT_TRUE(g.uses_onednn()) << g.onednn_status();
  check_against_reference(g, DType::kF32, false);
}

TEST(PrecisionGemm, OneDnnHalfBackendIsUsedOnlyWhereThisCpuHasIt) {
  for (DType type : {DType::kBF16, DType::kF16}) {
    PrecisionGemm autodetect(type);
    if (!autodetect.uses_onednn()) {
      // This CPU (e.g. AVX2 only) has no optimised 16-bit matmul in oneDNN: asking for it is a clear
      // error, and kAuto emulates.
      EXPECT_NE(autodetect.implementation().find("emulated"), std::string::npos);
      EXPECT_THROW(PrecisionGemm(type, GemmBackend::kOneDnn), Error);
      continue;
    }
    // A CPU with AVX-512 BF16 / AMX / AVX512-FP16: oneDNN must agree with the emulation.
    check_against_reference(autodetect, type, true);
  }
}
#endif

}  // namespace
}  // namespace moe4d
