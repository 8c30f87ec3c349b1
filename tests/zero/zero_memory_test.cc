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
#include "comm/mpi/mpi_communicator.h"
#include "model/block_matmul.h"
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

// What ZeRO-3 holds for one read (model/layer_hooks.h values_needed): the elements of the buckets
// covering one weight, or one expert's slice of an [experts, in, out] weight (the blocks read the
// experts one at a time); `largest_read` gets the most elements one read asks for.
double largest_read_cover(const ParamStore& store, const ZeroLayout& layout, double* largest_read) {
  double most = 0;
  *largest_read = 0;
  for (int id = 0; id < store.size(); ++id) {
    const ParamInfo& info = store.info(id);
    const bool experts = info.group == ParamGroup::kExpert && info.local_shape.ndim() == 3;
    const size_t reads = experts ? size_t(info.local_shape[0]) : 1, per = size_t(info.numel()) / reads;
    *largest_read = std::max(*largest_read, double(per));
    for (size_t r = 0; r < reads; ++r) {
      const size_t lo = info.offset + r * per, hi = lo + per;
      double n = 0;
      for (const ZeroBucket& b : layout.buckets())
        if (b.group == info.group && b.begin < hi && b.end > lo) n += double(b.numel());
      most = std::max(most, n);
    }
  }
  return most;
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
      // Held during the step: the shard plus the buckets of the weight being read and the prefetched
      // ones (per group) — below the full parameters.
      const double peak = mine["params_peak_bytes"];
      double read = 0;
      const double cover = largest_read_cover(store, trainer.zero_layout(), &read);
      EXPECT_GE(peak, params + 4 * read);
      EXPECT_LE(peak, params + 4 * (cover + kNumParamGroups * c.parallel.zero3_prefetch_buckets * bucket) + 8 * page);
      EXPECT_LT(peak, flat_bytes);
    } else {
      EXPECT_EQ(mine["params_peak_bytes"].get<double>(), params);
    }
  }
}

