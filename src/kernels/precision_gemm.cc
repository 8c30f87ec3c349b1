// kernels/precision_gemm.cc — the 16-bit GEMM: oneDNN bf16/f16 matmul where this CPU has one,
// otherwise rounded operands through OpenBLAS sgemm (see the header for why both compute the same).
#include "kernels/precision_gemm.h"

#include <algorithm>
#include <string_view>

#include <fmt/format.h>

#include "core/check.h"
#include "core/error.h"
#include "kernels/gemm.h"
#include "kernels/precision.h"

#ifdef MOE4D_HAVE_DNNL
#include <dnnl.hpp>
#endif

namespace moe4d {
namespace {

const char* type_name(DType type) {
  switch (type) {
    case DType::kF32: return "fp32";
    case DType::kBF16: return "bf16";
    case DType::kF16: return "fp16";
    default: return "?";
  }
}

// A reference kernel computes the right numbers far too slowly to train with (oneDNN names them
// "ref:any", "ref_int8:any", ...).
bool is_reference_kernel(std::string_view impl) { return impl.substr(0, 3) == "ref"; }

}  // namespace

#ifdef MOE4D_HAVE_DNNL
struct PrecisionGemm::OneDnn {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
  dnnl::memory::data_type operand_type = dnnl::memory::data_type::f32;

