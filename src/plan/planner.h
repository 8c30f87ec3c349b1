// plan/planner.h — `moe4d plan` as a library call: resolve the inputs, search or evaluate, render.
//
// The CLI (cli/cmd_plan.cc) only fills a PlanRequest from its flags and prints run_plan's text, so
// every behaviour of the command is testable here. What runs:
//   --layout L          evaluate L (or the model config's own parallel_config with L = "config"):
//                       memory, time, bottleneck in words, placement; refused when its product is
//                       not the device count ("parallel size mismatch: ...")
//   --devices a,b,c     search each device count; the best layout and tokens/s per count
//   otherwise           search; the ranked table (--top N), --explain RANK for one row in full,
//                       --show-rejected for every refused split and its reason
//   --export FORMAT     instead of a report, the chosen layout (--layout, --explain RANK, or the
//                       best) as a moe4d config, a MindFormers block or Megatron-LM arguments
// Errors are moe4d::Error with one line.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "config/config.h"
#include "plan/layout_evaluator.h"
#include "plan/search.h"

namespace moe4d {

struct PlanRequest {
  std::string model;    // preset name or moe4d config path (or, with hf_model, a config.json's path)
  // The model of a Hugging Face config.json (read by the CLI with interop/hf_architecture.h, which the
  // planner does not depend on); the setup is then a 1024-sequence batch of min(seq_length, 4096), bf16.
  std::optional<ModelConfig> hf_model;
  std::string cluster;  // preset name or cluster YAML path
  std::optional<int64_t> global_batch;
  std::optional<int> seq_length;
  std::optional<Precision> precision;
  std::optional<double> expert_imbalance;  // TrainingSetup::expert_imbalance (>= 1)
  std::optional<int> redundant_experts;    // TrainingSetup::redundant_experts (>= 0; needs expert_imbalance)
  std::optional<int> save_interval;        // TrainingSetup::checkpoint_interval (>= 0; Megatron's --save-interval)
  bool async_save = false;                 // sharded asynchronous saves (Megatron's --async-save)
  std::vector<int> devices;  // empty: the cluster's own device count
  std::string layout;        // "" (search), "config", or a --layout string
  int top = 10;
  bool show_rejected = false;
  bool json = false;
  std::string export_format;  // "", "moe4d", "mindformers", "megatron"
  int explain = 0;            // 1-based rank of the table; 0: none
  SearchSpace space;
};

// Runs the request and returns what `moe4d plan` prints.
std::string run_plan(const PlanRequest& request);

// "bf16" -> Precision; moe4d::Error otherwise.
Precision parse_precision(const std::string& name);
// "32,64,128" -> {32, 64, 128}; moe4d::Error for anything but positive integers.
std::vector<int> parse_device_list(const std::string& text);

}  // namespace moe4d
