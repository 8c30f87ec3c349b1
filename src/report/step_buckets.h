// report/step_buckets.h — grouping the steps of a long run into round-numbered buckets, so that a
// picture of 100k steps has ~150 bars or heatmap columns, each the mean of 1, 2, 5, 10, 20, ...
// steps, and its labels read 200, 400, 600 rather than 1, 201, 401. Pure; thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace moe4d {

// The entries [begin, end) of a sorted step list that fall into one bucket.
struct StepBucket {
  size_t begin = 0, end = 0;
  int64_t label_step = 0;  // the bucket's last step number (the step itself when per == 1)
  double center = 0;       // the middle of the bucket's step numbers (where its bar stands)
};

struct StepBuckets {
  int64_t per = 1;                  // step numbers per bucket: 1, 2, 5, 10, 20, ...
  std::vector<StepBucket> buckets;  // non-empty buckets only, in step order
};

// Buckets of `per` consecutive step numbers aligned to multiples of per (steps 1-10, 11-20, ...),
// per being the smallest 1/2/5 x 10^k that covers the span of `steps` (sorted, increasing) with at
// most `max_buckets` buckets (one more when the span straddles a bucket boundary).
StepBuckets bucket_steps(const std::vector<int64_t>& steps, size_t max_buckets);

}  // namespace moe4d
