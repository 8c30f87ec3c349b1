#include "train/feature_gate.h"

#include "core/error.h"
#include "train/pipeline_schedule.h"

namespace moe4d {

void check_training_support(const Config& c) {
  const std::string& src = c.source;
  // Pipeline parallelism (all three schedules, stage_layers, virtual_pipeline) is supported; the
  // layout rules are in validate_layout. What is refused is a pipeline starved of micro-batches.
  try {
    check_pipeline_micro_batches(c.parallel);
  } catch (const Error& e) {
    fail("{}: {}", src, e.what());
  }
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
