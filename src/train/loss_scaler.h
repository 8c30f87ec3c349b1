// train/loss_scaler.h — dynamic loss scaling for fp16 training (Micikevicius et al., "Mixed
// Precision Training"; the DeepSpeed / Megatron-LM dynamic scaler).
//
// fp16 has 5 exponent bits: small gradients underflow to zero and large ones overflow to inf. The
// backward therefore starts from loss x scale (BlockContext::grad_scale carries it), every
// activation gradient is `scale` times larger, and the trainer divides the gradients by `scale`
// again before clipping and the optimizer (folded into the clipping coefficient). The scale adapts:
//   - overflow (some gradient non-finite on some rank, found by the step's one gradient-norm
//     reduction): the step is skipped; the scale is divided by `factor` once `hysteresis`
//     consecutive steps overflowed (hysteresis 1: at every overflow), never below kMinScale;
//   - `window` consecutive overflow-free steps: the scale is multiplied by `factor`.
// A good step resets the consecutive-overflow count (DeepSpeed's consecutive_hysteresis).
// bf16 has fp32's exponent range and fp32 needs nothing: for them the scale is a constant 1 and
// update() changes nothing. The state is saved in checkpoints (state.json) so resume stays exact.
//
// Not thread-safe; one per Trainer, updated identically on every rank (its inputs are world-reduced).
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "config/config.h"

namespace moe4d {

class LossScaler {
 public:
  // The scale does not go below 1: a scale under 1 would shrink gradients toward fp16's underflow,
  // which is what scaling is there to prevent (DeepSpeed's and Megatron's default minimum).
  static constexpr double kMinScale = 1.0;

  LossScaler(Precision precision, const LossScaleConfig& config);

  bool dynamic() const { return dynamic_; }
  // The scale the next step's backward uses (a power of `factor` times `initial`; 1 unless fp16).
  double scale() const { return scale_; }
  // True if an overflow at the current scale is ordinary fp16 overflow that lowering the scale can
  // cure: fp16 and the scale has not reached kMinScale yet.
  bool can_absorb_overflow() const { return dynamic_ && scale_ > kMinScale; }

  // Records the outcome of the step that used scale(): overflow = non-finite gradients.
  void update(bool overflow);

  int64_t overflow_steps() const { return overflow_steps_; }  // cumulative
  int good_steps() const { return good_steps_; }              // overflow-free steps since the last change

  // {"dynamic", "scale", "good_steps", "overflows_in_row", "overflow_steps"} for state.json, and
  // back. from_json throws moe4d::Error naming `origin` on a malformed entry.
  nlohmann::json to_json() const;
  void from_json(const nlohmann::json& state, const std::string& origin);

 private:
  bool dynamic_;
  LossScaleConfig config_;
  double scale_;
  int good_steps_ = 0;        // consecutive overflow-free steps since the scale last changed
  int overflows_in_row_ = 0;  // consecutive overflowed steps (hysteresis)
  int64_t overflow_steps_ = 0;
};

}  // namespace moe4d
