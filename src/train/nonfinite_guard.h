// train/nonfinite_guard.h — what a step with non-finite numbers means for the run.
//
// After the world reductions of a step every rank knows two facts: is the loss finite, and are all
// gradients finite (the gradient norm is; one non-finite element anywhere makes the reduced norm
// inf or NaN). The guard turns them into a verdict:
//   kApply — both finite: the optimizer updates the parameters.
//   kSkip  — something is non-finite: parameters, optimizer state and router biases stay as they
//            were; the step still counts (the data position, a pure function of the step, moves on).
//            Ordinary fp16 overflow (finite loss, non-finite gradients, and the loss scaler can still
//            lower the scale) is skipped without counting toward a stop.
//   kStop  — the loss (or gradients loss scaling cannot absorb: fp32, bf16, or fp16 at the minimum
//            scale) has been non-finite for max_nonfinite_steps consecutive steps: the trainer
//            diagnoses the step (train/nonfinite_diagnosis.h) and stops the run. While such a streak
//            lasts no checkpoint is written, so the latest checkpoint is the last good state.
//
// Not thread-safe; one per Trainer, fed identical facts on every rank.
#pragma once

#include <cstdint>

namespace moe4d {

enum class StepVerdict { kApply, kSkip, kStop };

class NonfiniteGuard {
 public:
  explicit NonfiniteGuard(int max_nonfinite_steps);

  // overflow_absorbable: non-finite gradients with a finite loss are fp16 overflow that the loss
  // scaler handles (LossScaler::can_absorb_overflow()).
  StepVerdict assess(bool loss_finite, bool grads_finite, bool overflow_absorbable);

  int streak() const { return streak_; }  // consecutive non-finite steps up to the last assessed one
  int max_nonfinite_steps() const { return max_nonfinite_steps_; }
  int64_t skipped_steps() const { return skipped_steps_; }  // cumulative, over the whole run
  // Restores the cumulative count (resume; a checkpoint is never written inside a streak).
  void restore(int64_t skipped_steps) { skipped_steps_ = skipped_steps; }

 private:
  int max_nonfinite_steps_;
  int streak_ = 0;
  int64_t skipped_steps_ = 0;
};

}  // namespace moe4d
