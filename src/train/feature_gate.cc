#include "train/feature_gate.h"

#include "core/error.h"

namespace moe4d {

void check_training_support(const Config& c) {
  const std::string& src = c.source;
  if (c.parallel.pipeline_parallel > 1)
    fail("{}: parallel_config.pipeline_parallel {} is not supported by this build yet, expected 1", src,
         c.parallel.pipeline_parallel);
  if (c.parallel.virtual_pipeline > 1 || c.parallel.pipeline_schedule == PipelineSchedule::kInterleaved)
    fail("{}: parallel_config.pipeline_schedule interleaved / virtual_pipeline > 1 need pipeline parallelism, which "
         "this build does not support yet",
         src);
  if (!c.parallel.stage_layers.empty())
    fail("{}: parallel_config.stage_layers needs pipeline parallelism, which this build does not support yet", src);
  if (c.parallel.zero_stage != 0)
    fail("{}: parallel_config.zero_stage {} is not supported by this build yet, expected 0", src,
         c.parallel.zero_stage);
  if (c.train.precision != Precision::kFP32)
    fail("{}: train.precision bf16/fp16 is not supported by this build yet, expected fp32", src);
  if (c.train.grad_compression != GradCompression::kNone)
    fail("{}: train.grad_compression is not supported by this build yet, expected none", src);
  if (c.train.optimizer != OptimizerKind::kAdamW)
    fail("{}: train.optimizer onebit_adam is not supported by this build yet, expected adamw", src);
}

}  // namespace moe4d
