// Bytes per rank of parameters, gradients and AdamW state under zero_stage 0..3 on DP2 match the ZeRO
// formulas for the model's parameter count (docs/zero.md), as reported in the metrics record; and the
// memory ZeRO says it released is really gone (mincore on the ParamStore's flat buffers).
//
// With two ranks every bucket (cut at multiples of 16 floats) splits evenly, so there is
// no padding and the formulas hold exactly: Psi = this rank's parameter elements (each parameter
// rounded up to 16 floats), N = 2:
//   stage 0: 4 Psi + 4 Psi + 8 Psi      stage 1: 4 Psi + 4 Psi + 8 Psi / N
//   stage 2: 4 Psi + 4 Psi / N + 8 Psi / N    stage 3: (4 + 4 + 8) Psi / N
#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include "../train/train_fixture.h"
#include "comm/mpi_communicator.h"
#include "train/trainer.h"
#include "train/zero_memory.h"

namespace moe4d {
namespace {

constexpr int kRanks = 2;
constexpr int64_t kBucket = 8192;  // elements: two pages of floats

int64_t aligned(int64_t numel) { return (numel + 15) / 16 * 16; }

// Elements per group of this model when one rank holds all of it (DP only), computed from the
// config alone: the parameter list of docs/model.md §1.
struct ParamCount {
  int64_t dense = 0, expert = 0;
  int64_t largest_layer = 0;  // elements of the largest transformer layer (both groups)
  int64_t largest_param[kNumParamGroups] = {0, 0};
  int64_t total() const { return dense + expert; }
};
ParamCount count_params(const ModelConfig& m) {
  const int64_t d = m.hidden_size, f = m.ffn_hidden_size, v = m.vocab_size, e = m.moe.num_experts;
  ParamCount c;
  c.dense += aligned(v * d);  // embed.weight
  for (int l = 0; l < m.num_layers; ++l) {
    int64_t layer = aligned(d) + aligned(d * 3 * d) + aligned(d * d) + aligned(d);  // norms, qkv, out
    if (m.is_moe_layer(l)) {
      c.dense += layer + aligned(d * e);  // + router
      c.expert += 3 * aligned(e * d * f);
      layer += aligned(d * e) + 3 * aligned(e * d * f);
    } else {
      layer += 3 * aligned(d * f);
      c.dense += layer;
    }
    c.largest_layer = std::max(c.largest_layer, layer);
  }
  c.dense += aligned(d) + (m.tie_embeddings ? 0 : aligned(d * v));  // final norm, head
  c.largest_param[0] = std::max({v * d, 3 * d * d, d * f});
  c.largest_param[1] = m.is_moe() ? e * d * f : 0;
  return c;
}

class ZeroMemory : public ::testing::Test {
 protected:
  ZeroMemory() {
    config_ = test::tiny_training_config(test::write_synthetic_shard(dir_.file("train.bin"), 256, 20000));
    ModelConfig& m = config_.model;
    m.vocab_size = 256;
    m.hidden_size = 128;
    m.num_heads = 4;
    m.ffn_hidden_size = 256;
    m.num_layers = 8;  // no single layer dominates: ZeRO-2/3's per-layer transients stay small
    config_.train.global_batch_size = 4;
    config_.parallel.data_parallel = kRanks;
    config_.parallel.micro_batch_num = 2;
    // Small buckets: ZeRO-2/3's transient gradient memory is a few buckets (docs/zero.md).
    config_.parallel.grad_bucket_size = kBucket;
    config_.parallel.collective_timeout = 60;
    pc_ = make_parallel_context(MpiCommunicator::world(CommOptions{.timeout_seconds = 120}), config_.parallel, 0);
  }

