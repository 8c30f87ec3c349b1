#include "train/optimizer.h"

#include "kernels/optimizer_kernels.h"

namespace moe4d {

AdamW::AdamW(ParamStore& params, const TrainConfig& config) : params_(params), config_(config) {
  for (int g = 0; g < kNumParamGroups; ++g) {
    const size_t bytes = params.flat_size(static_cast<ParamGroup>(g)) * sizeof(float);
    m_[g] = Buffer(bytes);
    v_[g] = Buffer(bytes);
  }
}

void AdamW::step(int64_t step, double lr, float grad_scale) {
  AdamWStep hyper;
  hyper.lr = static_cast<float>(lr);
  hyper.beta1 = static_cast<float>(config_.beta1);
  hyper.beta2 = static_cast<float>(config_.beta2);
  hyper.eps = static_cast<float>(config_.eps);
  hyper.grad_scale = grad_scale;
  hyper.step = step;
  for (int id = 0; id < params_.size(); ++id) {
    const ParamInfo& info = params_.info(id);
    hyper.weight_decay = info.weight_decay ? static_cast<float>(config_.weight_decay) : 0.0f;
    adamw_update(params_.value(id), params_.grad(id), exp_avg(id), exp_avg_sq(id), info.numel(), hyper);
  }
}

}  // namespace moe4d
