// kernels/precision_gemm.h — GEMMs with 16-bit (bf16 / fp16) operands and fp32 accumulation.
//
// C[M,N] = alpha * op(A16) @ op(B16) + beta * C, where X16 is X rounded to the compute type
// (kernels/precision.h: round-to-nearest-even; for fp16, |x| >= 65520 becomes inf as real fp16
// does), the products and their sums are fp32, and C stays fp32 (optionally rounded to 16 bits
// afterwards, for GEMM outputs that a real 16-bit path stores as 16-bit activations).
//
// Two implementations with the same numerics (16-bit operands, exact products, fp32 sums; only the
// order of the fp32 additions differs):
//   oneDNN  — oneDNN's bf16 / f16 matmul (f32 destination), used when oneDNN has an optimised
//             kernel for this CPU (AVX-512 BF16, AMX, AVX512-FP16). Probed at construction by
//             creating a primitive; a reference ("ref") kernel does not count, it is orders of
//             magnitude slower. Operands are converted to 16-bit buffers per call.
//   emulated — the operands rounded to 16-bit values held in fp32 buffers, then OpenBLAS sgemm.
//             Products of two bf16 (8-bit significands) or fp16 (11-bit) values are exact in fp32,
//             so this computes what 16-bit GEMM hardware computes. It is slower than fp32 (extra
//             rounding passes, same sgemm): a CPU without 16-bit GEMM instructions gains accuracy
//             fidelity, not speed (docs/precision.md; bench/precision reports the measured ratio).
// Weights are rounded per call ("per use"), not cached per step: bench/precision measures that
// rounding at about 2% of a bf16 step of the small config, where a per-step cache would halve it at
// the price of a second copy of every weight (docs/precision.md).
//
// Not thread-safe (one object per thread: it owns its conversion buffers and oneDNN stream);
// not copyable.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace moe4d {

enum class GemmBackend {
  kAuto,      // oneDNN if it has an optimised matmul of the type on this CPU, else emulated (fp32: OpenBLAS)
  kEmulated,  // always the rounded-operand sgemm (fp32: OpenBLAS)
  kOneDnn,    // always oneDNN (also for fp32); moe4d::Error if oneDNN cannot do it on this CPU
};

class PrecisionGemm {
 public:
  // type: kF32, kBF16 or kF16. With kF32 and kAuto / kEmulated every call is exactly moe4d::gemm.
  explicit PrecisionGemm(DType type, GemmBackend backend = GemmBackend::kAuto);
  ~PrecisionGemm();
  PrecisionGemm(const PrecisionGemm&) = delete;
  PrecisionGemm& operator=(const PrecisionGemm&) = delete;

  DType type() const { return type_; }
  bool uses_onednn() const { return onednn_ != nullptr; }
  // "openblas sgemm", "emulated (16-bit operands, fp32 OpenBLAS sgemm)" or "onednn <impl>" (the
  // oneDNN kernel name, e.g. "brg:avx512_core_amx").
  const std::string& implementation() const { return implementation_; }
  // Why oneDNN is or is not used (the probe's outcome), for logs and benchmarks.
  const std::string& onednn_status() const { return onednn_status_; }

  // Row-major C = alpha * op(A16) @ op(B16) + beta * C (shapes as moe4d::gemm); then, if round_c,
  // the [m, n] block of C is rounded to the compute type in place. beta == 0 overwrites C.
  void gemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a, int lda, const float* b,
            int ldb, float beta, float* c, int ldc, bool round_c = false);

  int64_t calls() const { return calls_; }

 private:
  struct OneDnn;
  void gemm_emulated(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a, int lda,
                     const float* b, int ldb, float beta, float* c, int ldc);
  // False if oneDNN picked its reference kernel for this call (kAuto then emulates it).
  bool gemm_onednn(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a, int lda,
                   const float* b, int ldb, float beta, float* c, int ldc);

  DType type_;
  GemmBackend backend_;
  std::unique_ptr<OneDnn> onednn_;
  std::string implementation_;
  std::string onednn_status_;
  std::vector<float> a32_, b32_;      // emulation: operands rounded to 16-bit values
  std::vector<uint16_t> a16_, b16_;   // oneDNN: operands as 16-bit bit patterns
  int64_t calls_ = 0;
};

}  // namespace moe4d
