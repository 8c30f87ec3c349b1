// train/loss_scaler.cc — the dynamic loss-scale state machine (see the header).
#include "train/loss_scaler.h"

#include <algorithm>

#include "core/error.h"

namespace moe4d {

LossScaler::LossScaler(Precision precision, const LossScaleConfig& config)
    : dynamic_(precision == Precision::kFP16), config_(config), scale_(dynamic_ ? config.initial : 1.0) {}

void LossScaler::update(bool overflow) {
  if (overflow) ++overflow_steps_;
  if (!dynamic_) return;
  if (overflow) {
    // The growth window counts overflow-free steps since the last overflow.
    good_steps_ = 0;
    if (++overflows_in_row_ >= config_.hysteresis) {
      scale_ = std::max(kMinScale, scale_ / config_.factor);
      overflows_in_row_ = 0;
    }
    return;
  }
  overflows_in_row_ = 0;
  if (++good_steps_ >= config_.window) {
    scale_ *= config_.factor;
    good_steps_ = 0;
  }
}

nlohmann::json LossScaler::to_json() const {
  return {{"dynamic", dynamic_},
          {"scale", scale_},
          {"good_steps", good_steps_},
          {"overflows_in_row", overflows_in_row_},
          {"overflow_steps", overflow_steps_}};
}

void LossScaler::from_json(const nlohmann::json& state, const std::string& origin) {
  try {
    const bool dynamic = state.at("dynamic").get<bool>();
    const double scale = state.at("scale").get<double>();
    const int good = state.at("good_steps").get<int>();
    const int in_row = state.at("overflows_in_row").get<int>();
    const int64_t overflows = state.at("overflow_steps").get<int64_t>();
    if (!(scale >= kMinScale) || good < 0 || in_row < 0 || overflows < 0)
      fail("{}: state.json loss_scaler holds out-of-range values: {}", origin, state.dump());
    // A run resumed in another precision (fp32 / bf16 checkpoint, fp16 run or back) starts that
    // precision's scaling afresh; the overflow count carries over.
    if (dynamic_ && dynamic) {
      scale_ = scale;
      good_steps_ = good;
      overflows_in_row_ = in_row;
    }
    overflow_steps_ = overflows;
  } catch (const nlohmann::json::exception& e) {
    fail("{}: state.json loss_scaler is malformed ({}), expected dynamic (bool) and numbers scale, "
         "good_steps, overflows_in_row, overflow_steps",
         origin, e.what());
  }
}

}  // namespace moe4d
