// bench/gemm/kernel_timings.h — timing helpers shared by gemm_bench's sections.
#pragma once

#include <nlohmann/json.hpp>

#include <chrono>
#include <functional>

namespace moe4d::bench {

// Best wall time in milliseconds of `fn` over at least `min_reps` runs (and at least ~0.2 s of
// runs), after one untimed warm-up run.
inline double best_ms(const std::function<void()>& fn, int min_reps = 5) {
  using Clock = std::chrono::steady_clock;
  fn();
  double best = 1e300, total = 0.0;
  for (int rep = 0; rep < min_reps || (total < 200.0 && rep < 1000); ++rep) {
    const auto t0 = Clock::now();
    fn();
    const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    best = ms < best ? ms : best;
    total += ms;
  }
  return best;
}

// Times every non-GEMM kernel at the shapes of the "small" training config (tokens = 8 * 256,
// d = 512, heads = 8, head_dim = 64, ffn = 1376, experts = 8, top_k = 2, vocab = 4096).
nlohmann::json time_non_gemm_kernels();

}  // namespace moe4d::bench
