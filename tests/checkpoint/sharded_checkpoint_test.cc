// Sharded checkpoints (checkpoint.format: sharded, docs/checkpoints.md) under mpirun: train, save
// sharded in one layout, resume in others. The losses of the resumed run must continue the
// uninterrupted run's: bit-identical in the same layout, within 1e-6 relative in another (the
// layouts are equivalent, docs/model.md §3). Also: every rank writes its own file and no byte twice
// (the pieces of each tensor cover it once), the directory holds no full-tensor files, and a full
// checkpoint of the same state holds the same values as the sharded one.
//   TwoRanks*:   DP2 -> DP2 (exact), TP2, EP2, PP2, ZeRO-3 DP2, DP1; ZeRO-3 DP2 -> EP2 ZeRO-1, DP1.
//   EightRanks*: EP2 x TP2 x PP2 with ZeRO-1 (4-D grid, DP 1) -> one rank.
// checkpoint.async (ZeRO-1 and ZeRO-3): a save in flight while training changes the parameters
// holds its step's state (byte-identical to a synchronous save of that step), exists only once
// committed, and resumes exactly; run() commits at step boundaries, waits at its end and records
// every save.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "../train/train_fixture.h"
#include "checkpoint/checkpoint.h"
#include "checkpoint/checkpoint_consolidate.h"
#include "checkpoint/checkpoint_inspect.h"
#include "core/error.h"
#include "checkpoint/sharded_index.h"
#include "comm/mpi/mpi_communicator.h"
#include "train/async_checkpoint.h"
#include "train/trainer.h"

