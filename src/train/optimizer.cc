// train/optimizer.cc — AdamW over segments, and the choice of segments per ZeRO stage.
#include "train/optimizer.h"

#include <array>

#include "backend/cpu_backend.h"
#include "core/check.h"
#include "train/grad_sync.h"
#include "train/onebit_adam.h"
#include "train/zero_layout.h"
#include "train/zero_param_gatherer.h"

namespace moe4d {
namespace {

std::vector<OptimizerSegment> whole_parameters(ParamStore& params) {
  std::vector<OptimizerSegment> segments;
  for (int id = 0; id < params.size(); ++id) {
    const ParamInfo& info = params.info(id);
    segments.push_back(
        {info.group, params.value(id), params.grad(id), info.offset, size_t(info.numel()), info.weight_decay});
  }
  return segments;
}

std::array<size_t, kNumParamGroups> flat_sizes(const ParamStore& params) {
  return {params.flat_size(ParamGroup::kDense), params.flat_size(ParamGroup::kExpert)};
}

}  // namespace

AdamW::AdamW(ParamStore& params, const TrainConfig& config, Backend* backend)
    : AdamW(whole_parameters(params), flat_sizes(params).data(), config, backend) {}

AdamW::AdamW(std::vector<OptimizerSegment> segments, const size_t state_size[kNumParamGroups],
             const TrainConfig& config, Backend* backend)
    : backend_(backend ? *backend : thread_cpu_backend()), segments_(std::move(segments)), config_(config) {
  for (int g = 0; g < kNumParamGroups; ++g) {
    state_size_[g] = state_size[g];
    m_[g] = Buffer(state_size[g] * sizeof(float));
    v_[g] = Buffer(state_size[g] * sizeof(float));
  }
  for (const OptimizerSegment& s : segments_) MOE4D_CHECK_LE(s.state_offset + s.count, state_size_[int(s.group)]);
}

AdamW::~AdamW() = default;

void AdamW::step(int64_t step, double lr, float grad_scale) {
  AdamWStep hyper;
  hyper.lr = static_cast<float>(lr);
  hyper.beta1 = static_cast<float>(config_.beta1);
  hyper.beta2 = static_cast<float>(config_.beta2);
  hyper.eps = static_cast<float>(config_.eps);
  hyper.grad_scale = grad_scale;
  hyper.step = step;
  for (const OptimizerSegment& s : segments_) {
    hyper.weight_decay = s.weight_decay ? static_cast<float>(config_.weight_decay) : 0.0f;
    const int g = static_cast<int>(s.group);
    backend_.adamw_update(s.value, s.grad, m_[g].f32() + s.state_offset, v_[g].f32() + s.state_offset, int64_t(s.count),
                          hyper);
  }
}

size_t AdamW::state_bytes() const { return m_[0].bytes() + m_[1].bytes() + v_[0].bytes() + v_[1].bytes(); }

std::unique_ptr<AdamW> make_optimizer(Backend& backend, const TrainConfig& config, int zero_stage, ParamStore& params,
                                      ParallelContext& pc, const ZeroLayout& layout, GradSync& grads,
                                      ZeroParamGatherer* values) {
  std::vector<OptimizerSegment> segments;
  size_t state_size[kNumParamGroups];
  if (zero_stage == 0) {
    segments = whole_parameters(params);
    for (int g = 0; g < kNumParamGroups; ++g) state_size[g] = params.flat_size(ParamGroup(g));
  } else {
    MOE4D_CHECK(values != nullptr && config.optimizer == OptimizerKind::kAdamW);
    for (const ShardPiece& p : layout.pieces()) {
      float* value = zero_stage == 3 ? values->shard_values(p.group) + p.shard_offset
                                     : params.flat_values(p.group) + p.flat_begin;
      const float* grad = zero_stage >= 2 ? grads.shard_grads(p.group) + p.shard_offset
                                          : params.flat_grads(p.group) + p.flat_begin;
      segments.push_back({p.group, value, grad, p.shard_offset, p.count, params.info(p.param).weight_decay});
    }
    for (int g = 0; g < kNumParamGroups; ++g) state_size[g] = layout.shard_size(ParamGroup(g));
  }
  if (config.optimizer == OptimizerKind::kOneBitAdam)
    return std::make_unique<OneBitAdam>(std::move(segments), state_size, config, params, pc, layout, &backend);
  return std::make_unique<AdamW>(std::move(segments), state_size, config, &backend);
}

}  // namespace moe4d
