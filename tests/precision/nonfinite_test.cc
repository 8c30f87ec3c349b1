// Overflow and non-finite handling in training, driven by the trainer's fault-injection seam:
// an fp16 overflow injected at one step skips exactly that step (parameters untouched) and halves
// the loss scale, which grows back after `window` good steps (and hysteresis delays the halving);
// a forced NaN stops the run with a diagnosis naming the tensor, without writing a checkpoint from
// the bad steps; resuming across a skipped step is bit-exact.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <limits>
#include <string>

#include "../train/train_fixture.h"
#include "checkpoint/checkpoint.h"
#include "config/config_loader.h"
#include "core/error.h"
#include "precision_test_util.h"
#include "train/trainer.h"

namespace moe4d {
namespace {

using test::InjectValue;
using test::TempDir;

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

class NonfiniteTest : public ::testing::Test {
 protected:
  NonfiniteTest()
      : config_(test::tiny_training_config(test::write_synthetic_shard(dir_.file("train.bin"), 64, 20000))) {
    config_.train.precision = Precision::kFP16;
    // Small enough that the tiny model never overflows by itself: every overflow is the injected one.
    config_.train.loss_scale.initial = 1024;
    config_.train.metrics_file = dir_.file("metrics.jsonl");
  }
  std::string run_until_error(Trainer& trainer) {
    try {
      trainer.run();
    } catch (const Error& e) {
      return e.what();
    }
    ADD_FAILURE() << "the run did not stop";
    return "";
  }
  TempDir dir_;
  Config config_;
};

TEST_F(NonfiniteTest, Fp16WithoutInjectionNeverOverflowsHere) {
  auto pc = make_single_rank_context();
  Trainer trainer(config_, *pc, {.quiet = true});
  for (int i = 0; i < 12; ++i) EXPECT_FALSE(trainer.train_step().overflow) << "step " << i + 1;
  EXPECT_EQ(trainer.skipped_steps(), 0);
}

TEST_F(NonfiniteTest, InjectedOverflowSkipsExactlyThatStepHalvesTheScaleAndGrowsBackAfterTheWindow) {
  config_.train.loss_scale.window = 6;
  // +inf in an activation gradient of the backward, as a real fp16 overflow produces it.
  InjectValue overflow({5}, "layers.0.ffn.w2.weight", TensorRole::kInputGradient, kInf);
  auto pc = make_single_rank_context();
  Trainer trainer(config_, *pc, {.quiet = true, .fault_injector = &overflow});
  for (int s = 1; s <= 4; ++s) {
    const StepResult r = trainer.train_step();
    EXPECT_FALSE(r.skipped) << "step " << s;
    EXPECT_EQ(r.loss_scale, 1024) << "step " << s;
  }
  const auto before = trainer.gather_parameters();
  const StepResult r5 = trainer.train_step();
  EXPECT_GT(overflow.hits(5), 0);
  EXPECT_TRUE(r5.overflow);
  EXPECT_TRUE(r5.skipped);
  EXPECT_TRUE(std::isfinite(r5.loss)) << "an overflow in the backward leaves the loss finite";
  EXPECT_EQ(r5.loss_scale, 1024);
  EXPECT_TRUE(test::same_bits(before, trainer.gather_parameters())) << "a skipped step changed the parameters";
  EXPECT_EQ(r5.record["overflow"], true);
  EXPECT_EQ(r5.record["skipped"], true);
  EXPECT_EQ(r5.record["skipped_steps"], 1);
  EXPECT_EQ(r5.record["loss_scale"], 1024.0);
  // Halved for the next step; six good steps (6..11) later it doubles again.
  for (int s = 6; s <= 11; ++s) {
    const StepResult r = trainer.train_step();
    EXPECT_FALSE(r.skipped) << "step " << s;
    EXPECT_EQ(r.loss_scale, 512) << "step " << s;
  }
  EXPECT_EQ(trainer.train_step().loss_scale, 1024) << "step 12";
  EXPECT_EQ(trainer.skipped_steps(), 1);
  EXPECT_EQ(trainer.loss_scaler().overflow_steps(), 1);
}

TEST_F(NonfiniteTest, HysteresisHalvesOnlyAfterConsecutiveOverflows) {
  config_.train.loss_scale.hysteresis = 2;
  InjectValue overflow({5, 6}, "layers.1.moe.experts.w2", TensorRole::kInputGradient, kInf);
  auto pc = make_single_rank_context();
  Trainer trainer(config_, *pc, {.quiet = true, .fault_injector = &overflow});
  std::vector<StepResult> r;
  for (int s = 1; s <= 7; ++s) r.push_back(trainer.train_step());
  EXPECT_TRUE(r[4].skipped && r[5].skipped);
  EXPECT_FALSE(r[6].skipped);
  EXPECT_EQ(r[4].loss_scale, 1024);
  EXPECT_EQ(r[5].loss_scale, 1024);  // one overflow tolerated
  EXPECT_EQ(r[6].loss_scale, 512);   // halved after the second in a row
  EXPECT_EQ(trainer.skipped_steps(), 2);
}

TEST_F(NonfiniteTest, ForcedNanStopsWithDiagnosisAndKeepsTheLastGoodCheckpoint) {
  config_.checkpoint.dir = dir_.file("ckpt");
  config_.checkpoint.interval = 2;
  config_.checkpoint.keep = 5;
  config_.train.steps = 10;
  config_.train.max_nonfinite_steps = 3;
  // NaN in layer 1's attention output from step 4 on: the loss is NaN at steps 4, 5, 6.
  InjectValue nan = InjectValue::from_step(4, "layers.1.attn.out.weight", TensorRole::kForwardOutput, kNaN);
  auto pc = make_single_rank_context();
  std::string message;
  {
    Trainer trainer(config_, *pc, {.quiet = true, .fault_injector = &nan});
    message = run_until_error(trainer);
    EXPECT_EQ(trainer.step(), 5) << "steps 4 and 5 were skipped, step 6 stopped the run";
  }
  EXPECT_NE(message.find("step 6"), std::string::npos) << message;
  EXPECT_NE(message.find("3 consecutive steps"), std::string::npos) << message;
  EXPECT_NE(message.find("first non-finite tensor: layers.1 attention output"), std::string::npos) << message;
  EXPECT_NE(message.find("layers.1.attn.out.weight"), std::string::npos) << message;
  EXPECT_NE(message.find("on rank 0"), std::string::npos) << message;
  // The checkpoint due at step 4 was not written (non-finite streak): step 2 is still the newest,
  // and it loads.
  EXPECT_EQ(Checkpoint::open(config_.checkpoint.dir).step(), 2);
  Trainer resumed(config_, *pc, {.resume_from = config_.checkpoint.dir, .quiet = true});
  EXPECT_EQ(resumed.step(), 2);
  EXPECT_TRUE(std::isfinite(resumed.train_step().loss));
}

TEST_F(NonfiniteTest, Fp32NonfiniteGradientIsDiagnosedAtItsWeight) {
  config_.train.precision = Precision::kFP32;
  config_.train.max_nonfinite_steps = 2;
  // The loss stays finite; fp32 has no loss scaling to absorb a non-finite gradient.
  InjectValue nan = InjectValue::from_step(3, "layers.1.moe.experts.w2", TensorRole::kWeightGradient, kNaN);
  auto pc = make_single_rank_context();
  Trainer trainer(config_, *pc, {.quiet = true, .fault_injector = &nan});
  trainer.train_step();
  trainer.train_step();
  const StepResult r3 = trainer.train_step();
  EXPECT_TRUE(r3.skipped);
  EXPECT_TRUE(std::isfinite(r3.loss));
  try {
    trainer.train_step();
    FAIL() << "step 4 should stop the run";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("first non-finite tensor: layers.1.moe.experts.w2["), std::string::npos) << m;
    EXPECT_NE(m.find("] gradient"), std::string::npos) << m;
    EXPECT_NE(m.find("train.precision fp32"), std::string::npos) << m;
  }
}

TEST_F(NonfiniteTest, NonfiniteMasterWeightIsNamedFirst) {
  config_.train.precision = Precision::kBF16;
  config_.train.max_nonfinite_steps = 1;
  auto pc = make_single_rank_context();
  Trainer trainer(config_, *pc, {.quiet = true});
  trainer.train_step();
  const int id = trainer.params().find("layers.0.attn.qkv.weight");
  ASSERT_GE(id, 0);
  trainer.params().value(id)[3] = kNaN;
  try {
    trainer.train_step();
    FAIL() << "a NaN weight should stop the run";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("first non-finite tensor: layers.0.attn.qkv.weight (fp32 master weight)"),
              std::string::npos)
        << e.what();
  }
}