// The peaks follow the bucket, not the model: on a model with many small tensors (16 layers of
// narrow attention and experts) and a few large ones (embedding and head tables, 32 buckets each),
// measured per rank, each plus the pages that two neighbouring buckets share.
// The blocks report each parameter's gradient (in row blocks cut at the buckets' starts) as they
// write it, so a bucket is reduced and released within the layer: the gradient peak is the shard
// plus, per group, the bucket being filled and < kGradRowAlign gradient rows, plus kMaxInFlight staging buffers
// (docs/zero.md §Peak). The head and embedding tables (the few large tensors, 32 buckets each) are
// far larger than that bound, so it cannot hold with whole-tensor or whole-layer release. Checked
// for ZeRO-2 and ZeRO-3, untied and with the table tied (the head reports it, then the
// embedding again). ZeRO-3's values: params peak <= shard + the buckets of the largest single read
// (here a table) + the prefetch (ParameterPeakFollowsTheWeightNotTheLayer below tells it from a layer).
TEST(ZeroPeak, GradientAndParameterPeaksAreShardPlusBoundedBuckets) {
  test::TempDir dir;
  Config config = test::tiny_training_config(test::write_synthetic_shard(dir.file("train.bin"), 1024, 20000));
  ModelConfig& m = config.model;
  m.vocab_size = 2048;
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
  constexpr int64_t kSmallBucket = 4096;  // four pages of floats: the tables are 32 buckets each
  config.parallel.grad_bucket_size = kSmallBucket;
  config.parallel.zero3_prefetch_buckets = 3;
  auto pc = make_parallel_context(MpiCommunicator::world(CommOptions{.timeout_seconds = 120}), config.parallel, 0);
  const double page = double(page_bytes());
  struct Case {
    int stage;
    bool tied;
  };
  for (const Case& k : {Case{2, false}, Case{3, false}, Case{2, true}, Case{3, true}}) {
    SCOPED_TRACE(fmt::format("zero_stage {}, tied {}", k.stage, k.tied));
    Config c = config;
    c.parallel.zero_stage = k.stage;
    c.model.tie_embeddings = k.tied;
    Trainer trainer(c, *pc, {.quiet = true, .metrics_path = "/dev/null"});
    trainer.train_step();
    const nlohmann::json record = trainer.train_step().record["memory"];
    const nlohmann::json& mine = record["per_rank"][pc->rank];
    const ZeroLayout& layout = trainer.zero_layout();
    const ParamStore& store = trainer.params();
    double full = 0, bucket = 0, front = 0;
    size_t count = 0;
    for (ParamGroup g : {ParamGroup::kDense, ParamGroup::kExpert}) {
      full += double(store.flat_size(g));
      bucket = std::max(bucket, double(layout.largest_bucket(g)));
      EXPECT_LE(layout.largest_bucket(g), size_t(kSmallBucket));
      // The group's unreleased front: the bucket being filled and the rows of the bucket below it
      // written with it (fewer than kGradRowAlign rows of the widest gradient row, plus one page).
      int64_t row = 0;
      for (int id = 0; id < store.size(); ++id) {
        const ParamInfo& info = store.info(id);
        if (info.group == g) row = std::max(row, info.local_shape[info.local_shape.ndim() - 1]);
      }
      if (layout.largest_bucket(g) > 0) front += double(layout.largest_bucket(g)) + double(kGradRowAlign * row) + 1024;
    }
    for (const ZeroBucket& b : layout.buckets()) count += b.numel() > 0 ? 1 : 0;
    // U: the most elements of one layer (-1 = embedding, num_layers = final norm + head).
    std::map<int, double> layer_elements;
    for (int id = 0; id < store.size(); ++id) layer_elements[store.info(id).layer] += double(store.info(id).numel());
    double unit = 0;
    for (const auto& [layer, n] : layer_elements) unit = std::max(unit, n);
    if (!k.tied) {
      EXPECT_EQ(unit, double(m.vocab_size) * m.hidden_size + m.hidden_size) << "the head is the largest unit";
    }
    EXPECT_GT(double(count), 16 + (k.tied ? 1 : 2) * 32) << "layers share buckets, tables are split over many";

    const double shard = mine["grads_bytes"];
    const double grads_peak = mine["grads_peak_bytes"];
    const double staging = GradSync::kMaxInFlight * bucket;
    const double grads_bound = shard + 4 * (front + staging) + 8 * page;
    EXPECT_LE(grads_peak, grads_bound) << "beyond the shard: " << grads_peak - shard << " bytes";
    EXPECT_GT(grads_peak, shard) << "the step did hold gradients beyond the shard";
    EXPECT_LT(grads_bound - shard, 4 * 0.5 * double(m.vocab_size) * m.hidden_size)
        << "the bound is below half of one table: gradients are released inside a tensor";
    EXPECT_EQ(record["peak_grads_bytes"].get<double>() >= grads_peak, true);
    if (k.stage == 3) {
      double read = 0;
      const double cover = largest_read_cover(store, layout, &read);
      const double params_shard = mine["params_bytes"];
      const double params_peak = mine["params_peak_bytes"];
      EXPECT_GE(params_peak, params_shard + 4 * read);
      EXPECT_LE(params_peak, params_shard + 4 * (cover + kNumParamGroups * c.parallel.zero3_prefetch_buckets * bucket) +
                                 8 * page);
      EXPECT_LT(params_peak, 0.75 * 4 * full);
    }
  }
}

