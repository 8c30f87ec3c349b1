// plan/model_presets.h — named models for `moe4d plan`, expressed in the reference model (docs/model.md §1,
// with its grouped-query attention, expert widths, shared experts and leading dense layers; no MLA):
//   moe-120b          the articles' 120B MoE: ~40B dense (attention + embeddings) + ~77B experts
//   dense-70b         the articles' 70B dense model (Llama-2-70B shape, MHA)
//   mixtral-8x7b      Mixtral 8x7B exactly (GQA 8 KV heads, rope_theta 1e6, 8 experts top-2; 46.7B)
//   deepseek-moe-16b  DeepSeek-MoE 16B exactly (layer 0 dense, 64 experts of 1408 top-6 + 2 shared; 16.4B)
//   deepseek-v3-like  DeepSeek-V3 proportions (256 fine-grained experts, top-8, 60 layers, MHA, no shared
//                     expert; ~690B)
//   moe-1t            a 1.05T-parameter MoE (64 experts, top-2) for the planner's scale benchmark
// Each comes with the training defaults the planner uses when no flag overrides them.
#pragma once

#include <string>
#include <vector>

#include "config/config.h"
#include "plan/training_setup.h"

namespace moe4d {

struct ModelPreset {
  std::string name;
  std::string description;
  ModelConfig model;
  TrainingSetup setup;
};

std::vector<std::string> model_preset_names();
bool is_model_preset(const std::string& name);
// Throws moe4d::Error naming the presets when `name` is unknown.
ModelPreset model_preset(const std::string& name);

}  // namespace moe4d