namespace moe4d {
namespace {

constexpr int kSteps = 12, kSaveAt = 6;

int world_rank() {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}

// A directory every rank can use: made by rank 0, its path broadcast.
class SharedDir {
 public:
  SharedDir() {
    if (world_rank() == 0) dir_ = std::make_unique<test::TempDir>("moe4d-sharded-ckpt");
    std::string path = dir_ ? dir_->path() : std::string();
    int size = static_cast<int>(path.size());
    MPI_Bcast(&size, 1, MPI_INT, 0, MPI_COMM_WORLD);
    path.resize(size);
    MPI_Bcast(path.data(), size, MPI_CHAR, 0, MPI_COMM_WORLD);
    path_ = path;
  }
  ~SharedDir() { MPI_Barrier(MPI_COMM_WORLD); }  // nobody reads once rank 0 removes it
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::unique_ptr<test::TempDir> dir_;
  std::string path_;
};

struct Layout {
  int dp = 1, ep = 1, tp = 1, pp = 1, zero = 0;
  std::string name() const { return fmt::format("dp{} ep{} tp{} pp{} zero{}", dp, ep, tp, pp, zero); }
};

std::vector<double> losses(Trainer& trainer, int steps) {
  std::vector<double> out;
  for (int i = 0; i < steps; ++i) out.push_back(trainer.train_step().loss);
  return out;
}

TrainerOptions quiet(const std::string& resume = {}) {
  return {.resume_from = resume, .quiet = true, .metrics_path = "/dev/null"};
}

class ShardedCheckpoint : public ::testing::Test {
 protected:
  ShardedCheckpoint() {
    base_ = test::tiny_training_config(test::write_synthetic_shard(dir_.file("train.bin"), 64, 20000));
    base_.model.num_layers = 4;
    base_.train.steps = kSteps;
    base_.parallel.collective_timeout = 120;
    base_.checkpoint.format = CheckpointFormat::kSharded;
  }
  // 4 micro-batches of 2 sequences per step in every layout (the single-rank equivalent).
  Config config(const Layout& l, const std::string& ckpt) const {
    Config c = base_;
    c.parallel.data_parallel = l.dp;
    c.parallel.expert_parallel = l.ep;
    c.parallel.tensor_parallel = l.tp;
    c.parallel.pipeline_parallel = l.pp;
    c.parallel.micro_batch_num = 4 / (l.dp * l.ep);
    c.parallel.zero_stage = l.zero;
    c.checkpoint.dir = ckpt;
    return c;
  }
  std::unique_ptr<ParallelContext> context(const Config& c) const {
    return make_parallel_context(MpiCommunicator::world(CommOptions{.timeout_seconds = 300}), c.parallel, 0);
  }
  // Trains `saver` kSaveAt steps, saves, trains on; returns the losses after the save (on every rank).
  std::vector<double> train_and_save(const Layout& saver, const std::string& ckpt) {
    const Config c = config(saver, ckpt);
    auto pc = context(c);
    Trainer trainer(c, *pc, quiet());
    losses(trainer, kSaveAt);
    trainer.save_checkpoint();
    return losses(trainer, kSteps - kSaveAt);
  }
  // Resumes `ckpt` in `layout` (world size ranks) and compares with `expected` on rank 0.
  void expect_resume(const Layout& layout, const std::string& ckpt, const std::vector<double>& expected,
                     bool exact) {
    SCOPED_TRACE(layout.name());
    const Config c = config(layout, "");
    auto pc = context(c);
    Trainer resumed(c, *pc, quiet(ckpt));
    ASSERT_EQ(resumed.step(), kSaveAt);
    const std::vector<double> got = losses(resumed, kSteps - kSaveAt);
    if (pc->rank != 0) return;
    ASSERT_EQ(got.size(), expected.size());
    for (size_t i = 0; i < got.size(); ++i) {
      if (exact) EXPECT_EQ(got[i], expected[i]) << "step " << kSaveAt + 1 + i << " (same layout: bit-identical)";
      else EXPECT_NEAR(got[i], expected[i], 1e-6 * std::abs(expected[i])) << "step " << kSaveAt + 1 + i;
    }
  }
  // Resumes `ckpt` on world rank 0 alone (DP1, zero_stage 0).
  void expect_single_rank_resume(const std::string& ckpt, const std::vector<double>& expected) {
    if (world_rank() == 0) {
      SCOPED_TRACE("single rank");
      const Config c = config(Layout{}, "");
      auto local = make_single_rank_context();
      Trainer resumed(c, *local, quiet(ckpt));
      ASSERT_EQ(resumed.step(), kSaveAt);
      const std::vector<double> got = losses(resumed, kSteps - kSaveAt);
      ASSERT_EQ(got.size(), expected.size());
      for (size_t i = 0; i < got.size(); ++i)
        EXPECT_NEAR(got[i], expected[i], 1e-6 * std::abs(expected[i])) << "step " << kSaveAt + 1 + i;
    }
    MPI_Barrier(MPI_COMM_WORLD);
  }
  // The checkpoint is sharded: index.json, one file per writing rank, no full-tensor files, and
  // every tensor's pieces add up to its size exactly (index validation checks the sum).
  void expect_sharded_layout(const std::string& ckpt, int writers) {
    if (world_rank() != 0) return;
    const Checkpoint checkpoint = Checkpoint::open(ckpt);
    EXPECT_FALSE(checkpoint.has_file("model.safetensors"));
    EXPECT_FALSE(checkpoint.has_file("optimizer.safetensors"));
    int rank_files = 0;
    for (const std::string& file : checkpoint.files()) rank_files += file.rfind("rank_", 0) == 0;
    EXPECT_EQ(rank_files, writers);
    const CheckpointTensors tensors(checkpoint);
    EXPECT_TRUE(tensors.sharded());
    EXPECT_TRUE(tensors.contains("embed.weight"));
    EXPECT_TRUE(tensors.contains("exp_avg_sq.layers.1.moe.experts.w1"));
  }

