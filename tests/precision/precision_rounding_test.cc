// 16-bit rounding (kernels/precision.h) against hand-computed bit patterns: round-to-nearest-even,
// subnormals, fp16 overflow to inf, NaN and signed zero; the vectorised loops against the scalar
// functions, and the fp16 functions against the compiler's IEEE _Float16 conversion.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "core/rng.h"
#include "kernels/precision.h"

namespace moe4d {
namespace {

float from_bits(uint32_t bits) { return std::bit_cast<float>(bits); }
uint32_t bits_of(float x) { return std::bit_cast<uint32_t>(x); }

TEST(Bf16Rounding, HandComputedValues) {
  EXPECT_EQ(bf16_bits_from_float(1.0f), 0x3F80);
  EXPECT_EQ(bf16_bits_from_float(-2.5f), 0xC020);
  // 1 + 2^-8 is half-way between 0x3F80 (1) and 0x3F81: ties to the even 0x3F80.
  EXPECT_EQ(bf16_bits_from_float(1.0f + 0x1p-8f), 0x3F80);
  // 1 + 3 x 2^-8 is half-way between 0x3F81 and 0x3F82: ties to the even 0x3F82 = 1 + 2^-6.
  EXPECT_EQ(bf16_bits_from_float(1.0f + 3 * 0x1p-8f), 0x3F82);
  EXPECT_EQ(round_to_precision(DType::kBF16, 1.0f + 3 * 0x1p-8f), 1.015625f);
  // Just above half-way rounds up.
  EXPECT_EQ(bf16_bits_from_float(1.0f + 0x1p-8f + 0x1p-20f), 0x3F81);
  EXPECT_EQ(round_to_precision(DType::kBF16, 3.14159265f), 3.140625f);
  // Overflow: FLT_MAX is past half-way to the next binade, so it rounds to inf; just below half-way
  // stays at the largest bf16 (0x7F7F).
  EXPECT_EQ(bf16_bits_from_float(std::numeric_limits<float>::max()), 0x7F80);
  EXPECT_EQ(bf16_bits_from_float(from_bits(0x7F7F7FFF)), 0x7F7F);
  EXPECT_EQ(bf16_bits_from_float(std::numeric_limits<float>::infinity()), 0x7F80);
  EXPECT_EQ(bf16_bits_from_float(-std::numeric_limits<float>::infinity()), 0xFF80);
  // Subnormals are kept: 2^-133 is bf16's smallest; 1.5 units tie to the even 2 units.
  EXPECT_EQ(bf16_bits_from_float(from_bits(0x00010000)), 0x0001);
  EXPECT_EQ(bf16_bits_from_float(from_bits(0x00018000)), 0x0002);
  EXPECT_EQ(bf16_bits_from_float(from_bits(0x00000001)), 0x0000);  // fp32's smallest: below half a unit
  EXPECT_EQ(bf16_bits_from_float(-0.0f), 0x8000);
  // NaN stays NaN and becomes quiet, also from a signalling NaN whose payload sits in low bits only.
  EXPECT_EQ(bf16_bits_from_float(from_bits(0x7FC00000)), 0x7FC0);
  EXPECT_EQ(bf16_bits_from_float(from_bits(0x7F800001)), 0x7FC0);
  EXPECT_EQ(bf16_bits_from_float(from_bits(0xFFC00000)), 0xFFC0);
  EXPECT_TRUE(std::isnan(round_to_precision(DType::kBF16, std::nanf(""))));
  EXPECT_EQ(float_from_bf16_bits(0x3F80), 1.0f);
  EXPECT_EQ(float_from_bf16_bits(0x0001), 0x1p-133f);
}

TEST(Fp16Rounding, HandComputedValues) {
  EXPECT_EQ(fp16_bits_from_float(1.0f), 0x3C00);
  EXPECT_EQ(fp16_bits_from_float(-2.0f), 0xC000);
  EXPECT_EQ(fp16_bits_from_float(0.1f), 0x2E66);  // 0.0999755859375
  EXPECT_EQ(round_to_precision(DType::kF16, 0.1f), 0.0999755859375f);
  EXPECT_EQ(round_to_precision(DType::kF16, 3.14159265f), 3.140625f);
  // 1 + 2^-11 is half-way between 1 and 1 + 2^-10: ties to the even 0x3C00; 1 + 3 x 2^-11 to 0x3C02.
  EXPECT_EQ(fp16_bits_from_float(1.0f + 0x1p-11f), 0x3C00);
  EXPECT_EQ(fp16_bits_from_float(1.0f + 3 * 0x1p-11f), 0x3C02);
  // Overflow: 65504 is the largest finite fp16; from 65520 (half-way to 2^16) on it is inf.
  EXPECT_EQ(fp16_bits_from_float(65504.0f), 0x7BFF);
  EXPECT_EQ(fp16_bits_from_float(65519.99f), 0x7BFF);
  EXPECT_EQ(fp16_bits_from_float(65520.0f), 0x7C00);
  EXPECT_EQ(fp16_bits_from_float(1e6f), 0x7C00);
  EXPECT_EQ(fp16_bits_from_float(-1e6f), 0xFC00);
  EXPECT_TRUE(std::isinf(round_to_precision(DType::kF16, 70000.0f)));
  EXPECT_EQ(fp16_bits_from_float(std::numeric_limits<float>::infinity()), 0x7C00);
  // Normal / subnormal boundary and subnormals in units of 2^-24, ties to even.
  EXPECT_EQ(fp16_bits_from_float(0x1p-14f), 0x0400);
  EXPECT_EQ(fp16_bits_from_float(0x1p-14f - 0x1p-25f), 0x0400);  // 1023.5 units: to the even 1024
  EXPECT_EQ(fp16_bits_from_float(0x1p-14f - 0x1p-24f), 0x03FF);  // the largest subnormal
  EXPECT_EQ(fp16_bits_from_float(0x1p-24f), 0x0001);
  EXPECT_EQ(fp16_bits_from_float(0x1p-25f), 0x0000);              // half a unit: to the even 0
  EXPECT_EQ(fp16_bits_from_float(from_bits(0x33000001)), 0x0001);  // just above half a unit
  EXPECT_EQ(fp16_bits_from_float(3 * 0x1p-25f), 0x0002);          // 1.5 units: to 2
  EXPECT_EQ(fp16_bits_from_float(5 * 0x1p-25f), 0x0002);          // 2.5 units: to 2
  EXPECT_EQ(fp16_bits_from_float(7 * 0x1p-25f), 0x0004);          // 3.5 units: to 4
  EXPECT_EQ(fp16_bits_from_float(-0x1p-24f), 0x8001);
  EXPECT_EQ(fp16_bits_from_float(1e-9f), 0x0000);                 // underflow to zero
  EXPECT_EQ(fp16_bits_from_float(-1e-9f), 0x8000);                // keeps the sign
  EXPECT_EQ(round_to_precision(DType::kF16, 1e-5f), 168 * 0x1p-24f);  // 167.77 units
  // NaN: quiet, sign kept.
  EXPECT_EQ(fp16_bits_from_float(from_bits(0x7FC00000)), 0x7E00);
  EXPECT_EQ(fp16_bits_from_float(from_bits(0x7F800001)), 0x7E00);
  EXPECT_EQ(fp16_bits_from_float(from_bits(0xFFC00000)), 0xFE00);
  EXPECT_EQ(float_from_fp16_bits(0x7BFF), 65504.0f);
  EXPECT_EQ(float_from_fp16_bits(0x0001), 0x1p-24f);
  EXPECT_EQ(float_from_fp16_bits(0x83FF), -(0x1p-14f - 0x1p-24f));
  EXPECT_TRUE(std::isinf(float_from_fp16_bits(0xFC00)) && float_from_fp16_bits(0xFC00) < 0);
  EXPECT_TRUE(std::isnan(float_from_fp16_bits(0x7E00)));
}

TEST(Fp32Rounding, IsTheIdentity) {
  EXPECT_EQ(round_to_precision(DType::kF32, 0.1f), 0.1f);
  std::vector<float> x = {1.0f, 0.1f, -3e-40f};
  std::vector<float> y(3);
  round_to_precision(DType::kF32, x.data(), y.data(), 3);
  EXPECT_EQ(x, y);
}

// Every bit-pattern class: random 32-bit words (all exponents, subnormals, inf, NaN payloads).
std::vector<float> random_bit_patterns(size_t n) {
  CounterRng rng(77);
  std::vector<float> x(n);
  for (size_t i = 0; i < n; ++i) x[i] = from_bits(static_cast<uint32_t>(rng.next_u64()));
  return x;
}

bool same_value(float a, float b) { return (std::isnan(a) && std::isnan(b)) || bits_of(a) == bits_of(b); }

TEST(Fp16Rounding, MatchesTheCompilersIeeeConversion) {
  const std::vector<float> x = random_bit_patterns(200000);
  for (float v : x) {
    const _Float16 h = static_cast<_Float16>(v);  // IEEE round-to-nearest-even (GCC)
    const uint16_t expected = std::bit_cast<uint16_t>(h);
    const uint16_t got = fp16_bits_from_float(v);
    if (std::isnan(v)) {
      EXPECT_EQ(got & 0x7C00, 0x7C00) << std::hex << bits_of(v);
      EXPECT_NE(got & 0x03FF, 0) << std::hex << bits_of(v);
    } else {
      ASSERT_EQ(got, expected) << "input bits " << std::hex << bits_of(v);
    }
    ASSERT_TRUE(same_value(float_from_fp16_bits(got), static_cast<float>(static_cast<_Float16>(v))));
  }
}

TEST(HalfRounding, VectorisedLoopsMatchTheScalarFunctions) {
  const std::vector<float> x = random_bit_patterns(10007);  // odd length: vector body and scalar tail
  for (DType type : {DType::kBF16, DType::kF16}) {
    std::vector<float> out(x.size());
    round_to_precision(type, x.data(), out.data(), int64_t(x.size()));
    for (size_t i = 0; i < x.size(); ++i)
      ASSERT_TRUE(same_value(out[i], round_to_precision(type, x[i]))) << dtype_name(type) << " at " << i;
    // In place gives the same.
    std::vector<float> in_place = x;
    round_to_precision(type, in_place.data(), in_place.data(), int64_t(x.size()));
    for (size_t i = 0; i < x.size(); ++i) ASSERT_TRUE(same_value(in_place[i], out[i]));
  }
}

TEST(HalfRounding, MatricesWithLeadingDimensionConvertRowByRow) {
  const int rows = 5, cols = 11, ld = 16;
  std::vector<float> in(size_t(rows) * ld);
  for (size_t i = 0; i < in.size(); ++i) in[i] = normal_at(3, i) * 100.0f;
  for (DType type : {DType::kBF16, DType::kF16}) {
    std::vector<float> rounded(size_t(rows) * cols);
    std::vector<uint16_t> bits(size_t(rows) * cols);
    round_matrix_to_precision(type, in.data(), rows, cols, ld, rounded.data());
    convert_matrix_to_half(type, in.data(), rows, cols, ld, bits.data());
    for (int r = 0; r < rows; ++r)
      for (int c = 0; c < cols; ++c) {
        const float v = in[size_t(r) * ld + c];
        EXPECT_EQ(rounded[size_t(r) * cols + c], round_to_precision(type, v));
        const float decoded = type == DType::kBF16 ? float_from_bf16_bits(bits[size_t(r) * cols + c])
                                                   : float_from_fp16_bits(bits[size_t(r) * cols + c]);
        EXPECT_EQ(decoded, round_to_precision(type, v));
      }
  }
}

}  // namespace
}  // namespace moe4d