// ZeRO-3 holds the weight being read, not the layer: on a model whose layers are several times its
// largest weight (4 layers, dense FFN and 4-expert MoE alternating, buckets of 2048 elements, so most
// weights span several buckets), the measured parameter peak per rank is at most
//   shard + the buckets covering the largest single read + zero3_prefetch_buckets x bucket per group
// (docs/zero.md §Peak), a bound below the smallest layer, for prefetch 0, 1 and 3, untied and tied.
// And a step gathers about one pass over the weights per micro-batch forward and backward — also
// with buckets larger than an expert's slice (several experts per bucket, read expert by expert),
// where reads that jumped between an expert's w1, w3 and w2 would gather the same buckets again.
TEST(ZeroPeak, ParameterPeakFollowsTheWeightNotTheLayer) {
  test::TempDir dir;
  Config config = test::tiny_training_config(test::write_synthetic_shard(dir.file("train.bin"), 256, 20000));
  ModelConfig& m = config.model;
  m.vocab_size = 256;
  m.hidden_size = 64;
  m.num_heads = 4;
  m.ffn_hidden_size = 256;
  m.num_layers = 4;
  config.train.global_batch_size = 4;
  config.parallel.data_parallel = kRanks;
  config.parallel.micro_batch_num = 2;
  config.parallel.collective_timeout = 60;
  config.parallel.zero_stage = 3;
  config.parallel.grad_bucket_size = 2048;
  auto pc = make_parallel_context(MpiCommunicator::world(CommOptions{.timeout_seconds = 120}), config.parallel, 0);
  struct Case {
    int prefetch;
    bool tied;
    int64_t bucket = 2048;
  };
  for (const Case& k : {Case{0, false}, Case{1, true}, Case{3, false}, Case{1, false, 32768}}) {
    SCOPED_TRACE(fmt::format("prefetch {}, tied {}, bucket {}", k.prefetch, k.tied, k.bucket));
    Config c = config;
    c.parallel.zero3_prefetch_buckets = k.prefetch;
    c.model.tie_embeddings = k.tied;
    c.parallel.grad_bucket_size = k.bucket;
    Trainer trainer(c, *pc, {.quiet = true, .metrics_path = "/dev/null"});
    trainer.train_step();
    const nlohmann::json record = trainer.train_step().record;
    const nlohmann::json& mine = record["memory"]["per_rank"][pc->rank];
    const ZeroLayout& layout = trainer.zero_layout();
    const ParamStore& store = trainer.params();
    double read = 0;
    const double cover = largest_read_cover(store, layout, &read);
    double buckets = 0;
    for (ParamGroup g : {ParamGroup::kDense, ParamGroup::kExpert}) buckets += double(layout.largest_bucket(g));
    std::map<int, double> layer_elements;
    for (int id = 0; id < store.size(); ++id) layer_elements[store.info(id).layer] += double(store.info(id).numel());
    double smallest_layer = layer_elements[0];
    for (int l = 0; l < m.num_layers; ++l) smallest_layer = std::min(smallest_layer, layer_elements[l]);
    if (k.bucket < read) {
      EXPECT_GT(cover, read + 1) << "the largest read spans several buckets";
    }

    const double shard = mine["params_bytes"], peak = mine["params_peak_bytes"];
    // Plus the pages a bucket shares with its neighbour where a cut is forced off the page grid (the
    // table's ends, the ends of the groups): mincore counts such a page whole.
    const double bound = shard + 4 * (cover + k.prefetch * buckets) + 8 * double(page_bytes());
    EXPECT_LE(peak, bound) << "beyond the shard: " << peak - shard << " bytes";
    EXPECT_GE(peak, shard + 4 * read) << "the largest weight was resident while it was read";
    if (k.bucket < read) {
      EXPECT_LT(bound - shard, 4 * smallest_layer) << "the bound holds less than any one layer";
    }

    // Gathers per step (rank 0 sends its half of every bucket it gathers): a pass over the weights
    // per micro-batch forward and backward is 2 m x (N-1)/N x 4 F bytes. With a window the recorded
    // order keeps what the next reads share, so a step stays close to that; without one, buckets
    // shared by consecutive reads of different streams (an expert's w1, w3, w2) are gathered again.
    double flat = 0;
    for (ParamGroup g : {ParamGroup::kDense, ParamGroup::kExpert}) flat += double(store.flat_size(g));
    const double passes = 2.0 * c.parallel.micro_batch_num * (kRanks - 1) / kRanks * 4 * flat;
    const double sent = record["zero"]["param_gather_payload_bytes"];
    EXPECT_GT(sent, 0.5 * passes);
    EXPECT_LT(sent, 1.25 * passes) << "buckets gathered again within a pass";
  }
}

}  // namespace
}  // namespace moe4d
