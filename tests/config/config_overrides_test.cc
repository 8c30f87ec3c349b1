// Tests of `--set KEY=VALUE` (config/config_loader.h, config_overrides.cc): an override changes the
// value the file gave, adds keys and sections, replaces an alias spelling, and is checked like the
// file, with errors that name `--set KEY` instead of a line of the file.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "config/config_loader.h"
#include "core/error.h"

namespace moe4d {
namespace {

constexpr const char* kBase = R"(model:
  vocab_size: 512
  hidden_size: 64
  num_layers: 2
  num_heads: 4
  ffn_hidden_size: 128
  seq_length: 32
parallel_config:
  model_parallel: 4
  recompute: true
train:
  global_batch_size: 8
  steps: 10
  lr: 1.0e-3
data:
  train: data/train.bin
)";

Config with(const std::vector<std::string>& overrides) { return parse_config(kBase, "base.yaml", overrides); }

std::string error_of(const std::vector<std::string>& overrides) {
  try {
    with(overrides);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(ConfigOverrides, ReplaceAddAndLastWins) {
  const Config c = with({"train.lr=3e-4", "train.steps=20", "train.steps=30", "model.moe.num_experts=4",
                         "model.moe.top_k=2", "checkpoint.dir=runs/a#b", "train.trace_steps=[2, 3]"});
  EXPECT_DOUBLE_EQ(c.train.lr, 3e-4);
  EXPECT_EQ(c.train.steps, 30);
  EXPECT_EQ(c.model.moe.num_experts, 4);
  EXPECT_EQ(c.model.moe.top_k, 2);
  EXPECT_EQ(c.checkpoint.dir, "runs/a#b");  // the text as written: no YAML comment
  EXPECT_EQ(c.train.trace_steps, (std::vector<int>{2, 3}));
  // What a checkpoint records (config_to_yaml) reads back with the overrides in it.
  const Config echoed = parse_config(config_to_yaml(c), "echo.yaml");
  EXPECT_DOUBLE_EQ(echoed.train.lr, 3e-4);
  EXPECT_EQ(echoed.train.steps, 30);
}

TEST(ConfigOverrides, AliasSpellingReplacesTheOther) {
  EXPECT_EQ(with({"parallel_config.tensor_parallel=2"}).parallel.tensor_parallel, 2);  // file: model_parallel 4
  EXPECT_EQ(with({"parallel_config.model_parallel=1"}).parallel.tensor_parallel, 1);
  EXPECT_EQ(error_of({"parallel_config.recompute.granularity=selective"}),
            "--set parallel_config.recompute.granularity: parallel_config.recompute is not a map in the config "
            "file (it holds a value), so it has no key granularity");
}

TEST(ConfigOverrides, NullClearsAnOptional) {
  EXPECT_FALSE(with({"model.moe.num_experts=4", "model.moe.top_k=1", "model.moe.capacity_factor=null"})
                   .model.moe.capacity_factor.has_value());
  EXPECT_TRUE(with({"model.moe.num_experts=4", "model.moe.top_k=1", "model.moe.capacity_factor=1.25"})
                  .model.moe.capacity_factor.has_value());
}

TEST(ConfigOverrides, ErrorsNameTheOverride) {
  EXPECT_EQ(error_of({"train.lr=fast"}), "--set train.lr: expected a finite number, got 'fast'");
  EXPECT_EQ(error_of({"train.lrr=1"}).rfind("--set train.lrr: unknown key (expected one of: global_batch_size", 0), 0u);
  EXPECT_EQ(error_of({"modle.hidden_size=1"}).rfind("--set modle.hidden_size: modle: unknown key", 0), 0u);
  EXPECT_EQ(error_of({"model.num_layers=0"}), "--set model.num_layers: expected a positive integer, got '0'");
  EXPECT_EQ(error_of({"train.trace_steps=[1, x]"}),
            "--set train.trace_steps: train.trace_steps[1]: expected an integer, got 'x'");
  EXPECT_EQ(error_of({"train.lr"}), "--set 'train.lr': expected KEY=VALUE with a dotted key, e.g. --set train.lr=3e-4");
  EXPECT_NE(error_of({"train..lr=1"}).find("expected KEY=VALUE with a dotted key of letters"), std::string::npos);
  EXPECT_EQ(error_of({"train.lr.x=1"}),
            "--set train.lr.x: train.lr is not a map in the config file (it holds a value), so it has no key x");
  EXPECT_NE(error_of({"train.trace_steps=[1,"}).find("--set train.trace_steps: the value '[1,' is not a valid YAML"),
            std::string::npos);
  // A file error stays the file's, with its line.
  std::string text = kBase;
  text.replace(text.find("lr: 1.0e-3"), 10, "lr: fast");
  try {
    parse_config(text, "base.yaml", {"train.steps=20"});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "base.yaml:14: train.lr: expected a finite number, got 'fast'");
  }
}

}  // namespace
}  // namespace moe4d
