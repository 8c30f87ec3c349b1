// kernels/vec_math.h — SIMD helpers shared by the kernel .cc files (internal to src/kernels).
//
// The build does not use -ffast-math: training must be reproducible and NaN/Inf must propagate so
// that loss-scale overflow is detected. Without it GCC neither vectorises float reductions (they
// are not associative) nor anything that calls expf (math-errno, trapping compares), so:
//   - reductions keep kLanes independent partial results combined in a fixed order at the end; the
//     summation order depends only on n, so results are deterministic;
//   - exp/sigmoid are written once as templates over a value type V that is either `float` or a
//     GCC vector of floats (`Vf`, kWidth lanes), and element-wise kernels run their body on Vf
//     chunks plus a scalar tail via `map_lanes`. The vector and scalar paths compute the same
//     formula, so the result of an element does not depend on where it falls.
#pragma once

#if defined(__AVX__) || defined(__AVX512F__)
#include <immintrin.h>
#endif

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

namespace moe4d::vec {

// One native register of floats: 16 lanes with AVX-512, 8 with AVX/AVX2, 4 otherwise (SSE).
#if defined(__AVX512F__)
inline constexpr int kWidth = 16;
#elif defined(__AVX__)
inline constexpr int kWidth = 8;
#else
inline constexpr int kWidth = 4;
#endif
using Vf = float __attribute__((vector_size(kWidth * sizeof(float))));
using Vi = int32_t __attribute__((vector_size(kWidth * sizeof(int32_t))));

inline Vf load(const float* p) {
  Vf v;
  std::memcpy(&v, p, sizeof(v));  // unaligned load
  return v;
}
inline void store(float* p, Vf v) { std::memcpy(p, &v, sizeof(v)); }

// The integer type with the shape of V, and broadcasting of constants to V.
template <typename V> struct IntOf { using type = int32_t; };
template <> struct IntOf<Vf> { using type = Vi; };
template <typename V> inline V splat(float c) { return V{} + c; }
template <> inline float splat<float>(float c) { return c; }

// exp(x), max relative error ~1e-7 over the normal range (Cephes expf: range reduction by ln 2 and
// a degree-6 polynomial); exp(+inf) = +inf, exp(-inf) = 0, exp(NaN) = NaN and the subnormal range
// fall out of the arithmetic (2^n is applied as two normal factors, so ordinary rounding produces
// overflow and gradual underflow).
template <typename V>
inline V exp(V x) {
  using I = typename IntOf<V>::type;
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kLn2Hi = 0.693359375f;  // ln 2 in two parts so that n * kLn2Hi is exact
  constexpr float kLn2Lo = -2.12194440e-4f;
  constexpr float kRoundMagic = 12582912.0f;  // 1.5 * 2^23: adding it rounds to the nearest integer
  const V hi = splat<V>(89.0f);    // exp(89) > FLT_MAX: the final product overflows to +inf
  const V lo = splat<V>(-104.0f);  // exp(-104) < FLT_TRUE_MIN / 2: the final product rounds to 0
  V xc = x > hi ? hi : x;  // NaN passes through both clamps and poisons r
  xc = xc < lo ? lo : xc;
  const V t = xc * kLog2e + kRoundMagic;
  const V n = t - kRoundMagic;
  const I ni = std::bit_cast<I>(t) - std::bit_cast<int32_t>(kRoundMagic);  // in [-150, 128]
  const V r = (xc - n * kLn2Hi) - n * kLn2Lo;                               // |r| <= ln2 / 2
  V p = splat<V>(1.9875691500e-4f);
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * (r * r) + r + 1.0f;
  const I n2 = ni >> 1;
  const I n1 = ni - n2;  // n1, n2 in [-75, 64]: 2^n1 and 2^n2 are normal floats
  return (p * std::bit_cast<V>((n1 + 127) << 23)) * std::bit_cast<V>((n2 + 127) << 23);
}

// sigmoid(x) = 1 / (1 + exp(-x)); saturates to exactly 0 and 1.
template <typename V>
inline V sigmoid(V x) {
  return 1.0f / (1.0f + exp(-x));
}

// IEEE square root (correctly rounded in both forms). The vector form goes through the intrinsic:
// GCC does not vectorise std::sqrt while -fmath-errno (the default) is on.
inline float sqrt(float x) { return std::sqrt(x); }
inline Vf sqrt(Vf x) {
#if defined(__AVX512F__)
  // The maskz form: GCC 12's _mm512_sqrt_ps trips -Wmaybe-uninitialized inside its own header.
  return std::bit_cast<Vf>(_mm512_maskz_sqrt_ps(static_cast<__mmask16>(0xFFFF), std::bit_cast<__m512>(x)));
#elif defined(__AVX__)
  return std::bit_cast<Vf>(_mm256_sqrt_ps(std::bit_cast<__m256>(x)));
#else
  Vf r;
  for (int l = 0; l < kWidth; ++l) r[l] = std::sqrt(x[l]);
  return r;
#endif
}

// Runs body(i, tag) over [0, n): on Vf chunks (tag Vf{}) then on the scalar tail (tag 0.0f). The body
// is a generic lambda that loads with get<V>, stores with put and computes with V = decltype(tag).
template <typename Body>
inline void map_lanes(int64_t n, Body&& body) {
  const int64_t body_end = n - n % kWidth;
  for (int64_t i = 0; i < body_end; i += kWidth) body(i, Vf{});
  for (int64_t i = body_end; i < n; ++i) body(i, 0.0f);
}

// Loads kWidth floats (V = Vf) or one float (V = float) from p.
template <typename V> inline V get(const float* p) { return load(p); }
template <> inline float get<float>(const float* p) { return *p; }
inline void put(float* p, Vf v) { store(p, v); }
inline void put(float* p, float v) { *p = v; }

// Independent partial accumulators of the lane reductions: enough to hide FMA latency.
inline constexpr int kLanes = 32;

// sum_i f(i) over i in [0, n), vectorised through kLanes partial sums (fixed order).
template <typename Fn>
inline float lane_sum(int64_t n, Fn&& f) {
  float acc[kLanes] = {};
  const int64_t body_end = n - n % kLanes;
  for (int64_t i = 0; i < body_end; i += kLanes)
    for (int l = 0; l < kLanes; ++l) acc[l] += f(i + l);
  for (int64_t i = body_end; i < n; ++i) acc[i - body_end] += f(i);
  float s = 0.0f;
  for (int l = 0; l < kLanes; ++l) s += acc[l];
  return s;
}

inline float sum(const float* x, int64_t n) {
  return lane_sum(n, [x](int64_t i) { return x[i]; });
}

inline float dot(const float* x, const float* y, int64_t n) {
  return lane_sum(n, [x, y](int64_t i) { return x[i] * y[i]; });
}

// max_i x[i]; -inf for n == 0; NaN if any x[i] is NaN (a plain compare-max would skip NaNs).
inline float max(const float* x, int64_t n) {
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  Vf m0 = splat<Vf>(kNegInf), m1 = m0;
  Vi nan{};
  const int64_t body_end = n - n % (2 * kWidth);
  for (int64_t i = 0; i < body_end; i += 2 * kWidth) {
    const Vf a = load(x + i), b = load(x + i + kWidth);
    m0 = a > m0 ? a : m0;
    m1 = b > m1 ? b : m1;
    nan |= (a != a) | (b != b);
  }
  m0 = m1 > m0 ? m1 : m0;
  float m = kNegInf;
  bool has_nan = false;
  for (int l = 0; l < kWidth; ++l) {
    m = m0[l] > m ? m0[l] : m;
    has_nan |= nan[l] != 0;
  }
  for (int64_t i = body_end; i < n; ++i) {
    m = x[i] > m ? x[i] : m;
    has_nan |= x[i] != x[i];
  }
  return has_nan ? std::numeric_limits<float>::quiet_NaN() : m;
}

// sum_i exp(x[i] - shift), vectorised.
inline float sum_exp(const float* x, float shift, int64_t n) {
  Vf acc0{}, acc1{};
  const int64_t body_end = n - n % (2 * kWidth);
  for (int64_t i = 0; i < body_end; i += 2 * kWidth) {
    acc0 += exp(load(x + i) - shift);
    acc1 += exp(load(x + i + kWidth) - shift);
  }
  float tail = 0.0f;
  for (int64_t i = body_end; i < n; ++i) tail += exp(x[i] - shift);
  const Vf acc = acc0 + acc1;
  float s = 0.0f;
  for (int l = 0; l < kWidth; ++l) s += acc[l];
  return s + tail;
}

}  // namespace moe4d::vec