  test::TempDir dir_;
  Config config_;
  std::unique_ptr<ParallelContext> pc_;
};

TEST_F(ZeroMemory, HeldBytesMatchTheFormulasAndReleasedPagesAreGone) {
  ASSERT_EQ(pc_->world->size(), kRanks);
  const ParamCount psi = count_params(config_.model);
  const double full = double(psi.total()), half = full / kRanks;
  const double page = double(page_bytes());
  // Every stage: buckets of at most kBucket elements (parameters are split over buckets).
  const double bucket = double(kBucket);
  const int buckets = int(psi.total() / kBucket) + 4;
  for (int stage = 0; stage <= 3; ++stage) {
    SCOPED_TRACE(fmt::format("zero_stage {}", stage));
    Config c = config_;
    c.parallel.zero_stage = stage;
    Trainer trainer(c, *pc_, {.quiet = true, .metrics_path = "/dev/null"});
    trainer.train_step();
    const nlohmann::json record = trainer.train_step().record["memory"];
    ASSERT_EQ(record["zero_stage"], stage);
    const nlohmann::json& mine = record["per_rank"][pc_->rank];
    ASSERT_EQ(mine["local_params"].get<double>(), full) << "the model's parameter count, from the config";

    const double params = mine["params_bytes"], grads = mine["grads_bytes"], optimizer = mine["optimizer_bytes"];
    EXPECT_EQ(params, 4 * (stage >= 3 ? half : full));
    EXPECT_EQ(grads, 4 * (stage >= 2 ? half : full));
    EXPECT_EQ(optimizer, 8 * (stage >= 1 ? half : full));
    EXPECT_EQ(params, mine["formula"]["params_bytes"].get<double>());
    EXPECT_EQ(grads, mine["formula"]["grads_bytes"].get<double>());
    EXPECT_EQ(optimizer, mine["formula"]["optimizer_bytes"].get<double>());

    // What is physically resident of the ParamStore's flat buffers after the step: everything for the
    // parts a stage keeps whole, at most the pages shared between buckets for the released parts.
    ParamStore& store = trainer.params();
    double values = 0, gradients = 0;
    for (ParamGroup g : {ParamGroup::kDense, ParamGroup::kExpert}) {
      values += double(resident_bytes(store.flat_values(g), store.flat_size(g) * sizeof(float)));
      gradients += double(resident_bytes(store.flat_grads(g), store.flat_size(g) * sizeof(float)));
    }
    const double flat_bytes = 4 * full;
    if (stage >= 3) {
      EXPECT_LT(values, 0.05 * flat_bytes);
    } else {
      EXPECT_GE(values, flat_bytes - 2 * page);
    }
    if (stage >= 2) {
      EXPECT_LT(gradients, 0.05 * flat_bytes);
      // During the step: the shard, the layer whose backward just finished plus the open part of a
      // bucket per group, and at most GradSync::kMaxInFlight staging buffers of a bucket each —
      // below the full gradients (the bound per bucket is tested in BoundedPeaks below).
      const double peak = mine["grads_peak_bytes"];
      EXPECT_GT(peak, grads);
      EXPECT_LE(peak, grads + 4 * (double(psi.largest_layer) + 2 * bucket) + GradSync::kMaxInFlight * 4 * bucket +
                          4 * page * (buckets + config_.model.num_layers));
      EXPECT_LT(peak, flat_bytes);
    } else {
      EXPECT_GE(gradients, flat_bytes - 2 * page);
      EXPECT_EQ(mine["grads_peak_bytes"].get<double>(), grads);
    }
    if (stage == 3) {
      // Held during the step: the shard plus the running layer's buckets and the prefetched ones —
      // below the full parameters.
      const double peak = mine["params_peak_bytes"];
      EXPECT_GT(peak, params + 4 * double(psi.largest_param[1]));
      EXPECT_LE(peak, params + 4 * (double(psi.largest_layer) + (2 + c.parallel.zero3_prefetch_buckets) * bucket) +
                          4 * page * (config_.model.num_layers + 2));
      EXPECT_LT(peak, flat_bytes);
    } else {
      EXPECT_EQ(mine["params_peak_bytes"].get<double>(), params);
    }
  }
}

// The peaks follow the bucket, not the model: on a model with many small tensors (16 layers of
// narrow attention and experts) and a few large ones (embedding and head tables, 16 buckets each),
// measured per rank:
//   ZeRO-2/3 gradients <= shard + U + (2 + GradSync::kMaxInFlight) x bucket, where U is the largest
//     unit one backward step writes before ZeRO sees it (a layer, or a table) and the 2 are the
//     partly complete bucket of each group;
//   ZeRO-3 values <= shard + the running layer's buckets + zero3_prefetch_buckets x bucket;
// each plus the pages that two neighbouring buckets share. Both are far below the full buffers.
TEST(ZeroPeak, GradientAndParameterPeaksAreShardPlusBoundedBuckets) {
  test::TempDir dir;
  Config config = test::tiny_training_config(test::write_synthetic_shard(dir.file("train.bin"), 1024, 20000));
  ModelConfig& m = config.model;
  m.vocab_size = 1024;
  m.hidden_size = 64;
  m.num_heads = 4;
  m.ffn_hidden_size = 32;
  m.num_layers = 16;
  m.tie_embeddings = false;
  m.seq_length = 16;
  config.train.global_batch_size = 4;
  config.parallel.data_parallel = kRanks;
  config.parallel.micro_batch_num = 2;
  config.parallel.collective_timeout = 60;
  constexpr int64_t kSmallBucket = 4096;  // one page of floats... x4: the tables are 16 buckets each
  config.parallel.grad_bucket_size = kSmallBucket;
  config.parallel.zero3_prefetch_buckets = 3;
  auto pc = make_parallel_context(MpiCommunicator::world(CommOptions{.timeout_seconds = 120}), config.parallel, 0);
  const double page = double(page_bytes());
  for (int stage : {2, 3}) {
    SCOPED_TRACE(fmt::format("zero_stage {}", stage));
    Config c = config;
    c.parallel.zero_stage = stage;
    Trainer trainer(c, *pc, {.quiet = true, .metrics_path = "/dev/null"});
    trainer.train_step();
    const nlohmann::json record = trainer.train_step().record["memory"];
    const nlohmann::json& mine = record["per_rank"][pc->rank];
    const ZeroLayout& layout = trainer.zero_layout();
    const ParamStore& store = trainer.params();
    double full = 0, bucket = 0;
    size_t count = 0;
    for (ParamGroup g : {ParamGroup::kDense, ParamGroup::kExpert}) {
      full += double(store.flat_size(g));
      bucket = std::max(bucket, double(layout.largest_bucket(g)));
      EXPECT_LE(layout.largest_bucket(g), size_t(kSmallBucket));
    }
    for (const ZeroBucket& b : layout.buckets()) count += b.numel() > 0 ? 1 : 0;
    // U: the most elements of one layer (-1 = embedding, num_layers = final norm + head).
    std::map<int, double> layer_elements;
    for (int id = 0; id < store.size(); ++id) layer_elements[store.info(id).layer] += double(store.info(id).numel());
    double unit = 0;
    for (const auto& [layer, n] : layer_elements) unit = std::max(unit, n);
    EXPECT_EQ(unit, double(m.vocab_size) * m.hidden_size + m.hidden_size) << "the head is the largest unit";
    EXPECT_GT(double(count), 16 + 2 * 16) << "layers share buckets, tables are split over many";

    const double shard = mine["grads_bytes"];
    const double grads_peak = mine["grads_peak_bytes"];
    const double grads_bound =
        shard + 4 * (unit + (2 + GradSync::kMaxInFlight) * bucket) + 4 * page * 8;
    EXPECT_LE(grads_peak, grads_bound);
    EXPECT_LT(grads_bound, 0.75 * 4 * full) << "the bound itself is well below the full gradients";
    EXPECT_EQ(record["peak_grads_bytes"].get<double>() >= grads_peak, true);
    if (stage == 3) {
      double running = 0;  // the most elements of the buckets one layer needs resident
      for (int layer = -1; layer <= m.num_layers; ++layer) {
        double n = 0;
        for (int b : layout.buckets_of_layer(layer)) n += double(layout.buckets()[b].numel());
        running = std::max(running, n);
      }
      const double params_shard = mine["params_bytes"];
      const double params_peak = mine["params_peak_bytes"];
      EXPECT_GT(params_peak, params_shard + 4 * running - 4 * page);
      EXPECT_LE(params_peak, params_shard + 4 * (running + c.parallel.zero3_prefetch_buckets * bucket) + 4 * page * 8);
      EXPECT_LT(params_peak, 0.75 * 4 * full);
    }
  }
}

}  // namespace
}  // namespace moe4d
