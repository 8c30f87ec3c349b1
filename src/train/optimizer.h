// train/optimizer.h — AdamW over the parameters a rank holds.
//
// Decoupled weight decay (Loshchilov & Hutter), none on norms (ParamInfo::weight_decay). State m and
// v are fp32 flat buffers mirroring the ParamStore's, so a checkpoint stores them under the
// parameter names and any layout can load them.
#pragma once

#include "config/config.h"
#include "core/tensor.h"
#include "model/param_store.h"

namespace moe4d {

class AdamW {
 public:
  AdamW(ParamStore& params, const TrainConfig& config);

  // One update with learning rate `lr`; the gradients are multiplied by grad_scale first
  // (global-norm clipping). `step` is the 1-based optimizer step (bias correction).
  void step(int64_t step, double lr, float grad_scale);

  float* exp_avg(int id) { return m_[group(id)].f32() + params_.info(id).offset; }
  float* exp_avg_sq(int id) { return v_[group(id)].f32() + params_.info(id).offset; }
  size_t state_bytes() const { return m_[0].bytes() + m_[1].bytes() + v_[0].bytes() + v_[1].bytes(); }

 private:
  int group(int id) const { return static_cast<int>(params_.info(id).group); }
  ParamStore& params_;
  const TrainConfig& config_;
  Buffer m_[kNumParamGroups];
  Buffer v_[kNumParamGroups];
};

}  // namespace moe4d
