// train/nonfinite_guard.cc — the skip / stop policy for non-finite steps (see the header).
#include "train/nonfinite_guard.h"

#include "core/check.h"

namespace moe4d {

NonfiniteGuard::NonfiniteGuard(int max_nonfinite_steps) : max_nonfinite_steps_(max_nonfinite_steps) {
  MOE4D_CHECK_GE(max_nonfinite_steps, 1);
}

StepVerdict NonfiniteGuard::assess(bool loss_finite, bool grads_finite, bool overflow_absorbable) {
  if (loss_finite && grads_finite) {
    streak_ = 0;
    return StepVerdict::kApply;
  }
  ++skipped_steps_;
  if (loss_finite && overflow_absorbable) {  // ordinary fp16 overflow: the scaler lowers the scale
    streak_ = 0;
    return StepVerdict::kSkip;
  }
  return ++streak_ >= max_nonfinite_steps_ ? StepVerdict::kStop : StepVerdict::kSkip;
}

}  // namespace moe4d
