// kernels/precision.h — 16-bit floating point (bf16, fp16): conversion and rounding of fp32 values.
//
// The mixed-precision path (kernels/precision_gemm.h, docs/precision.md) keeps fp32 buffers and
// rounds the values that a real 16-bit path would hold in 16 bits. These functions are that
// rounding, in round-to-nearest-even (ties to even):
//   bf16: 8 exponent bits like fp32, 7 stored mantissa bits. Finite values beyond the largest bf16
//         (0x7f7f = 3.3895e38) round to inf as IEEE overflow does; subnormals are kept (the
//         conversion of PyTorch and Eigen; AVX-512 vcvtneps2bf16 would flush them to zero).
//   fp16: 5 exponent bits, 10 mantissa bits, bit-exact with the F16C vcvtps2ph conversion. Largest
//         finite 65504; |x| >= 65520 rounds to inf (the overflow loss scaling guards against);
//         below 2^-14 subnormal steps of 2^-24;
//         |x| <= 2^-25 rounds to (signed) zero.
//   NaN stays NaN (made quiet, sign kept); inf stays inf.
// Pure functions; thread-safe.
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace moe4d {

// Bit patterns of the 16-bit formats.
uint16_t bf16_bits_from_float(float x);
float float_from_bf16_bits(uint16_t bits);
uint16_t fp16_bits_from_float(float x);
float float_from_fp16_bits(uint16_t bits);

// x rounded to the nearest value representable in `type` (kBF16 or kF16), as fp32. kF32: x.
float round_to_precision(DType type, float x);

// out[i] = round_to_precision(type, in[i]) for i < n. `out` may equal `in`. Vectorised.
void round_to_precision(DType type, const float* in, float* out, int64_t n);

// The rows x cols block of `in` (leading dimension ld_in) rounded into contiguous out[rows, cols].
void round_matrix_to_precision(DType type, const float* in, int64_t rows, int64_t cols, int64_t ld_in, float* out);

// The same block converted to 16-bit bit patterns (type kBF16 or kF16), contiguous [rows, cols].
void convert_matrix_to_half(DType type, const float* in, int64_t rows, int64_t cols, int64_t ld_in, uint16_t* out);

// True for the 16-bit compute types kBF16 and kF16.
inline bool is_half_precision(DType type) { return type == DType::kBF16 || type == DType::kF16; }

}  // namespace moe4d
