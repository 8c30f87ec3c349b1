// plan/model_source.cc — resolving the MODEL argument of `moe4d plan`.
#include "plan/model_source.h"

#include <fmt/ranges.h>

#include <filesystem>

#include "config/config_loader.h"
#include "core/error.h"
#include "plan/model_presets.h"

namespace moe4d {

TrainingSetup setup_from_config(const Config& config) {
  TrainingSetup s;
  s.global_batch = config.train.global_batch_size;
  s.seq_length = config.model.seq_length;
  s.precision = config.train.precision;
  s.grad_compression = config.train.grad_compression;
  s.grad_buckets = config.parallel.gradient_aggregation_group;
  s.grad_bucket_size = config.parallel.grad_bucket_size;
  s.zero3_prefetch_buckets = config.parallel.zero3_prefetch_buckets;
  s.overlap_grad_reduce = config.parallel.overlap_grad_reduce;
  s.checkpoint_format = config.checkpoint.format;
  s.checkpoint_async = config.checkpoint.async;
  s.checkpoint_interval = config.checkpoint.dir.empty() ? 0 : config.checkpoint.interval;
  return s;
}

PlanModel load_plan_model(const std::string& arg) {
  PlanModel out;
  out.name = arg;
  if (is_model_preset(arg)) {
    const ModelPreset preset = model_preset(arg);
    out.model = preset.model;
    out.setup = preset.setup;
    return out;
  }
  if (!std::filesystem::is_regular_file(arg))
    fail("model '{}' is neither a moe4d config file nor a preset (one of: {})", arg,
         fmt::join(model_preset_names(), ", "));
  out.config = load_config(arg);
  out.model = out.config->model;
  out.setup = setup_from_config(*out.config);
  return out;
}

}  // namespace moe4d
