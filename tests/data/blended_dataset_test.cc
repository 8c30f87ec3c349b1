// tests/data/blended_dataset_test.cc — weighted blends: realised proportions, determinism and
// resume, layout independence, the single-source case, and numbered shards as one stream.
#include "data/blended_dataset.h"

#include <gtest/gtest.h>

#include <numeric>

#include "data/token_shard_writer.h"
#include "data/window_sampler.h"
#include "data_test_util.h"

namespace moe4d {
namespace {

using test::expect_error;
using test::TempDir;

// A shard whose ids tell its source apart: source k holds ids in [100 k, 100 k + 100).
std::unique_ptr<TokenSource> numbered_source(TempDir& dir, int k, int tokens) {
  std::vector<int> ids(static_cast<size_t>(tokens));
  for (int i = 0; i < tokens; ++i) ids[size_t(i)] = 100 * k + (i * 7 + k) % 100;
  const std::string path = dir.file(fmt::format("s{}", k));
  write_token_shard(path, ids, 1000, "bytes", 1);
  return open_token_source(path, TokenFormat::kMoe4d, 1000);
}

BlendedDataset make_blend(TempDir& dir, const std::vector<double>& weights, int64_t global_batch, int seq_len = 8) {
  std::vector<BlendSource> sources;
  for (size_t k = 0; k < weights.size(); ++k)
    sources.push_back({numbered_source(dir, int(k), 500 + 100 * int(k)), weights[k], fmt::format("s{}", k)});
  return BlendedDataset(std::move(sources), global_batch, seq_len);
}

TEST(BlendedDataset, RealisedProportionsOver10000SequencesMatchTheWeights) {
  TempDir dir;
  for (const std::vector<double>& weights :
       std::vector<std::vector<double>>{{0.7, 0.3}, {0.5, 0.3, 0.2}, {1, 1, 1, 1}, {0.95, 0.05}}) {
    BlendedDataset blend = make_blend(dir, weights, 16);
    const double total = std::accumulate(weights.begin(), weights.end(), 0.0);
    std::vector<int64_t> counts(weights.size(), 0);
    // 625 steps x 16 sequences = 10,000 sequences, read through fill_batch and told apart by id.
    std::vector<int32_t> inputs(16 * 8), targets(16 * 8);
    for (int64_t step = 1; step <= 625; ++step) {
      blend.fill_batch(3, step, 0, 16, inputs.data(), targets.data());
      for (int s = 0; s < 16; ++s) ++counts[size_t(inputs[size_t(s) * 8] / 100)];
      const std::vector<int64_t> per_step = blend.sequences_per_source(3, step);
      EXPECT_EQ(std::accumulate(per_step.begin(), per_step.end(), int64_t(0)), 16);
    }
    for (size_t k = 0; k < weights.size(); ++k)
      EXPECT_NEAR(double(counts[k]) / 10000.0, weights[k] / total, 0.02) << "source " << k << " of " << weights.size();
  }
}

TEST(BlendedDataset, DeterministicResumableAndLayoutIndependent) {
  TempDir dir;
  BlendedDataset blend = make_blend(dir, {0.7, 0.3}, 8);
  // Steps 1..40 in one run, versus a run "resumed" at step 21 by a fresh object: same draws.
  std::vector<int32_t> straight, resumed;
  std::vector<int32_t> in(8 * 8), tg(8 * 8);
  for (int64_t step = 1; step <= 40; ++step) {
    blend.fill_batch(11, step, 0, 8, in.data(), tg.data());
    straight.insert(straight.end(), in.begin(), in.end());
  }
  BlendedDataset again = make_blend(dir, {0.7, 0.3}, 8);
  resumed.assign(straight.begin(), straight.begin() + 20 * 64);
  for (int64_t step = 21; step <= 40; ++step) {
    again.fill_batch(11, step, 0, 8, in.data(), tg.data());
    resumed.insert(resumed.end(), in.begin(), in.end());
  }
  EXPECT_EQ(straight, resumed);
  // Four data replicas filling 2 sequences each see the same global batch as one rank.
  std::vector<int32_t> one(8 * 8), parts(8 * 8), t(8 * 8);
  blend.fill_batch(11, 5, 0, 8, one.data(), t.data());
  for (int r = 0; r < 4; ++r) blend.fill_batch(11, 5, 2 * r, 2, parts.data() + 2 * r * 8, t.data() + 2 * r * 8);
  EXPECT_EQ(one, parts);
  // Targets are inputs shifted by one within the source's stream.
  for (int s = 0; s < 8; ++s)
    for (int i = 0; i + 1 < 8; ++i) EXPECT_EQ(t[size_t(s * 8 + i)], one[size_t(s * 8 + i + 1)]);
  // Another seed, another draw.
  std::vector<int32_t> other(8 * 8);
  blend.fill_batch(12, 5, 0, 8, other.data(), t.data());
  EXPECT_NE(one, other);
}

TEST(BlendedDataset, OneSourceIsExactlyTheWindowSampler) {
  TempDir dir;
  BlendedDataset blend = make_blend(dir, {1.0}, 4);
  std::unique_ptr<TokenSource> same = numbered_source(dir, 0, 500);
  std::vector<int32_t> a(4 * 8), b(4 * 8), ta(4 * 8), tb(4 * 8);
  for (int64_t step = 1; step < 5; ++step) {
    blend.fill_batch(7, step, 0, 4, a.data(), ta.data());
    fill_batch(*same, 7, step, 0, 4, 8, b.data(), tb.data());
    EXPECT_EQ(a, b);
    EXPECT_EQ(ta, tb);
  }
}

TEST(BlendedDataset, Errors) {
  TempDir dir;
  expect_error([&] { make_blend(dir, {0.5, -1}, 4); }, {"s1", "weight -1", "positive"});
  std::vector<BlendSource> tiny;
  tiny.push_back({numbered_source(dir, 0, 5), 1.0, "tiny"});
  expect_error([&] { BlendedDataset(std::move(tiny), 4, 8); }, {"tiny", "5 tokens", "seq_length + 1 = 9"});
  expect_error([&] { BlendedDataset({}, 4, 8); }, {"no sources"});
}

TEST(TokenSource, NumberedShardsReadAsOneStream) {
  TempDir dir;
  std::vector<int> all;
  for (int s = 0; s < 3; ++s) {
    std::vector<int> ids;
    for (int i = 0; i < 10 + s; ++i) ids.push_back(s * 20 + i);
    all.insert(all.end(), ids.begin(), ids.end());
    write_token_shard(dir.file(fmt::format("train-{:05d}", s)), ids, 100, "bytes", 1);
  }
  std::unique_ptr<TokenSource> source = open_token_source(dir.file("train"), TokenFormat::kMoe4d, 100);
  EXPECT_EQ(source->num_tokens(), 33);
  EXPECT_EQ(source->num_documents(), 3);
  std::vector<int32_t> ids(33);
  source->read(0, 33, ids.data());
  EXPECT_EQ(std::vector<int>(ids.begin(), ids.end()), all);
  std::vector<int32_t> across(6);
  source->read(8, 6, across.data());  // crosses the first boundary
  EXPECT_EQ(std::vector<int>(across.begin(), across.end()), std::vector<int>(all.begin() + 8, all.begin() + 14));
  expect_error([&] { open_token_source(dir.file("valid"), TokenFormat::kMoe4d, 100); }, {"valid"});
}

}  // namespace
}  // namespace moe4d
