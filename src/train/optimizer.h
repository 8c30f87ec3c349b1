// train/optimizer.h — AdamW over the parameter elements this rank updates, in every ZeRO stage.
//
// Decoupled weight decay (Loshchilov & Hutter), none on norms (ParamInfo::weight_decay). The
// optimizer sees its work as segments: contiguous runs of one parameter with their value, gradient
// and position in the fp32 state buffers m and v (one pair per parameter group). zero_stage 0: one
// segment per parameter, state laid out like the ParamStore's flat buffers. zero_stage >= 1: this
// rank's slices (train/zero_layout.h), state laid out like its shard, so m and v take P instead of
// F elements per group; the values are the ParamStore's (stage 1/2, all-gathered after the step by
// the caller) or the value shards (stage 3), the gradients the full buffers (1) or the gradient
// shards (2/3). Checkpoints store m and v as full tensors exp_avg.<name>, exp_avg_sq.<name>
// (train/trainer_checkpoint.cc assembles / cuts the shards), so any layout loads them.
//
// Threading: the trainer's thread only.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "config/config.h"
#include "core/tensor.h"
#include "model/param_store.h"
#include "parallel/parallel_context.h"

namespace moe4d {

class Backend;
class GradSync;
class ZeroLayout;
class ZeroParamGatherer;

struct OptimizerSegment {
  ParamGroup group = ParamGroup::kDense;
  float* value = nullptr;
  const float* grad = nullptr;
  size_t state_offset = 0;  // element index in the group's m and v
  size_t count = 0;
  bool weight_decay = true;
};

class AdamW {
 public:
  // state_size[g]: elements of m and v for group g. The updates run on `backend` (borrowed; null:
  // this thread's CPU backend).
  AdamW(std::vector<OptimizerSegment> segments, const size_t state_size[kNumParamGroups], const TrainConfig& config,
        Backend* backend = nullptr);
  // zero_stage 0: every parameter of `params`, state laid out like its flat buffers.
  AdamW(ParamStore& params, const TrainConfig& config, Backend* backend = nullptr);
  virtual ~AdamW();
  AdamW(const AdamW&) = delete;
  AdamW& operator=(const AdamW&) = delete;

  // One update with learning rate `lr`; the gradients are multiplied by grad_scale first
  // (global-norm clipping). `step` is the 1-based optimizer step (bias correction).
  virtual void step(int64_t step, double lr, float grad_scale);
  // True when step `step`'s gradients must stay local to each data replica (1-bit Adam after its
  // warm-up reduces its momentum instead). Plain AdamW: never.
  virtual bool keeps_gradients_local(int64_t /*step*/) const { return false; }
  // Bytes of optimizer state this rank holds.
  virtual size_t state_bytes() const;
  // Bytes the optimizer itself handed to data-parallel collectives since construction.
  virtual int64_t payload_bytes() const { return 0; }
  virtual const char* name() const { return "adamw"; }

  // The state buffers (state_size[g] floats each).
  float* exp_avg(ParamGroup g) { return m_[int(g)].f32(); }
  float* exp_avg_sq(ParamGroup g) { return v_[int(g)].f32(); }
  size_t state_size(ParamGroup g) const { return state_size_[int(g)]; }

 protected:
  Backend& backend_;
  std::vector<OptimizerSegment> segments_;
  const TrainConfig& config_;
  size_t state_size_[kNumParamGroups];
  Buffer m_[kNumParamGroups];
  Buffer v_[kNumParamGroups];
};

// The optimizer of train.optimizer for this rank's ZeRO stage: segments over the full parameters
// (stage 0) or this rank's slices, with values and gradients where `grads` / `values` keep them.
// `values` is null for stage 0. 1-bit Adam needs stage 0 (train/feature_gate.cc refuses others).
// Its kernels run on `backend` (borrowed).
std::unique_ptr<AdamW> make_optimizer(Backend& backend, const TrainConfig& config, int zero_stage, ParamStore& params,
                                      ParallelContext& pc, const ZeroLayout& layout, GradSync& grads,
                                      ZeroParamGatherer* values);

}  // namespace moe4d
