// train/lr_schedule.h — linear warm-up then cosine decay to min_lr (the usual Megatron/DeepSpeed shape).
#pragma once

#include <algorithm>
#include <cmath>

namespace moe4d {

// Learning rate of optimizer step `step` (1-based) out of `total_steps`.
inline double learning_rate(int step, int total_steps, int warmup_steps, double lr, double min_lr) {
  if (warmup_steps > 0 && step <= warmup_steps) return lr * step / warmup_steps;
  const int decay_steps = std::max(1, total_steps - warmup_steps);
  const double progress = std::clamp(double(step - warmup_steps) / decay_steps, 0.0, 1.0);
  return min_lr + 0.5 * (lr - min_lr) * (1.0 + std::cos(M_PI * progress));
}

}  // namespace moe4d
