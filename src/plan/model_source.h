// plan/model_source.h — the MODEL argument of `moe4d plan`: a preset name or a moe4d config file.
//
// A config file is read with config/config_loader.h (one parser for the whole project); the planner
// takes its `model` section, and as training defaults train.global_batch_size, train.precision,
// train.grad_compression, parallel_config.gradient_aggregation_group and overlap_grad_reduce.
// The whole Config is kept: `--layout config` evaluates its parallel_config, and `--export moe4d`
// writes it back with the chosen layout.
#pragma once

#include <optional>
#include <string>

#include "config/config.h"
#include "plan/training_setup.h"

namespace moe4d {

struct PlanModel {
  std::string name;  // preset name or file path
  ModelConfig model;
  TrainingSetup setup;
  std::optional<Config> config;  // only for config files
};

// Throws moe4d::Error when `preset_or_path` is neither a preset nor a readable, valid config.
PlanModel load_plan_model(const std::string& preset_or_path);

// The setup a moe4d config implies.
TrainingSetup setup_from_config(const Config& config);

}  // namespace moe4d
