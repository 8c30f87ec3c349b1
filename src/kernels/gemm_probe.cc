#include "kernels/gemm_probe.h"

#include <algorithm>
#include <chrono>
#include <vector>

#include "core/rng.h"
#include "kernels/gemm.h"

namespace moe4d {

double sgemm_gflops(int m, int n, int k, bool trans_a, bool trans_b, int repeats) {
  std::vector<float> a(size_t(m) * k), b(size_t(k) * n), c(size_t(m) * n);
  for (size_t i = 0; i < a.size(); ++i) a[i] = normal_at(1, i);
  for (size_t i = 0; i < b.size(); ++i) b[i] = normal_at(2, i);
  const int lda = trans_a ? m : k, ldb = trans_b ? k : n;
  auto run = [&] { gemm(trans_a, trans_b, m, n, k, 1.0f, a.data(), lda, b.data(), ldb, 0.0f, c.data(), n); };
  run();  // warm-up
  double best = 1e30;
  for (int r = 0; r < repeats; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    run();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return 2.0 * m * n * k / best / 1e9;
}

double sgemm_peak_gflops(int repeats) {
  double peak = 0;
  for (int n : {512, 1024, 2048}) peak = std::max(peak, sgemm_gflops(n, n, n, false, false, repeats));
  return peak;
}

}  // namespace moe4d
