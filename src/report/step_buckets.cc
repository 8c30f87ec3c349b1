// report/step_buckets.cc — round-numbered step buckets for long runs.
#include "report/step_buckets.h"

#include "core/check.h"

namespace moe4d {

namespace {

// Rounds towards +infinity for either sign (step 0 is bucket 0, steps 1..per bucket 1).
int64_t ceil_div(int64_t a, int64_t b) { return a >= 0 ? (a + b - 1) / b : -((-a) / b); }

}  // namespace

StepBuckets bucket_steps(const std::vector<int64_t>& steps, size_t max_buckets) {
  MOE4D_CHECK_GT(max_buckets, size_t{0});
  StepBuckets out;
  if (steps.empty()) return out;
  const int64_t span = steps.back() - steps.front() + 1;
  const int64_t max = static_cast<int64_t>(max_buckets);
  for (int64_t base = 1; out.per * max < span; base *= 10) {
    for (int64_t m : {1, 2, 5, 10}) {
      out.per = m * base;
      if (out.per * max >= span) break;
    }
  }
  for (size_t i = 0; i < steps.size();) {
    const int64_t id = ceil_div(steps[i], out.per);
    size_t j = i;
    while (j < steps.size() && ceil_div(steps[j], out.per) == id) ++j;
    const int64_t last = id * out.per;
    out.buckets.push_back({i, j, out.per == 1 ? steps[i] : last, double(last) - double(out.per - 1) / 2});
    i = j;
  }
  return out;
}

}  // namespace moe4d
