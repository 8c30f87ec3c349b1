// tests/data/window_sampler_test.cc — deterministic training windows and fixed validation windows.
// The shard holds ids 0, 1, 2, ... so every id names its own position.
#include "data/window_sampler.h"

#include <gtest/gtest.h>

#include <numeric>
#include <set>

#include "data/token_shard_writer.h"
#include "data_test_util.h"

namespace moe4d {
namespace {

using test::expect_error;

constexpr int kTokens = 10000;

class WindowSamplerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::vector<int> ids(kTokens);
    std::iota(ids.begin(), ids.end(), 0);
    write_token_shard(dir_.file("pos"), ids, 70000, "bytes", 1);
    dataset_ = std::make_unique<TokenDataset>(TokenDataset::open(dir_.file("pos")));
  }
  const TokenDataset& dataset() const { return *dataset_; }
  test::TempDir dir_;
  std::unique_ptr<TokenDataset> dataset_;
};

TEST_F(WindowSamplerTest, WindowIsContiguousAndTargetsAreShiftedInputs) {
  const int seq_len = 64;
  std::vector<int32_t> inputs(seq_len), targets(seq_len);
  for (int64_t step = 0; step < 50; ++step) {
    sample_training_window(dataset(), 42, step, 3, seq_len, inputs.data(), targets.data());
    int64_t start = training_window_offset(kTokens, 42, step, 3, seq_len);
    ASSERT_GE(start, 0);
    ASSERT_LT(start, kTokens - seq_len);
    for (int j = 0; j < seq_len; ++j) {
      ASSERT_EQ(inputs[j], start + j);
      ASSERT_EQ(targets[j], start + j + 1);
    }
  }
}

TEST_F(WindowSamplerTest, SameArgumentsSameWindowDifferentStepOrSequenceDiffers) {
  const int seq_len = 16;
  auto start_of = [&](uint64_t seed, int64_t step, int64_t sequence) {
    std::vector<int32_t> inputs(seq_len), targets(seq_len);
    sample_training_window(dataset(), seed, step, sequence, seq_len, inputs.data(), targets.data());
    return inputs[0];
  };
  EXPECT_EQ(start_of(1, 5, 2), start_of(1, 5, 2));
  std::set<int32_t> across_steps, across_sequences, across_seeds;
  for (int i = 0; i < 64; ++i) {
    across_steps.insert(start_of(1, i, 0));
    across_sequences.insert(start_of(1, 0, i));
    across_seeds.insert(start_of(static_cast<uint64_t>(i), 0, 0));
  }
  // 64 draws from ~10k offsets: a collision or two is possible, a near-constant sampler is not.
  EXPECT_GE(across_steps.size(), 60u);
  EXPECT_GE(across_sequences.size(), 60u);
  EXPECT_GE(across_seeds.size(), 60u);
}

TEST_F(WindowSamplerTest, OffsetsCoverTheWholeShard) {
  const int seq_len = 100;
  int64_t lo = kTokens, hi = -1;
  std::vector<int> quarter_counts(4, 0);
  for (int64_t step = 0; step < 2000; ++step) {
    int64_t start = training_window_offset(kTokens, 9, step, 0, seq_len);
    lo = std::min(lo, start);
    hi = std::max(hi, start);
    quarter_counts[start * 4 / (kTokens - seq_len)]++;
  }
  EXPECT_LT(lo, 100);
  EXPECT_GT(hi, kTokens - seq_len - 100);
  for (int count : quarter_counts) EXPECT_GT(count, 350);  // ~500 each if uniform
}

