// kernels/precision.cc — bf16 / fp16 conversion and rounding (scalar reference, vectorised loops).
#include "kernels/precision.h"

#include <bit>
#include <cstring>

#if defined(__F16C__) && defined(__AVX__)
#include <immintrin.h>
#define MOE4D_HAVE_F16C 1
#endif

#include "core/check.h"

namespace moe4d {
namespace {

// bf16 rounding on the fp32 bit pattern: add just under half an ulp of bf16, plus one if the kept
// part is odd (ties to even), then truncate. Overflow carries into the exponent (up to inf), which is
// the IEEE result. NaN is handled apart so that the carry cannot turn it into inf; its quiet bit is set.
inline uint32_t bf16_rounded_bits(uint32_t u) {
  if ((u & 0x7fffffffu) > 0x7f800000u) return (u | 0x00400000u) & 0xffff0000u;
  return (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
}

}  // namespace

uint16_t bf16_bits_from_float(float x) {
  return static_cast<uint16_t>(bf16_rounded_bits(std::bit_cast<uint32_t>(x)) >> 16);
}

float float_from_bf16_bits(uint16_t bits) { return std::bit_cast<float>(static_cast<uint32_t>(bits) << 16); }

uint16_t fp16_bits_from_float(float x) {
  const uint32_t u = std::bit_cast<uint32_t>(x);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  const uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u)  // NaN: quiet, keep the top of the payload
    return static_cast<uint16_t>(sign | 0x7e00u | ((a >> 13) & 0x3ffu));
  if (a >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // >= 65520 (half-way to 2^16): inf
  if (a >= 0x38800000u) {  // normal fp16 (>= 2^-14): re-bias the exponent, round 13 mantissa bits away
    const uint32_t r = a - 0x38000000u;  // (127 - 15) << 23
    return static_cast<uint16_t>(sign | ((r + 0xfffu + ((r >> 13) & 1u)) >> 13));
  }
  if (a <= 0x33000000u) return sign;  // <= 2^-25: half-way to the smallest subnormal or below, ties to 0
  // Subnormal fp16: the value in units of 2^-24 is mantissa * 2^(e - 126), e the fp32 biased exponent
  // (102..112 here), so shift the implicit-bit mantissa right by 126 - e with ties to even. A carry
  // into bit 10 gives the smallest normal, which is the right bit pattern.
  const uint32_t e = a >> 23;
  const uint32_t mantissa = (a & 0x7fffffu) | 0x800000u;
  const uint32_t shift = 126u - e;
  uint32_t r = mantissa >> shift;
  const uint32_t rest = mantissa & ((1u << shift) - 1u), half = 1u << (shift - 1u);
  if (rest > half || (rest == half && (r & 1u))) ++r;
  return static_cast<uint16_t>(sign | r);
}

float float_from_fp16_bits(uint16_t bits) {
  const uint32_t sign = static_cast<uint32_t>(bits & 0x8000u) << 16;
  const uint32_t exponent = (bits >> 10) & 0x1fu, mantissa = bits & 0x3ffu;
  if (exponent == 0x1fu) return std::bit_cast<float>(sign | 0x7f800000u | (mantissa << 13));  // inf / NaN
  if (exponent != 0) return std::bit_cast<float>(sign | ((exponent + 112u) << 23) | (mantissa << 13));
  // Zero or subnormal: mantissa * 2^-24, exact in fp32.
  const float magnitude = static_cast<float>(mantissa) * 0x1p-24f;
  return sign ? -magnitude : magnitude;
}

float round_to_precision(DType type, float x) {
  switch (type) {
    case DType::kBF16: return std::bit_cast<float>(bf16_rounded_bits(std::bit_cast<uint32_t>(x)));
    case DType::kF16: return float_from_fp16_bits(fp16_bits_from_float(x));
    case DType::kF32: return x;
    default: MOE4D_CHECK_MSG(false, "round_to_precision: {} is not a floating-point compute type", dtype_name(type));
  }
  return x;
}

void round_to_precision(DType type, const float* in, float* out, int64_t n) {
  if (type == DType::kF32) {
    if (out != in) std::memcpy(out, in, sizeof(float) * size_t(n));
    return;
  }
  int64_t i = 0;
  if (type == DType::kBF16) {
    // Branch-free form of bf16_rounded_bits, so that the loop vectorises.
    for (; i < n; ++i) {
      const uint32_t u = std::bit_cast<uint32_t>(in[i]);
      const uint32_t rounded = u + 0x7fffu + ((u >> 16) & 1u);
      const uint32_t r = (u & 0x7fffffffu) > 0x7f800000u ? (u | 0x00400000u) : rounded;
      out[i] = std::bit_cast<float>(r & 0xffff0000u);
    }
    return;
  }
  MOE4D_CHECK_MSG(type == DType::kF16, "round_to_precision: {} is not a floating-point compute type",
                  dtype_name(type));
#ifdef MOE4D_HAVE_F16C
  // vcvtps2ph with round-to-nearest-even is the scalar function above, 8 lanes at a time (tested).
  for (; i + 8 <= n; i += 8) {
    const __m128i half = _mm256_cvtps_ph(_mm256_loadu_ps(in + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm256_storeu_ps(out + i, _mm256_cvtph_ps(half));
  }
#endif
  for (; i < n; ++i) out[i] = float_from_fp16_bits(fp16_bits_from_float(in[i]));
}

void round_matrix_to_precision(DType type, const float* in, int64_t rows, int64_t cols, int64_t ld_in, float* out) {
  if (ld_in == cols) {
    round_to_precision(type, in, out, rows * cols);
    return;
  }
  for (int64_t r = 0; r < rows; ++r) round_to_precision(type, in + r * ld_in, out + r * cols, cols);
}

void convert_matrix_to_half(DType type, const float* in, int64_t rows, int64_t cols, int64_t ld_in, uint16_t* out) {
  MOE4D_CHECK_MSG(is_half_precision(type), "convert_matrix_to_half: {} is not a 16-bit float type", dtype_name(type));
  for (int64_t r = 0; r < rows; ++r) {
    const float* src = in + r * ld_in;
    uint16_t* dst = out + r * cols;
    int64_t c = 0;
    if (type == DType::kBF16) {
      for (; c < cols; ++c) {
        const uint32_t u = std::bit_cast<uint32_t>(src[c]);
        const uint32_t rounded = u + 0x7fffu + ((u >> 16) & 1u);
        const uint32_t bits = (u & 0x7fffffffu) > 0x7f800000u ? (u | 0x00400000u) : rounded;
        dst[c] = static_cast<uint16_t>(bits >> 16);
      }
      continue;
    }
#ifdef MOE4D_HAVE_F16C
    for (; c + 8 <= cols; c += 8)
      _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + c),
                       _mm256_cvtps_ph(_mm256_loadu_ps(src + c), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
#endif
    for (; c < cols; ++c) dst[c] = fp16_bits_from_float(src[c]);
  }
}

}  // namespace moe4d
