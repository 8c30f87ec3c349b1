// The single-rank training loop: the loss falls, resume is bit-exact, a corrupted checkpoint is
// refused while the previous one stays usable, and recompute / micro-batching keep the numbers.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "checkpoint/checkpoint.h"
#include "comm/local_communicator.h"
#include "core/error.h"
#include "train/trainer.h"
#include "train_fixture.h"

namespace moe4d {
namespace {

using test::TempDir;

std::vector<double> run_losses(Trainer& trainer, int steps) {
  std::vector<double> losses;
  for (int i = 0; i < steps; ++i) losses.push_back(trainer.train_step().loss);
  return losses;
}

class TrainerTest : public ::testing::Test {
 protected:
  TrainerTest() : config_(test::tiny_training_config(test::write_synthetic_shard(dir_.file("train.bin"), 64, 20000))) {
    config_.checkpoint.dir = dir_.file("ckpt");
    config_.train.metrics_file = dir_.file("metrics.jsonl");
  }
  TempDir dir_;
  Config config_;
};

TEST_F(TrainerTest, LossFalls) {
  auto pc = make_single_rank_context();
  config_.train.steps = 40;
  Trainer trainer(config_, *pc, {.quiet = true});
  const std::vector<double> losses = run_losses(trainer, 40);
  EXPECT_NEAR(losses.front(), std::log(64.0), 0.3);
  EXPECT_LT(losses.back(), losses.front() - 0.5);
}

// 20 straight steps vs 10 steps, a checkpoint, and 10 resumed steps: identical losses and parameters.
void expect_resume_bit_exact(Config config) {
  auto pc = make_single_rank_context();
  config.checkpoint.interval = 10;
  std::vector<double> straight;
  std::map<std::string, FullTensor> straight_params;
  {
    Config c = config;
    c.checkpoint.dir.clear();
    Trainer trainer(c, *pc, {.quiet = true});
    straight = run_losses(trainer, 20);
    straight_params = trainer.gather_parameters();
  }
  {  // interrupted after 10 steps, having written a checkpoint at step 10
    Trainer trainer(config, *pc, {.exit_after = 10, .quiet = true});
    trainer.run();
    EXPECT_EQ(trainer.step(), 10);
  }
  Trainer resumed(config, *pc, {.resume_from = config.checkpoint.dir, .quiet = true});
  EXPECT_EQ(resumed.step(), 10);
  const std::vector<double> rest = run_losses(resumed, 10);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(rest[i], straight[10 + i]) << "step " << 11 + i;
  auto params = resumed.gather_parameters();
  ASSERT_EQ(params.size(), straight_params.size());
  for (auto& [name, t] : params)
    EXPECT_EQ(0, std::memcmp(t.data.data(), straight_params.at(name).data.data(), t.data.bytes())) << name;
}

TEST_F(TrainerTest, ResumeIsBitExact) { expect_resume_bit_exact(config_); }

// Grouped-query attention, narrow routed and shared experts, a leading dense layer and sigmoid
// routing with the aux-loss-free bias (which lives in the checkpoint's state.json).
TEST_F(TrainerTest, ResumeIsBitExactWithModelOptions) {
  ModelConfig& m = config_.model;
  m.num_heads = 4;
  m.num_kv_heads = 1;
  m.rope_theta = 1e6;
  m.norm_eps = 1e-6;
  m.moe.layer_freq = 1;
  m.moe.first_dense_layers = 1;
  m.moe.expert_ffn_hidden_size = 16;
  m.moe.shared_experts = 2;
  m.moe.shared_expert_ffn_hidden_size = 8;
  m.moe.score_function = RouterScore::kSigmoid;
  m.moe.normalize_top_k = false;
  m.moe.router_bias_update_rate = 0.002;
  expect_resume_bit_exact(config_);
}

TEST_F(TrainerTest, StopSignalCheckpointsTheStepAndExitAfterToo) {
  auto pc = make_single_rank_context();
  config_.checkpoint.interval = 0;  // only the last step of a run checkpoints
  std::atomic<int> stop{0};
  {
    Trainer trainer(config_, *pc, {.exit_after = 3, .quiet = true, .stop_signal = &stop});
    trainer.run();
    EXPECT_EQ(trainer.step(), 3);
    EXPECT_EQ(trainer.stopped_by_signal(), 0);
    EXPECT_EQ(trainer.last_checkpoint(), config_.checkpoint.dir + "/step_00000003");
  }
  stop = 15;  // as the SIGTERM handler sets it: the run stops after its current step
  Trainer trainer(config_, *pc, {.resume_from = config_.checkpoint.dir, .quiet = true, .stop_signal = &stop});
  trainer.run();
  EXPECT_EQ(trainer.step(), 4);
  EXPECT_EQ(trainer.stopped_by_signal(), 15);
  EXPECT_EQ(trainer.last_checkpoint(), config_.checkpoint.dir + "/step_00000004");
  EXPECT_EQ(Checkpoint::open(config_.checkpoint.dir).step(), 4);
}

TEST_F(TrainerTest, CorruptCheckpointIsRefusedAndPreviousStillLoads) {
  auto pc = make_single_rank_context();
  config_.checkpoint.interval = 5;
  config_.train.steps = 10;
  {
    Trainer trainer(config_, *pc, {.quiet = true});
    trainer.run();
  }
  const std::string latest = config_.checkpoint.dir + "/step_00000010/model.safetensors";
  {  // flip one byte in the middle of the newest checkpoint's weights
    std::fstream f(latest, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(std::filesystem::file_size(latest) / 2);
    char c = 0;
    f.read(&c, 1);
    f.seekp(std::filesystem::file_size(latest) / 2);
    c ^= 0x10;
    f.write(&c, 1);
  }
  try {
    Trainer trainer(config_, *pc, {.resume_from = config_.checkpoint.dir, .quiet = true});
    FAIL() << "a corrupted checkpoint was accepted";
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("corrupt"), std::string::npos) << message;
    EXPECT_NE(message.find("model.safetensors"), std::string::npos) << message;
    EXPECT_NE(message.find("step_00000005"), std::string::npos) << message;
  }
  Trainer previous(config_, *pc, {.resume_from = config_.checkpoint.dir + "/step_00000005", .quiet = true});
  EXPECT_EQ(previous.step(), 5);
}

TEST_F(TrainerTest, RecomputeKeepsTheLossCurve) {
  auto pc = make_single_rank_context();
  std::vector<double> base;
  for (RecomputeGranularity mode :
       {RecomputeGranularity::kNone, RecomputeGranularity::kFull, RecomputeGranularity::kSelective}) {
    Config c = config_;
    c.parallel.recompute = mode;
    Trainer trainer(c, *pc, {.quiet = true});
    const std::vector<double> losses = run_losses(trainer, 5);
    if (base.empty()) base = losses;
    EXPECT_EQ(losses, base);
  }
}

TEST_F(TrainerTest, MetricsFileHasOneRecordPerStep) {
  auto pc = make_single_rank_context();
  config_.train.steps = 4;
  {
    Trainer trainer(config_, *pc, {.quiet = true});
    trainer.run();
  }
  std::ifstream in(config_.train.metrics_file);
  int lines = 0;
  for (std::string line; std::getline(in, line); ++lines) {
    auto record = nlohmann::json::parse(line);
    EXPECT_EQ(record["step"], lines + 1);
    EXPECT_TRUE(record.contains("moe"));
    EXPECT_EQ(record["moe"]["layers"].size(), 1u);
    EXPECT_EQ(record["moe"]["layers"][0]["tokens_per_expert"].size(), 4u);
  }
  EXPECT_EQ(lines, 4);
}

// A communicator whose buffers live elsewhere than the compute backend's memory cannot be paired
// with it: the Trainer says so instead of handing host pointers to another device.
TEST_F(TrainerTest, CommunicatorOnAnotherDeviceIsRefused) {
  struct OtherDeviceCommunicator : LocalCommunicator {
    using LocalCommunicator::LocalCommunicator;
    Device device() const override { return Device{DeviceType::kHost, 1}; }
  };
  ParallelConfig single;
  auto pc = make_parallel_context(std::make_unique<OtherDeviceCommunicator>("world", 0), single, 1);
  try {
    Trainer trainer(config_, *pc, {.quiet = true});
    FAIL() << "a trainer paired a host backend with a communicator on another device";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("train.backend 'cpu' computes on host"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace moe4d