TEST_F(NonfiniteTest, ResumeAcrossASkippedStepIsBitExact) {
  config_.train.loss_scale.window = 3;  // the scale moves several times in 10 steps
  config_.train.steps = 10;
  config_.checkpoint.dir = dir_.file("ckpt");
  config_.checkpoint.interval = 4;
  std::vector<double> straight;
  std::vector<double> straight_scale;
  std::map<std::string, FullTensor> straight_params;
  auto pc = make_single_rank_context();
  {
    Config c = config_;
    c.checkpoint.dir.clear();
    InjectValue overflow({3}, "layers.0.ffn.w2.weight", TensorRole::kInputGradient, kInf);
    Trainer trainer(c, *pc, {.quiet = true, .fault_injector = &overflow});
    for (int i = 0; i < 10; ++i) {
      const StepResult r = trainer.train_step();
      straight.push_back(r.loss);
      straight_scale.push_back(r.loss_scale);
      EXPECT_EQ(r.skipped, i == 2) << "step " << i + 1;
    }
    straight_params = trainer.gather_parameters();
  }
  {  // interrupted after step 4 (checkpoint at 4, after the skipped step 3)
    InjectValue overflow({3}, "layers.0.ffn.w2.weight", TensorRole::kInputGradient, kInf);
    Trainer trainer(config_, *pc, {.exit_after = 4, .quiet = true, .fault_injector = &overflow});
    trainer.run();
    EXPECT_EQ(trainer.step(), 4);
  }
  Trainer resumed(config_, *pc, {.resume_from = config_.checkpoint.dir, .quiet = true});
  EXPECT_EQ(resumed.step(), 4);
  EXPECT_EQ(resumed.skipped_steps(), 1);
  for (int i = 4; i < 10; ++i) {
    const StepResult r = resumed.train_step();
    EXPECT_EQ(r.loss, straight[i]) << "step " << i + 1;
    EXPECT_EQ(r.loss_scale, straight_scale[i]) << "step " << i + 1;
  }
  EXPECT_TRUE(test::same_bits(resumed.gather_parameters(), straight_params));
  // The scale did move: halved at step 3, grown back after the window.
  EXPECT_EQ(straight_scale[2], 1024);
  EXPECT_EQ(straight_scale[3], 512);
  EXPECT_EQ(straight_scale[6], 1024);
}

