// ZeRO's arithmetic without MPI: buckets and slices partition every parameter group exactly once
// over any number of ranks and bucketings, buckets never exceed their size (splitting parameters),
// shard sizes and the memory formulas agree, the embedding table has buckets of its own; page release really returns memory and reads as zero; the
// 1-bit all-reduce's error feedback makes the compressed average unbiased over many calls.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <random>

#include "../train/train_fixture.h"
#include "comm/local_communicator.h"
#include "model/transformer.h"
#include "parallel/parallel_context.h"
#include "train/onebit_adam.h"
#include "train/zero_layout.h"
#include "train/zero_memory.h"

namespace moe4d {
namespace {

struct Model {
  std::unique_ptr<ParallelContext> pc = make_single_rank_context();
  ParamStore params;
  std::unique_ptr<Transformer> transformer;
  std::vector<ChunkSpec> chunks;
  int num_layers = 0;

  explicit Model(bool tied) {
    Config c = test::tiny_training_config("unused.bin");
    c.model.num_layers = 4;
    c.model.tie_embeddings = tied;
    num_layers = c.model.num_layers;
    config = c;
    chunks = {{.first_layer = 0, .num_layers = 4, .has_embedding = true, .has_head = true}};
    transformer = std::make_unique<Transformer>(config.model, *pc, chunks, params);
    params.finalize();
  }
  Config config;
};

ZeroBucketing by_count(int n) { return ZeroBucketing{.count = n}; }
ZeroBucketing by_size(size_t elements) { return ZeroBucketing{.count = 0, .elements = {elements, elements}}; }

ZeroLayout layout_for(const Model& m, const ZeroBucketing& bucketing, int dense_ranks, int dense_rank,
                      int expert_ranks, int expert_rank) {
  const int ranks[kNumParamGroups] = {dense_ranks, expert_ranks};
  const int rank[kNumParamGroups] = {dense_rank, expert_rank};
  return ZeroLayout(m.params, m.chunks, m.num_layers, bucketing, ranks, rank);
}

TEST(ZeroLayout, SlicesPartitionEveryGroupOnceForAnyNumberOfRanks) {
  Model m(/*tied=*/false);
  // By count, by a size that splits parameters (16 elements: every bucket inside some parameter), by
  // a size larger than the model.
  for (const ZeroBucketing& bucketing : {by_count(4), by_size(16), by_size(100), by_size(size_t(1) << 30)}) {
    for (int ranks : {1, 2, 3, 5}) {
      // How often each flat element is covered by some rank's pieces, per group.
      std::vector<int> covered[kNumParamGroups];
      for (int g = 0; g < kNumParamGroups; ++g) covered[g].assign(m.params.flat_size(ParamGroup(g)), 0);
      size_t shard[kNumParamGroups] = {0, 0};
      for (int r = 0; r < ranks; ++r) {
        const ZeroLayout layout = layout_for(m, bucketing, ranks, r, ranks, r);
        for (int g = 0; g < kNumParamGroups; ++g) {
          const ParamGroup group = ParamGroup(g);
          if (r == 0) shard[g] = layout.shard_size(group);
          EXPECT_EQ(layout.shard_size(group), shard[g]) << "every rank's shard has the same size";
          EXPECT_EQ(layout.padding(group), size_t(ranks) * shard[g] - m.params.flat_size(group));
        }
        for (const ShardPiece& p : layout.pieces()) {
          const ParamInfo& info = m.params.info(p.param);
          EXPECT_GE(p.flat_begin, info.offset);
          EXPECT_LE(p.flat_begin + p.count, info.offset + size_t(info.numel()));
          EXPECT_LE(p.shard_offset + p.count, layout.shard_size(p.group));
          for (size_t i = 0; i < p.count; ++i) ++covered[int(p.group)][p.flat_begin + i];
        }
        // Buckets cover [0, F) contiguously; padding is at most ranks - 1 per bucket.
        size_t expected_begin[kNumParamGroups] = {0, 0};
        for (const ZeroBucket& b : layout.buckets()) {
          EXPECT_EQ(b.begin, expected_begin[int(b.group)]);
          expected_begin[int(b.group)] = b.end;
          EXPECT_EQ(b.slice, (b.numel() + ranks - 1) / ranks);
          EXPECT_LT(size_t(ranks) * b.slice - b.numel(), size_t(ranks));
        }
      }
      for (int g = 0; g < kNumParamGroups; ++g) {
        for (int id = 0; id < m.params.size(); ++id) {
          const ParamInfo& info = m.params.info(id);
          if (int(info.group) != g) continue;
          for (int64_t i = 0; i < info.numel(); ++i)
            ASSERT_EQ(covered[g][info.offset + i], 1) << info.name << " element " << i << " with " << ranks << " ranks";
        }
      }
    }
  }
}

TEST(ZeroLayout, BucketsNeverExceedTheSizeAndSplitLargeParameters) {
  Model m(/*tied=*/true);
  const ParamInfo& table = m.params.info(m.params.find("embed.weight"));
  for (size_t size : {size_t(16), size_t(48), size_t(100), size_t(1000)}) {
    const ZeroLayout layout = layout_for(m, by_size(size), 2, 0, 2, 0);
    const size_t rounded = (size + 15) / 16 * 16;  // below a page: whole 16-float units
    int tables = 0, split_params = 0;
    for (int g = 0; g < kNumParamGroups; ++g) {
      EXPECT_EQ(layout.bucket_elements(ParamGroup(g)), rounded);
      EXPECT_LE(layout.largest_bucket(ParamGroup(g)), rounded) << "size " << size;
    }
    for (const ZeroBucket& b : layout.buckets()) {
      EXPECT_FALSE(b.layers.empty());
      for (int layer : b.layers) {
        const std::vector<int>& of = layout.buckets_of_layer(layer);
        EXPECT_NE(std::find(of.begin(), of.end(), int(&b - layout.buckets().data())), of.end());
      }
      if (b.embedding_table) {
        ++tables;
        EXPECT_EQ(b.layers, std::vector<int>{-1}) << "the table shares its buckets with nothing";
        EXPECT_EQ((b.begin - table.offset) % rounded, 0u) << "table buckets are counted from the table's start";
        EXPECT_LE(b.end, table.offset + size_t(table.numel()) + 15);
      }
    }
    for (int id = 0; id < m.params.size(); ++id) {
      const ParamInfo& info = m.params.info(id);
      int holding = 0;
      for (const ZeroBucket& b : layout.buckets())
        if (b.group == info.group && b.begin < info.offset + size_t(info.numel()) && b.end > info.offset) ++holding;
      EXPECT_GE(holding, 1);
      if (holding > 1) ++split_params;
      if (size_t(info.numel()) > 2 * rounded) {
        EXPECT_GE(holding, 2) << info.name << " larger than a bucket";
      }
    }
    EXPECT_EQ(tables, int((table.numel() + rounded - 1) / rounded));
    if (size <= 100) {
      EXPECT_GT(split_params, 0);
    }
    // Layers smaller than a bucket share one with their neighbour; every layer has buckets.
    for (int layer = -1; layer <= m.num_layers; ++layer) EXPECT_FALSE(layout.buckets_of_layer(layer).empty()) << layer;
  }
  // A count cuts each group into about that many equal buckets.
  for (int n : {1, 3, 8}) {
    const ZeroLayout layout = layout_for(m, by_count(n), 2, 0, 2, 0);
    for (ParamGroup g : {ParamGroup::kDense, ParamGroup::kExpert}) {
      const size_t target = (m.params.flat_size(g) + n - 1) / n;
      EXPECT_GE(layout.bucket_elements(g), target);
      EXPECT_LT(layout.bucket_elements(g), target + 1024) << "rounded up to at most a page of floats";
      EXPECT_LE(layout.largest_bucket(g), layout.bucket_elements(g));
    }
  }
  // Megatron-Core's default: max(40M, 1M x group size).
  EXPECT_EQ(default_bucket_elements(8), 40000000u);
  EXPECT_EQ(default_bucket_elements(64), 64000000u);
  ParallelConfig parallel;
  const int ranks[kNumParamGroups] = {128, 2};
  const ZeroBucketing defaults = zero_bucketing(parallel, ranks);
  EXPECT_EQ(defaults.count, 0);
  EXPECT_EQ(defaults.elements[0], 128000000u);
  EXPECT_EQ(defaults.elements[1], 40000000u);
  parallel.grad_bucket_size = 5000;
  EXPECT_EQ(zero_bucketing(parallel, ranks).elements[1], 5000u);
  parallel.grad_bucket_size = 0;
  parallel.gradient_aggregation_group = 6;
  EXPECT_EQ(zero_bucketing(parallel, ranks).count, 6);
}

TEST(ZeroLayout, PageSizedBucketsStartOnPageMultiples) {
  Model m(/*tied=*/false);
  const ZeroLayout layout = layout_for(m, by_size(1500), 2, 0, 2, 0);  // rounded up to 2048 floats
  EXPECT_EQ(layout.bucket_elements(ParamGroup::kDense), 2048u);
  const ParamInfo& table = m.params.info(m.params.find("embed.weight"));
  for (const ZeroBucket& b : layout.buckets()) {
    EXPECT_LE(b.numel(), 2048u);
    const bool at_forced_cut = b.begin == table.offset || b.begin == table.offset + size_t(table.numel()) ||
                               (b.begin - table.offset) % 2048 == 0;
    EXPECT_TRUE(b.begin % 1024 == 0 || at_forced_cut) << b.begin;
  }
}

TEST(ZeroLayout, StateBytesFollowTheStageFormulas) {
  Model m(/*tied=*/false);
  const ZeroLayout layout = layout_for(m, by_count(4), 4, 1, 2, 1);
  const size_t F = m.params.flat_size(ParamGroup::kDense) + m.params.flat_size(ParamGroup::kExpert);
  const size_t P = layout.shard_size(ParamGroup::kDense) + layout.shard_size(ParamGroup::kExpert);
  EXPECT_GE(4 * layout.shard_size(ParamGroup::kDense), layout.flat_size(ParamGroup::kDense));
  EXPECT_GE(2 * layout.shard_size(ParamGroup::kExpert), layout.flat_size(ParamGroup::kExpert));
  const ZeroStateBytes s0 = zero_state_bytes(0, layout), s1 = zero_state_bytes(1, layout),
                       s2 = zero_state_bytes(2, layout), s3 = zero_state_bytes(3, layout);
  EXPECT_EQ(s0.total(), 16 * F);
  EXPECT_EQ(s1.total(), 8 * F + 8 * P);
  EXPECT_EQ(s2.total(), 4 * F + 12 * P);
  EXPECT_EQ(s3.total(), 16 * P);
  EXPECT_EQ(s3.params, 4 * P);
  EXPECT_EQ(s2.grads, 4 * P);
}

TEST(ZeroMemory, ReleasedRangesReadZeroAndHoldNoPages) {
  const size_t page_floats = page_bytes() / sizeof(float);
  const size_t n = 64 * page_floats;
  Buffer buffer(n * sizeof(float));
  float* data = buffer.f32();
  for (size_t i = 0; i < n; ++i) data[i] = 1.0f + float(i % 7);
  const size_t before = resident_bytes(data, n * sizeof(float));
  EXPECT_GE(before, (n - 2 * page_floats) * sizeof(float));
  // Release a range that starts and ends mid-page: its interior pages go, its edges are zeroed,
  // everything outside keeps its values.
  const size_t lo = 3 * page_floats + 5, hi = 40 * page_floats + 9;
  release_zeroed(data + lo, hi - lo);
  const size_t after = resident_bytes(data, n * sizeof(float));
  EXPECT_LE(after, before - (hi - lo - 2 * page_floats) * sizeof(float));
  for (size_t i = 0; i < n; ++i) {
    const float expected = i >= lo && i < hi ? 0.0f : 1.0f + float(i % 7);
    ASSERT_EQ(data[i], expected) << i;
  }
  // Written again, the pages come back.
  for (size_t i = lo; i < hi; ++i) data[i] = 2.0f;
  EXPECT_GE(resident_bytes(data, n * sizeof(float)), before - 2 * page_bytes());
  release_discarded(data, n);
  EXPECT_LE(resident_bytes(data, n * sizeof(float)), 2 * page_bytes());
}

TEST(OneBitAllReduce, ErrorFeedbackMakesTheAverageUnbiased) {
  // One rank: the "average" is the compressed input itself. Each call sends sign bits and one scale;
  // the error feedback carries what was lost into the next call, so the mean over many calls of the
  // output converges to the (fixed) input although every single output is +-scale.
  LocalCommunicator comm("onebit-test");
  const size_t n = 1000;
  std::mt19937 gen(3);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(n);
  for (float& v : x) v = normal(gen);
  OneBitAllReduce reduce(comm, n);
  EXPECT_EQ(reduce.block_bytes(), sizeof(float) + (n + 7) / 8);
  std::vector<double> mean(n, 0.0);
  const int calls = 400;
  std::vector<float> data(n);
  double first_error = 0;
  for (int c = 0; c < calls; ++c) {
    data = x;
    reduce.average(data.data());
    if (c == 0)
      for (size_t i = 0; i < n; ++i) first_error += std::abs(data[i] - x[i]) / n;
    for (size_t i = 0; i < n; ++i) mean[i] += data[i] / calls;
  }
  double error = 0;
  for (size_t i = 0; i < n; ++i) error += std::abs(mean[i] - x[i]) / n;
  EXPECT_GT(first_error, 0.3) << "one call is a coarse sign + scale approximation";
  EXPECT_LT(error, 0.05) << "the error feedback should make the running mean track the input";
}

}  // namespace
}  // namespace moe4d
