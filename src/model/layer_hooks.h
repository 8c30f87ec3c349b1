// model/layer_hooks.h — what a Transformer tells the training engine around each layer's use of its
// parameters: the seam through which ZeRO-3 materialises a layer's parameters just before it runs
// (and frees them after), and through which ZeRO-2/3 reduce a layer's gradients after every
// micro-batch's backward (train/zero_layer_hooks.h, docs/zero.md).
//
// Layers are numbered as in ParamInfo::layer: -1 the token embedding, 0 .. num_layers-1 the
// transformer layers, num_layers the final norm + head. Calls come from the thread running the
// Transformer, in the same order on every rank of a data-parallel group (they run the same
// schedule), so an implementation may issue collectives on the data-parallel groups.
#pragma once

#include <climits>

namespace moe4d {

class LayerHooks {
 public:
  static constexpr int kNoLayer = INT_MIN;  // "nothing follows in this pass"

  virtual ~LayerHooks() = default;
  // Before `layer` reads its parameter values in a forward, a recomputation or a backward. `next` is
  // the layer this pass runs right after it (kNoLayer at the end of the chunk): a prefetch hint.
  virtual void before_layer(int layer, int next) = 0;
  // After `layer`'s forward (backward = false), or its backward (true: the layer's gradient
  // contributions of this micro-batch are complete).
  virtual void after_layer(int layer, bool backward) = 0;
};

}  // namespace moe4d
