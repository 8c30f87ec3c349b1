// ZeRO's arithmetic without MPI: buckets and slices partition every parameter group exactly once
// over any number of ranks, shard sizes and the memory formulas agree, the embedding table is a bucket
// of its own, ZeRO-3 buckets are layers; page release really returns memory and reads as zero; the
// 1-bit all-reduce's error feedback makes the compressed average unbiased over many calls.
#include <gtest/gtest.h>

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

ZeroLayout layout_for(const Model& m, ZeroBucketing bucketing, int buckets, int dense_ranks, int dense_rank,
                      int expert_ranks, int expert_rank) {
  const int ranks[kNumParamGroups] = {dense_ranks, expert_ranks};
  const int rank[kNumParamGroups] = {dense_rank, expert_rank};
  return ZeroLayout(m.params, m.chunks, m.num_layers, bucketing, buckets, ranks, rank);
}

TEST(ZeroLayout, SlicesPartitionEveryGroupOnceForAnyNumberOfRanks) {
  Model m(/*tied=*/false);
  for (ZeroBucketing bucketing : {ZeroBucketing::kBySize, ZeroBucketing::kByLayer}) {
    for (int ranks : {1, 2, 3, 5}) {
      // How often each flat element is covered by some rank's pieces, per group.
      std::vector<int> covered[kNumParamGroups];
      for (int g = 0; g < kNumParamGroups; ++g) covered[g].assign(m.params.flat_size(ParamGroup(g)), 0);
      size_t shard[kNumParamGroups] = {0, 0};
      for (int r = 0; r < ranks; ++r) {
        const ZeroLayout layout = layout_for(m, bucketing, 4, ranks, r, ranks, r);
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

TEST(ZeroLayout, LayerBucketsHoldOneLayerAndTheTableIsAlone) {
  Model m(/*tied=*/true);
  const ZeroLayout by_layer = layout_for(m, ZeroBucketing::kByLayer, 4, 2, 0, 2, 0);
  int tables = 0;
  for (const ZeroBucket& b : by_layer.buckets()) {
    EXPECT_EQ(b.layers.size(), 1u) << "bucket [" << b.begin << ", " << b.end << ")";
    if (b.embedding_table) {
      ++tables;
      const ParamInfo& table = m.params.info(m.params.find("embed.weight"));
      EXPECT_EQ(b.begin, table.offset);
      EXPECT_EQ(b.numel(), size_t(table.numel()));  // 64 x 32: already 16-aligned
    }
  }
  EXPECT_EQ(tables, 1);
  // Every layer -1 .. num_layers has dense buckets; MoE layers (odd) also expert buckets.
  for (int layer = -1; layer <= m.num_layers; ++layer) EXPECT_FALSE(by_layer.buckets_of_layer(layer).empty()) << layer;
  const ZeroLayout by_size = layout_for(m, ZeroBucketing::kBySize, 1, 2, 0, 2, 0);
  EXPECT_LT(by_size.buckets().size(), by_layer.buckets().size());
  for (const ZeroBucket& b : by_size.buckets()) {
    if (b.embedding_table) {
      EXPECT_EQ(b.layers, std::vector<int>{-1});
    }
  }
}

TEST(ZeroLayout, StateBytesFollowTheStageFormulas) {
  Model m(/*tied=*/false);
  const ZeroLayout layout = layout_for(m, ZeroBucketing::kBySize, 4, 4, 1, 2, 1);
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
