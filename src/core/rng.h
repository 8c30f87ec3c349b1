// core/rng.h — counter-based random numbers: the value at (key, index) never depends on who asks.
//
// Parameter initialisation and data sampling are pure functions of (seed, name/step, index), so a
// sharded run can generate exactly its own slice of a tensor and get the same numbers as a
// single-rank run, and a resumed run needs no RNG state beyond the step number.
#pragma once

#include <cmath>
#include <cstdint>
#include <string_view>

namespace moe4d {

// SplitMix64 finaliser: a bijective 64-bit mixer with good avalanche.
constexpr uint64_t mix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// FNV-1a over the bytes of a string, then mixed.
constexpr uint64_t hash_string(std::string_view s) {
  uint64_t h = 0xCBF29CE484222325ull;
  for (char c : s) {
    h ^= static_cast<unsigned char>(c);
    h *= 0x100000001B3ull;
  }
  return mix64(h);
}

constexpr uint64_t hash_combine(uint64_t a, uint64_t b) { return mix64(a ^ mix64(b + 0x632BE59BD9B4E019ull)); }

// Uniform in (0, 1), from the top 53 bits of a 64-bit word (never exactly 0).
inline double uniform_from_bits(uint64_t bits) { return (static_cast<double>(bits >> 11) + 0.5) * 0x1.0p-53; }

// Element `index` of a standard-normal stream identified by `key` (Box-Muller on two uniforms).
inline float normal_at(uint64_t key, uint64_t index) {
  uint64_t base = hash_combine(key, index);
  double u1 = uniform_from_bits(mix64(base));
  double u2 = uniform_from_bits(mix64(base ^ 0xD1B54A32D192ED03ull));
  return static_cast<float>(std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2));
}

// A sequential generator whose whole state is one 64-bit counter (trivially checkpointed).
class CounterRng {
 public:
  explicit CounterRng(uint64_t seed = 0, uint64_t counter = 0) : seed_(seed), counter_(counter) {}
  uint64_t next_u64() { return hash_combine(seed_, counter_++); }
  double next_uniform() { return uniform_from_bits(next_u64()); }
  uint64_t seed() const { return seed_; }
  uint64_t counter() const { return counter_; }

 private:
  uint64_t seed_;
  uint64_t counter_;
};

}  // namespace moe4d