  test::TempDir dir_;  // this rank's token shard
  SharedDir shared_;
  Config base_;
};

TEST_F(ShardedCheckpoint, TwoRanksDataParallelSaveResumesInEveryLayout) {
  const std::string ckpt = shared_.file("dp2");
  const std::vector<double> continued = train_and_save(Layout{.dp = 2}, ckpt);
  expect_sharded_layout(ckpt, 2);  // both DP replicas write (half each), nothing twice
  expect_resume(Layout{.dp = 2}, ckpt, continued, /*exact=*/true);
  expect_resume(Layout{.tp = 2}, ckpt, continued, false);
  expect_resume(Layout{.ep = 2}, ckpt, continued, false);
  expect_resume(Layout{.pp = 2}, ckpt, continued, false);
  expect_resume(Layout{.dp = 2, .zero = 3}, ckpt, continued, false);
  expect_single_rank_resume(ckpt, continued);

  // The tools: verify and inspect understand it; consolidate writes full tensors that resume
  // bit-identically in the saving layout; a flipped byte in one rank's file fails verification.
  const std::string full = shared_.file("dp2-consolidated");
  if (world_rank() == 0) {
    std::vector<std::string> lines;
    verify_checkpoints(ckpt, [&](const std::string& line) { lines.push_back(line); });
    EXPECT_EQ(lines.size(), 5u);  // latest; index.json, state.json, rank_00000, rank_00001 (bytes tokenizer)
    const std::string report = inspect_checkpoint(ckpt);
    EXPECT_NE(report.find("rank_00000.safetensors .. rank_00001.safetensors (2 files)"), std::string::npos) << report;
    EXPECT_NE(report.find("sharded: "), std::string::npos) << report;
    EXPECT_NE(report.find("exp_avg for "), std::string::npos) << report;
    const ConsolidateResult result = consolidate_checkpoint(ckpt, full, /*buffer_bytes=*/256);
    EXPECT_EQ(result.path, full + "/" + checkpoint_dir_name(kSaveAt));
    const Checkpoint consolidated = Checkpoint::open(full);
    EXPECT_TRUE(consolidated.has_file("model.safetensors"));
    EXPECT_FALSE(consolidated.has_file(kShardedIndexFile));
    EXPECT_EQ(consolidated.json("state.json").value("format", ""), "full");
  }
  MPI_Barrier(MPI_COMM_WORLD);
  expect_resume(Layout{.dp = 2}, full, continued, /*exact=*/true);
  if (world_rank() == 0) {
    const std::string victim = ckpt + "/" + checkpoint_dir_name(kSaveAt) + "/rank_00001.safetensors";
    std::fstream f(victim, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(200);
    f.put('\x7f');
    f.close();
    std::string error;
    try {
      verify_checkpoints(ckpt, [](const std::string&) {});
    } catch (const Error& e) {
      error = e.what();
    }
    EXPECT_NE(error.find(victim + ": sha256 mismatch"), std::string::npos) << error;
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

TEST_F(ShardedCheckpoint, TwoRanksZeroThreeSaveResumesExactlyAndElsewhere) {
  const std::string ckpt = shared_.file("zero3");
  const std::vector<double> continued = train_and_save(Layout{.dp = 2, .zero = 3}, ckpt);
  expect_sharded_layout(ckpt, 2);
  expect_resume(Layout{.dp = 2, .zero = 3}, ckpt, continued, /*exact=*/true);
  expect_resume(Layout{.ep = 2, .zero = 1}, ckpt, continued, false);
  expect_single_rank_resume(ckpt, continued);
}

// The same state saved both ways holds the same numbers: every tensor of the full checkpoint equals
// the sharded one's, read back whole.
TEST_F(ShardedCheckpoint, TwoRanksShardedAndFullCheckpointsHoldTheSameTensors) {
  const std::string sharded = shared_.file("same-sharded"), full = shared_.file("same-full");
  {
    // The Trainer reads its config by reference: switching the format between two saves of the same
    // state writes it both ways.
    Config c = config(Layout{.ep = 2, .zero = 2}, sharded);
    auto pc = context(c);
    Trainer trainer(c, *pc, quiet());
    losses(trainer, 3);
    trainer.save_checkpoint();
    c.checkpoint.dir = full;
    c.checkpoint.format = CheckpointFormat::kFull;
    trainer.save_checkpoint();
  }
  if (world_rank() == 0) {
    const Checkpoint a = Checkpoint::open(sharded), b = Checkpoint::open(full);
    const CheckpointTensors ta(a), tb(b);
    EXPECT_FALSE(tb.sharded());
    ASSERT_EQ(ta.names(), tb.names());
    for (const std::string& name : ta.names()) {
      const std::vector<int64_t> shape = ta.shape(name);
      ASSERT_EQ(shape, tb.shape(name)) << name;
      const BlockRange all = whole_block(std::vector<int64_t>(shape.size(), 0), shape);
      std::vector<float> x(size_t(all.end)), y(size_t(all.end));
      ta.read(name, all, x.data());
      tb.read(name, all, y.data());
      EXPECT_EQ(x, y) << name;
    }
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

// The files of the checkpoint at `step` under `root` with their sha256 (the manifest).
std::map<std::string, std::string> manifest_files(const std::string& root, int64_t step) {
  std::ifstream in(root + "/" + checkpoint_dir_name(step) + "/MANIFEST.json");
  const nlohmann::json manifest = nlohmann::json::parse(in);
  std::map<std::string, std::string> out;
  for (const auto& [name, entry] : manifest["files"].items()) out[name] = entry["sha256"];
  return out;
}

TEST_F(ShardedCheckpoint, TwoRanksAsyncSaveHoldsTheStateOfItsStepAndAppearsOnlyWhenCommitted) {
  // ZeRO-1 stages the flat values and the moment shards; ZeRO-3 the value and moment shards.
  for (const Layout& layout : {Layout{.dp = 2, .zero = 1}, Layout{.dp = 2, .zero = 3}}) {
    SCOPED_TRACE(layout.name());
    const std::string async_dir = shared_.file(fmt::format("async-zero{}", layout.zero));
    const std::string sync_dir = shared_.file(fmt::format("sync-zero{}", layout.zero));
    std::vector<double> continued;
    {
      Config c = config(layout, async_dir);
      c.checkpoint.async = true;
      auto pc = context(c);
      Trainer trainer(c, *pc, quiet());
      losses(trainer, kSaveAt);
      // The writer thread sleeps first: the steps below change the parameters and moments while the
      // save is in flight, so only a staged copy writes step kSaveAt's state.
      set_background_write_delay_for_tests(0.5);
      trainer.save_checkpoint();
      continued = losses(trainer, kSteps - kSaveAt);
      EXPECT_FALSE(std::filesystem::exists(async_dir + "/" + checkpoint_dir_name(kSaveAt)))
          << "an asynchronous save must not appear before it is committed";
      MPI_Barrier(MPI_COMM_WORLD);
      trainer.finish_checkpoint();
      set_background_write_delay_for_tests(0);
      EXPECT_EQ(trainer.last_checkpoint(), async_dir + "/" + checkpoint_dir_name(kSaveAt));
    }
    {
      const Config c = config(layout, sync_dir);
      auto pc = context(c);
      Trainer trainer(c, *pc, quiet());
      losses(trainer, kSaveAt);
      trainer.save_checkpoint();
    }
    if (world_rank() == 0) {
      const auto a = manifest_files(async_dir, kSaveAt), b = manifest_files(sync_dir, kSaveAt);
      for (const char* file : {"rank_00000.safetensors", "rank_00001.safetensors", "index.json"}) {
        ASSERT_TRUE(a.count(file) && b.count(file)) << file;
        EXPECT_EQ(a.at(file), b.at(file)) << file << ": the asynchronous save differs from the synchronous one";
      }
    }
    expect_sharded_layout(async_dir, 2);
    expect_resume(layout, async_dir, continued, /*exact=*/true);
    expect_resume(Layout{.tp = 2}, async_dir, continued, false);
  }
}

TEST_F(ShardedCheckpoint, TwoRanksAsyncRunCommitsRecordsAndWaitsAtTheEnd) {
  const std::string ckpt = shared_.file("async-run"), metrics = shared_.file("async-run.jsonl");
  Config c = config(Layout{.dp = 2}, ckpt);
  c.checkpoint.async = true;
  c.checkpoint.interval = 3;
  c.checkpoint.keep = 10;
  auto pc = context(c);
  TrainerOptions options = quiet();
  options.metrics_path = metrics;
  {
    Trainer trainer(c, *pc, options);
    trainer.run();
    // The end of the run waited for the last save: it is committed and verifies.
    EXPECT_EQ(trainer.last_checkpoint(), ckpt + "/" + checkpoint_dir_name(kSteps));
  }
  if (world_rank() == 0) {
    std::vector<int64_t> steps;
    for (const CheckpointEntry& e : list_checkpoints(ckpt)) {
      steps.push_back(e.step);
      EXPECT_NO_THROW(Checkpoint::open(e.path)) << e.path;
    }
    EXPECT_EQ(steps, (std::vector<int64_t>{3, 6, 9, 12}));
    // Every save but the last (whose commit ends the run) is recorded in a later step's record.
    std::vector<int64_t> recorded;
    std::ifstream in(metrics);
    for (std::string line; std::getline(in, line);) {
      const nlohmann::json record = nlohmann::json::parse(line);
      if (!record.contains("checkpoints")) continue;
      for (const nlohmann::json& save : record["checkpoints"]) {
        EXPECT_GT(record["step"].get<int64_t>(), save["step"].get<int64_t>());
        EXPECT_TRUE(save["async"].get<bool>());
        EXPECT_EQ(save["format"], "sharded");
        EXPECT_GE(save["blocked_s"].get<double>(), 0.0);
        EXPECT_GT(save["staging_bytes"].get<double>(), 0.0);
        recorded.push_back(save["step"]);
      }
    }
    EXPECT_EQ(recorded, (std::vector<int64_t>{3, 6, 9}));
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

TEST_F(ShardedCheckpoint, EightRanksFourDimensionalSaveResumesOnOneRank) {
  const std::string ckpt = shared_.file("4d");
  const Layout four_d{.ep = 2, .tp = 2, .pp = 2, .zero = 1};
  const std::vector<double> continued = train_and_save(four_d, ckpt);
  expect_resume(four_d, ckpt, continued, /*exact=*/true);
  expect_single_rank_resume(ckpt, continued);
}

}  // namespace
}  // namespace moe4d
