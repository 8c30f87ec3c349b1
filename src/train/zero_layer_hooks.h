// train/zero_layer_hooks.h — the Transformer's layer hooks (model/layer_hooks.h) wired to ZeRO:
// ZeRO-3 materialises the buckets of each weight a block reads (plus its prefetch window) and
// releases them after (train/zero_param_gatherer.h); ZeRO-2/3 reduce each
// gradient bucket as soon as the blocks' backward has reported all its elements, within the layer,
// and check at the layer's end that every parameter of it was reported (train/grad_sync.h).
//
// Borrows both objects; either may be null (the stage does not need it). Trainer thread only.
#pragma once

#include "model/layer_hooks.h"
#include "train/grad_sync.h"
#include "train/zero_param_gatherer.h"

namespace moe4d {

class ZeroLayerHooks : public LayerHooks {
 public:
  ZeroLayerHooks(ZeroParamGatherer* values, GradSync* grads) : values_(values), grads_(grads) {}

  void before_layer(int layer, int next, bool backward) override {
    if (values_) values_->begin_layer(layer, next, backward);
  }
  void after_layer(int layer, bool backward) override {
    if (backward && grads_) grads_->on_layer_backward(layer);
    if (values_) values_->end_layer(layer, backward);
  }
  void values_needed(int param, size_t begin, size_t end) override {
    if (values_) values_->need(param, begin, end);
  }
  void values_done(int param, size_t begin, size_t end) override {
    if (values_) values_->done(param, begin, end);
  }
  void grad_ready(int param, size_t begin, size_t end) override {
    if (grads_) grads_->on_grad_ready(param, begin, end);
  }
  size_t grad_cut_below(int param, size_t end) const override {
    return grads_ ? grads_->grad_cut_below(param, end) : 0;
  }

 private:
  ZeroParamGatherer* values_;
  GradSync* grads_;
};

}  // namespace moe4d