TEST_F(NonfiniteTest, MetricsRecordTheSkippedSteps) {
  config_.train.steps = 6;
  InjectValue overflow({2, 4}, "layers.0.ffn.w2.weight", TensorRole::kInputGradient, kInf);
  auto pc = make_single_rank_context();
  {
    Trainer trainer(config_, *pc, {.quiet = true, .fault_injector = &overflow});
    trainer.run();
  }
  std::ifstream in(config_.train.metrics_file);
  std::string line;
  std::vector<nlohmann::json> records;
  while (std::getline(in, line)) records.push_back(nlohmann::json::parse(line));
  ASSERT_EQ(records.size(), 6u);
  const int64_t skipped_so_far[] = {0, 1, 1, 2, 2, 2};
  const double scale[] = {1024, 1024, 512, 512, 256, 256};
  for (int i = 0; i < 6; ++i) {
    EXPECT_EQ(records[i]["overflow"], i == 1 || i == 3) << "step " << i + 1;
    EXPECT_EQ(records[i]["skipped_steps"], skipped_so_far[i]) << "step " << i + 1;
    EXPECT_EQ(records[i]["loss_scale"], scale[i]) << "step " << i + 1;
  }
}

TEST(NonfiniteConfig, MaxNonfiniteStepsIsReadValidatedAndWritten) {
  TempDir dir;
  auto load = [&](const std::string& extra) {
    const std::string path = dir.file("c.yaml");
    std::ofstream(path) << "model: {vocab_size: 64, hidden_size: 32, num_layers: 2, num_heads: 4, "
                           "ffn_hidden_size: 48, seq_length: 16}\n"
                           "train:\n  global_batch_size: 8\n  steps: 10\n  precision: fp16\n"
                        << extra << "data: {train: x.bin}\n";
    return load_config(path);
  };
  EXPECT_EQ(load("").train.max_nonfinite_steps, 3);
  const Config c = load("  max_nonfinite_steps: 5\n");
  EXPECT_EQ(c.train.max_nonfinite_steps, 5);
  EXPECT_NE(config_to_yaml(c).find("max_nonfinite_steps: 5"), std::string::npos);
  try {
    load("  max_nonfinite_steps: 0\n");
    FAIL() << "0 should be refused";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("train.max_nonfinite_steps"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace moe4d
