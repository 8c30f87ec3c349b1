// plan/model_presets.h — named models for `moe4d plan`, expressed in the reference model (design.md §2:
// multi-head attention without GQA/MLA, one ffn_hidden_size for dense FFNs and experts, no shared
// experts), so their counts are close to, not equal to, the originals:
//   moe-120b          the articles' 120B MoE: ~40B dense (attention + embeddings) + ~77B experts
//   dense-70b         the articles' 70B dense model (Llama-2-70B shape, MHA)
//   mixtral-8x7b      Mixtral 8x7B (8 experts, top-2; 47.5B here, 46.7B with GQA)
//   deepseek-v3-like  DeepSeek-V3 proportions (256 fine-grained experts, top-8, 60 layers; ~690B)
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