TEST_F(WindowSamplerTest, FillBatchMatchesPerSequenceAndAnyDataParallelSplit) {
  const int seq_len = 8, global_batch = 12;
  std::vector<int32_t> whole_in(global_batch * seq_len), whole_tg(global_batch * seq_len);
  fill_batch(dataset(), 3, 17, 0, global_batch, seq_len, whole_in.data(), whole_tg.data());
  for (int s = 0; s < global_batch; ++s) {
    std::vector<int32_t> in(seq_len), tg(seq_len);
    sample_training_window(dataset(), 3, 17, s, seq_len, in.data(), tg.data());
    EXPECT_TRUE(std::equal(in.begin(), in.end(), whole_in.begin() + s * seq_len));
    EXPECT_TRUE(std::equal(tg.begin(), tg.end(), whole_tg.begin() + s * seq_len));
  }
  for (int replicas : {2, 3, 4}) {
    const int per = global_batch / replicas;
    std::vector<int32_t> joined_in, joined_tg;
    for (int r = 0; r < replicas; ++r) {
      std::vector<int32_t> in(per * seq_len), tg(per * seq_len);
      fill_batch(dataset(), 3, 17, r * per, per, seq_len, in.data(), tg.data());
      joined_in.insert(joined_in.end(), in.begin(), in.end());
      joined_tg.insert(joined_tg.end(), tg.begin(), tg.end());
    }
    EXPECT_EQ(joined_in, whole_in) << replicas << " replicas";
    EXPECT_EQ(joined_tg, whole_tg) << replicas << " replicas";
  }
}

TEST_F(WindowSamplerTest, EvalWindowsAreFixedAndEvenlySpread) {
  const int seq_len = 100;
  EXPECT_EQ(max_eval_windows(dataset(), seq_len), (kTokens - 1) / seq_len);
  const int64_t windows = 10;
  std::vector<int32_t> inputs(seq_len), targets(seq_len);
  int64_t previous = -1;
  for (int64_t i = 0; i < windows; ++i) {
    sample_eval_window(dataset(), i, windows, seq_len, inputs.data(), targets.data());
    int64_t start = inputs[0];
    EXPECT_EQ(start, eval_window_offset(kTokens, i, windows, seq_len));
    EXPECT_EQ(targets[seq_len - 1], start + seq_len);
    if (previous >= 0) {
      EXPECT_GE(start - previous, seq_len);  // 10 windows fit without overlap
      EXPECT_NEAR(static_cast<double>(start - previous), (kTokens - seq_len - 1) / 9.0, 1.0);
    }
    previous = start;
  }
  EXPECT_EQ(eval_window_offset(kTokens, 0, windows, seq_len), 0);
  EXPECT_EQ(targets[seq_len - 1], kTokens - 1);  // the last window ends at the shard's end
  EXPECT_EQ(eval_window_offset(kTokens, 0, 1, seq_len), 0);
  // Non-overlapping up to max_eval_windows.
  const int64_t most = max_eval_windows(dataset(), seq_len);
  for (int64_t i = 1; i < most; ++i)
    EXPECT_GE(eval_window_offset(kTokens, i, most, seq_len) - eval_window_offset(kTokens, i - 1, most, seq_len),
              seq_len);
}

TEST_F(WindowSamplerTest, ShortDatasetsAndBadLengthsAreErrors) {
  std::vector<int32_t> inputs(kTokens + 1), targets(kTokens + 1);
  // Exactly seq_len + 1 tokens: one possible window.
  EXPECT_NO_THROW(sample_training_window(dataset(), 0, 0, 0, kTokens - 1, inputs.data(), targets.data()));
  EXPECT_EQ(inputs[0], 0);
  EXPECT_EQ(targets[kTokens - 2], kTokens - 1);
  expect_error([&] { sample_training_window(dataset(), 0, 0, 0, kTokens, inputs.data(), targets.data()); },
               {dir_.file("pos.bin"), "10000 tokens", "seq_length + 1 = 10001"});
  expect_error([&] { sample_eval_window(dataset(), 0, 1, kTokens, inputs.data(), targets.data()); },
               {"seq_length + 1 = 10001"});
  expect_error([&] { fill_batch(dataset(), 0, 0, 0, 1, 0, inputs.data(), targets.data()); },
               {"sequence length 0", dir_.file("pos.bin")});
}

}  // namespace
}  // namespace moe4d
