// Bytes per rank of parameters, gradients and AdamW state under zero_stage 0..3 on DP2 match the ZeRO
// formulas for the model's parameter count (docs/zero.md), as reported in the metrics record; and the
// memory ZeRO says it released is really gone (mincore on the ParamStore's flat buffers).
//
// With two ranks every bucket (cut at 16-aligned parameter boundaries) splits evenly, so there is
// no padding and the formulas hold exactly: Psi = this rank's parameter elements (each parameter
// rounded up to 16 floats), N = 2:
//   stage 0: 4 Psi + 4 Psi + 8 Psi      stage 1: 4 Psi + 4 Psi + 8 Psi / N
//   stage 2: 4 Psi + 4 Psi / N + 8 Psi / N    stage 3: (4 + 4 + 8) Psi / N
#include <gtest/gtest.h>

#include <algorithm>

#include "../train/train_fixture.h"
#include "comm/mpi_communicator.h"
#include "train/trainer.h"
#include "train/zero_memory.h"

namespace moe4d {
namespace {

constexpr int kRanks = 2;

int64_t aligned(int64_t numel) { return (numel + 15) / 16 * 16; }

// Elements per group of this model when one rank holds all of it (DP only), computed from the
// config alone: the parameter list of design.md §2.
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
    config_.parallel.gradient_aggregation_group = 16;
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
  // ZeRO 0-2: a bucket holds about F_g / 16 elements plus at most one parameter past that; ZeRO-3:
  // a bucket is one layer's parameters of one group.
  const int buckets = config_.parallel.gradient_aggregation_group;
  const double sized_bucket = std::max(double(psi.dense) / buckets + double(psi.largest_param[0]),
                                       double(psi.expert) / buckets + double(psi.largest_param[1]));
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
      // During the step: the shard, the layer whose backward just finished (its buckets are reduced
      // one after the other) and at most GradSync::kMaxInFlight staging buffers of a bucket each —
      // below the full gradients.
      const double peak = mine["grads_peak_bytes"];
      const double largest_bucket = stage == 3 ? double(psi.largest_layer) : sized_bucket;
      EXPECT_GT(peak, grads);
      EXPECT_LE(peak, grads + 4 * double(psi.largest_layer) + GradSync::kMaxInFlight * 4 * largest_bucket +
                          4 * page * (buckets + config_.model.num_layers));
      // Stage 2's buckets are small; stage 3's are whole layers, so its transient is a few layers.
      if (stage == 2) {
        EXPECT_LT(peak, flat_bytes);
      }
    } else {
      EXPECT_GE(gradients, flat_bytes - 2 * page);
      EXPECT_EQ(mine["grads_peak_bytes"].get<double>(), grads);
    }
    if (stage == 3) {
      // Held during the step: the shard plus at most two layers' full values (one of prefetch) — below
      // the full parameters.
      const double peak = mine["params_peak_bytes"];
      EXPECT_GT(peak, params + 4 * double(psi.largest_param[1]));
      EXPECT_LE(peak, params + 2 * 4 * double(psi.largest_layer) + 4 * page * (config_.model.num_layers + 2));
      EXPECT_LT(peak, flat_bytes);
    } else {
      EXPECT_EQ(mine["params_peak_bytes"].get<double>(), params);
    }
  }
}

}  // namespace
}  // namespace moe4d
