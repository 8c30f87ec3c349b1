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
  // ZeRO 0-3 and grad_compression none / bf16 / fp16 combine with every layout (docs/zero.md).
  // 1-bit Adam averages the full momentum on every rank and needs a warm-up that fills v.
  if (c.train.optimizer == OptimizerKind::kOneBitAdam) {
    if (c.parallel.zero_stage != 0)
      fail("{}: train.optimizer onebit_adam with parallel_config.zero_stage {}: 1-bit Adam compresses the full "
           "momentum on every rank, expected zero_stage 0",
           src, c.parallel.zero_stage);
    if (c.train.freeze_steps < 1)
      fail("{}: train.freeze_steps {} with train.optimizer onebit_adam, expected >= 1 full-precision Adam warm-up "
           "steps (the frozen variance comes from them)",
           src, c.train.freeze_steps);
  }
}

}  // namespace moe4d
