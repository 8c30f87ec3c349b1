// tests/report/step_buckets_test.cc — round-numbered step buckets against hand-computed cases.
#include "report/step_buckets.h"

#include <gtest/gtest.h>

#include <numeric>

namespace moe4d {
namespace {

std::vector<int64_t> range(int64_t first, int64_t last) {
  std::vector<int64_t> v(size_t(last - first + 1));
  std::iota(v.begin(), v.end(), first);
  return v;
}

TEST(StepBuckets, ShortRunsKeepEveryStep) {
  const StepBuckets b = bucket_steps(range(1, 30), 150);
  EXPECT_EQ(b.per, 1);
  ASSERT_EQ(b.buckets.size(), 30u);
  EXPECT_EQ(b.buckets[4].begin, 4u);
  EXPECT_EQ(b.buckets[4].end, 5u);
  EXPECT_EQ(b.buckets[4].label_step, 5);
  EXPECT_DOUBLE_EQ(b.buckets[4].center, 5);
}

TEST(StepBuckets, LongRunsUseRoundBucketSizes) {
  // 400 / 150 = 2.7 -> 5 steps per bucket: 1-5, 6-10, ..., 396-400.
  const StepBuckets b = bucket_steps(range(1, 400), 150);
  EXPECT_EQ(b.per, 5);
  ASSERT_EQ(b.buckets.size(), 80u);
  EXPECT_EQ(b.buckets[0].begin, 0u);
  EXPECT_EQ(b.buckets[0].end, 5u);
  EXPECT_EQ(b.buckets[0].label_step, 5);
  EXPECT_DOUBLE_EQ(b.buckets[0].center, 3);
  EXPECT_EQ(b.buckets[79].label_step, 400);
  // 100000 / 150 = 667 -> 1000.
  const StepBuckets big = bucket_steps(range(1, 100000), 150);
  EXPECT_EQ(big.per, 1000);
  EXPECT_EQ(big.buckets.size(), 100u);
}

TEST(StepBuckets, BucketsAlignToMultiplesAndSkipGaps) {
  // A run resumed at step 100: 300 steps -> 2 per bucket, aligned (101-102, ..., 399-400).
  const StepBuckets resumed = bucket_steps(range(101, 400), 150);
  EXPECT_EQ(resumed.per, 2);
  ASSERT_EQ(resumed.buckets.size(), 150u);
  EXPECT_EQ(resumed.buckets[0].label_step, 102);
  // Span 301 -> 5 per bucket; 100 straddles: buckets 96-100 (one step), 101-105, ..., 396-400.
  const StepBuckets straddling = bucket_steps(range(100, 400), 150);
  EXPECT_EQ(straddling.per, 5);
  ASSERT_EQ(straddling.buckets.size(), 61u);
  EXPECT_EQ(straddling.buckets[0].end - straddling.buckets[0].begin, 1u);
  // Missing steps leave no empty buckets behind.
  const StepBuckets gaps = bucket_steps({1, 2, 3, 50, 51}, 150);
  EXPECT_EQ(gaps.per, 1);
  EXPECT_EQ(gaps.buckets.size(), 5u);
  EXPECT_TRUE(bucket_steps({}, 150).buckets.empty());
}

}  // namespace
}  // namespace moe4d
