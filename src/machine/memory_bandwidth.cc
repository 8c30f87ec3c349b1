// machine/memory_bandwidth.cc — copy and triad over large arrays.
#include "machine/memory_bandwidth.h"
#include "machine/thread_cpu_time.h"

#include <algorithm>
#include <vector>

namespace moe4d {
namespace {

// Best of `repeats` passes after a warm-up pass, in this thread's CPU time (as machine/gemm_survey.cc:
// equal to wall time on a quiet machine, without other processes' slices on a shared one).
template <typename Fn>
double best_seconds(Fn&& fn, int repeats) {
  fn();
  double best = 1e300;
  for (int r = 0; r < std::max(1, repeats); ++r) {
    const double t0 = thread_cpu_seconds();
    fn();
    best = std::min(best, thread_cpu_seconds() - t0);
  }
  return best;
}

}  // namespace

MemoryBandwidth measure_memory_bandwidth(size_t array_bytes, int repeats) {
  const size_t n = std::max<size_t>(array_bytes / sizeof(float), 1024);
  std::vector<float> a(n, 0.0f), b(n, 1.0f), c(n, 2.0f);
  const float s = 0.5f;
  float* pa = a.data();
  const float* pb = b.data();
  const float* pc = c.data();
  MemoryBandwidth out;
  out.array_bytes = n * sizeof(float);
  const double bytes = double(n) * sizeof(float);
  out.copy = 2 * bytes / best_seconds([&] { std::copy(pb, pb + n, pa); }, repeats);
  out.triad = 3 * bytes / best_seconds(
                              [&] {
                                for (size_t i = 0; i < n; ++i) pa[i] = pb[i] + s * pc[i];
                              },
                              repeats);
  // Keep the result observable so the loops cannot be dropped.
  volatile float sink = pa[n / 2];
  (void)sink;
  return out;
}

}  // namespace moe4d