  // The matmul of op(A)[m,k] @ op(B)[k,n] into C[m,n] (leading dimension ldc), with A and B stored
  // contiguously in their stored layout ([k,m] / [n,k] when transposed), alpha as output scale and
  // beta as a sum post-op. Throws dnnl::error if oneDNN has no kernel at all.
  dnnl::matmul::primitive_desc describe(bool trans_a, bool trans_b, int m, int n, int k, float alpha, float beta,
                                        int ldc) const {
    using dnnl::memory;
    const memory::dims a_strides = trans_a ? memory::dims{1, m} : memory::dims{k, 1};
    const memory::dims b_strides = trans_b ? memory::dims{1, k} : memory::dims{n, 1};
    const memory::desc a_md({m, k}, operand_type, a_strides);
    const memory::desc b_md({k, n}, operand_type, b_strides);
    const memory::desc c_md({m, n}, memory::data_type::f32, memory::dims{ldc, 1});
    dnnl::primitive_attr attr;
    if (alpha != 1.0f) attr.set_output_scales(0, {alpha});
    if (beta != 0.0f) {
      dnnl::post_ops ops;
      ops.append_sum(beta);
      attr.set_post_ops(ops);
    }
    return dnnl::matmul::primitive_desc(dnnl::matmul::desc(a_md, b_md, c_md), attr, engine);
  }
};
#else
struct PrecisionGemm::OneDnn {};
#endif

PrecisionGemm::PrecisionGemm(DType type, GemmBackend backend) : type_(type), backend_(backend) {
  if (type != DType::kF32 && !is_half_precision(type))
    fail("PrecisionGemm: compute type {} is not fp32, bf16 or fp16", dtype_name(type));
  const bool want_onednn = backend == GemmBackend::kOneDnn || (backend == GemmBackend::kAuto && type != DType::kF32);
#ifdef MOE4D_HAVE_DNNL
  if (want_onednn) {
    // Probe: can oneDNN build a matmul of this type on this CPU, and is it an optimised kernel?
    auto probe = std::make_unique<OneDnn>();
    probe->operand_type = type == DType::kBF16  ? dnnl::memory::data_type::bf16
                          : type == DType::kF16 ? dnnl::memory::data_type::f16
                                                : dnnl::memory::data_type::f32;
    try {
      const std::string impl = probe->describe(false, false, 64, 64, 64, 1.0f, 0.0f, 64).impl_info_str();
      if (is_reference_kernel(impl) && backend == GemmBackend::kAuto) {
        onednn_status_ =
            fmt::format("oneDNN has only its reference {} matmul ({}) for this CPU", type_name(type), impl);
      } else {
        onednn_status_ = fmt::format("oneDNN {} matmul: {}", type_name(type), impl);
        implementation_ = "onednn " + impl;
        onednn_ = std::move(probe);
      }
    } catch (const dnnl::error& e) {
      onednn_status_ = fmt::format("oneDNN has no {} matmul for this CPU ({})", type_name(type), e.what());
    }
  } else {
    onednn_status_ = type == DType::kF32 ? "not used for fp32" : "not used (emulation requested)";
  }
#else
  onednn_status_ = "built without oneDNN";
#endif
  if (backend == GemmBackend::kOneDnn && !onednn_)
    fail("PrecisionGemm: the oneDNN backend was requested but is not available: {}", onednn_status_);
  if (!onednn_)
    implementation_ = type == DType::kF32 ? "openblas sgemm"
                                          : fmt::format("emulated ({} operands, fp32 OpenBLAS sgemm)", type_name(type));
}

PrecisionGemm::~PrecisionGemm() = default;

void PrecisionGemm::gemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a, int lda,
                         const float* b, int ldb, float beta, float* c, int ldc, bool round_c) {
  ++calls_;
  MOE4D_CHECK(m >= 0 && n >= 0 && k >= 0);
  if (m == 0 || n == 0) return;
  if (k == 0) {  // no operands to round: C = beta * C, as moe4d::gemm defines it
    moe4d::gemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  } else if (type_ == DType::kF32 && !onednn_) {
    moe4d::gemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  } else if (!onednn_ || !gemm_onednn(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)) {
    gemm_emulated(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  }
  if (round_c && type_ != DType::kF32)
    for (int i = 0; i < m; ++i) round_to_precision(type_, c + int64_t(i) * ldc, c + int64_t(i) * ldc, n);
}

void PrecisionGemm::gemm_emulated(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a,
                                  int lda, const float* b, int ldb, float beta, float* c, int ldc) {
  // Stored shapes: A is [m,k] or, transposed, [k,m]; B is [k,n] or [n,k].
  const int a_rows = trans_a ? k : m, a_cols = trans_a ? m : k;
  const int b_rows = trans_b ? n : k, b_cols = trans_b ? k : n;
  MOE4D_CHECK_GE(lda, a_cols);
  MOE4D_CHECK_GE(ldb, b_cols);
  if (a32_.size() < size_t(a_rows) * a_cols) a32_.resize(size_t(a_rows) * a_cols);
  if (b32_.size() < size_t(b_rows) * b_cols) b32_.resize(size_t(b_rows) * b_cols);
  round_matrix_to_precision(type_, a, a_rows, a_cols, lda, a32_.data());
  round_matrix_to_precision(type_, b, b_rows, b_cols, ldb, b32_.data());
  moe4d::gemm(trans_a, trans_b, m, n, k, alpha, a32_.data(), a_cols, b32_.data(), b_cols, beta, c, ldc);
}

#ifdef MOE4D_HAVE_DNNL
bool PrecisionGemm::gemm_onednn(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a,
                                int lda, const float* b, int ldb, float beta, float* c, int ldc) {
  const int a_rows = trans_a ? k : m, a_cols = trans_a ? m : k;
  const int b_rows = trans_b ? n : k, b_cols = trans_b ? k : n;
  MOE4D_CHECK_GE(lda, a_cols);
  MOE4D_CHECK_GE(ldb, b_cols);
  MOE4D_CHECK_GE(ldc, n);
  dnnl::matmul::primitive_desc pd;
  try {
    pd = onednn_->describe(trans_a, trans_b, m, n, k, alpha, beta, ldc);
  } catch (const dnnl::error& e) {
    if (backend_ == GemmBackend::kOneDnn)
      fail("PrecisionGemm: oneDNN has no {} matmul for m {} n {} k {}: {}", type_name(type_), m, n, k, e.what());
    return false;
  }
  if (backend_ == GemmBackend::kAuto && is_reference_kernel(pd.impl_info_str())) return false;
  // Operands in contiguous storage of their stored layout, as the descriptors say.
  void* a_data;
  void* b_data;
  if (type_ == DType::kF32) {
    a32_.resize(std::max(a32_.size(), size_t(a_rows) * a_cols));
    b32_.resize(std::max(b32_.size(), size_t(b_rows) * b_cols));
    round_matrix_to_precision(DType::kF32, a, a_rows, a_cols, lda, a32_.data());
    round_matrix_to_precision(DType::kF32, b, b_rows, b_cols, ldb, b32_.data());
    a_data = a32_.data();
    b_data = b32_.data();
  } else {
    a16_.resize(std::max(a16_.size(), size_t(a_rows) * a_cols));
    b16_.resize(std::max(b16_.size(), size_t(b_rows) * b_cols));
    convert_matrix_to_half(type_, a, a_rows, a_cols, lda, a16_.data());
    convert_matrix_to_half(type_, b, b_rows, b_cols, ldb, b16_.data());
    a_data = a16_.data();
    b_data = b16_.data();
  }
  const dnnl::engine& engine = onednn_->engine;
  dnnl::memory a_mem(pd.src_desc(), engine, a_data), b_mem(pd.weights_desc(), engine, b_data);
  dnnl::memory c_mem(pd.dst_desc(), engine, c);
  dnnl::matmul(pd).execute(onednn_->stream, {{DNNL_ARG_SRC, a_mem}, {DNNL_ARG_WEIGHTS, b_mem}, {DNNL_ARG_DST, c_mem}});
  onednn_->stream.wait();
  return true;
}
#else
bool PrecisionGemm::gemm_onednn(bool, bool, int, int, int, float, const float*, int, const float*, int, float, float*,
                                int) {
  return false;
}
#endif

}  // namespace moe4d
