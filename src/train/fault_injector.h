// train/fault_injector.h — the trainer's fault-injection seam, for tests (LevelDB Env style).
//
// A test that needs an fp16 overflow at step 7 or a NaN in "layers.1 attention output" passes a
// FaultInjector through TrainerOptions::fault_injector. Production runs pass none: then no hook is
// installed and nothing is paid. The injector sees the block GEMM results of the steps it watches
// (model/tensor_inspector.h), on every rank, and may overwrite them; the trainer's overflow
// handling and non-finite diagnosis then run exactly as they would for a real fault (including the
// diagnosis re-run of the step, which sees the same injection).
#pragma once

#include <cstdint>

#include "model/param_store.h"
#include "model/tensor_inspector.h"

namespace moe4d {

class FaultInjector {
 public:
  virtual ~FaultInjector() = default;
  // Whether to watch optimizer step `step` (1-based). Unwatched steps run without a hook.
  virtual bool watches(int64_t step) const = 0;
  // A block GEMM result of a watched step (forward activation, activation gradient, or weight
  // gradient after accumulation): n contiguous floats the injector may overwrite. `params` names
  // the site (describe_tensor_site, params.info(site.param_id).name).
  virtual void on_result(int64_t step, const TensorSite& site, const ParamStore& params, float* data, int64_t n) = 0;
};

// Adapts a FaultInjector to the blocks' TensorInspector interface for one step.
class FaultInjectionHook : public TensorInspector {
 public:
  FaultInjectionHook(FaultInjector& injector, const ParamStore& params) : injector_(injector), params_(params) {}
  void set_step(int64_t step) { step_ = step; }
  void on_operand(const TensorSite&, const float*, int64_t) override {}
  void on_result(const TensorSite& site, float* data, int64_t n) override {
    injector_.on_result(step_, site, params_, data, n);
  }

 private:
  FaultInjector& injector_;
  const ParamStore& params_;
  int64_t step_ = 0;
};

}  // namespace moe4d
