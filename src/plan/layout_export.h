// plan/layout_export.h — a chosen layout written for the trainer that will run it: a moe4d config
// (config/config_loader.h's format), a MindFormers `parallel_config` block, or Megatron-LM arguments.
//
// Each target counts differently, and the export says so in a comment where it matters:
// MindFormers puts expert parallelism inside data_parallel (data_parallel = DP_local x EP, world =
// data_parallel x model_parallel x pipeline_stage), while moe4d and the articles count DP_local;
// Megatron-LM derives DP from the world size and fixes its rank order to tp-cp-ep-dp-pp. Pure
// functions.
#pragma once

#include <optional>
#include <string>

#include "config/config.h"
#include "plan/layout_evaluator.h"

namespace moe4d {

enum class ExportFormat { kMoe4d, kMindFormers, kMegatron };

// "moe4d", "mindformers", "megatron"; moe4d::Error otherwise.
ExportFormat parse_export_format(const std::string& name);

// A complete moe4d config running `layout`. With `base` (the config the model came from) every other
// section is kept; without it (a preset) data.train and train.steps are template values the header
// comment asks the user to set.
std::string export_moe4d_config(const PlanContext& ctx, const Layout& layout, const std::optional<Config>& base);

// MindFormers YAML: parallel / parallel_config / recompute_config (and the interleave settings).
std::string export_mindformers(const PlanContext& ctx, const Layout& layout);

// A Megatron-LM run that pastes into a shell: the environment line Megatron asserts, `torchrun` with the
// cluster's processes per node, node count, node rank and rendezvous, then pretrain_gpt.py's arguments one
// per line (model, layout, batch, optimizer and schedule — from `base`'s train section when the model came
// from a config, else moe4d's defaults —, --mock-data as the data source).
std::string export_megatron(const PlanContext& ctx, const Layout& layout,
                            const std::optional<Config>& base = std::nullopt);

std::string export_layout(ExportFormat format, const PlanContext& ctx, const Layout& layout,
                          const std::optional<Config>& base);

}  // namespace moe4d
