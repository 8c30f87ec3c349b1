// model/layer_hooks.h — what a Transformer tells the training engine around each layer's use of its
// parameters: the seam through which ZeRO-3 materialises the weights a block is about to read (and
// frees them after), and through which ZeRO-2/3 reduce gradients as the backward writes them
// (train/zero_layer_hooks.h, docs/zero.md).
//
// Layers are numbered as in ParamInfo::layer: -1 the token embedding, 0 .. num_layers-1 the
// transformer layers, num_layers the final norm + head. Calls come from the thread running the
// Transformer, in the same order on every rank of a data-parallel group (they run the same
// schedule), so an implementation may issue collectives on the data-parallel groups.
#pragma once

#include <climits>
#include <cstddef>

namespace moe4d {

class LayerHooks {
 public:
  static constexpr int kNoLayer = INT_MIN;  // "nothing follows in this pass"

  virtual ~LayerHooks() = default;
  // Before `layer` runs its forward (backward = false) or its backward (true, including a
  // recomputation of its forward). `next` is the layer this pass runs right after it (kNoLayer at the
  // end of the chunk), in the same direction: a prefetch hint.
  virtual void before_layer(int layer, int next, bool backward) = 0;
  // After `layer`'s forward (backward = false), or its backward (true: the layer's gradient
  // contributions of this micro-batch are complete).
  virtual void after_layer(int layer, bool backward) = 0;

  // Parameter-granular gradient readiness, from inside a layer's backward (ZeRO-2/3 reduce a bucket as
  // soon as all its elements are ready, not when the whole layer is done: docs/zero.md §Peak).
  // grad_ready: elements [begin, end) of `param`'s gradient (local element offsets) hold this
  // micro-batch's contribution of the block that just wrote them. Every element of every parameter
  // of a layer is reported once per micro-batch before after_layer(layer, true); the tied embedding
  // table used as the head on the same rank is reported twice (by the head, then by the embedding).
  virtual void grad_ready(int /*param*/, size_t /*begin*/, size_t /*end*/) {}
  // Where a block should cut the weight-gradient computation of `param` that ends at local element
  // `end`: the largest offset in (0, end) at which a reduction unit (a ZeRO bucket) begins, or 0 to
  // write [0, end) at once.
  virtual size_t grad_cut_below(int /*param*/, size_t /*end*/) const { return 0; }

  // Parameter-granular value use, between before_layer and after_layer of the layer running (ZeRO-3
  // gathers only the buckets of the weights being read, plus a bounded prefetch: docs/zero.md §Peak).
  // values_needed: a block is about to read elements [begin, end) of `param`'s value (local element
  // offsets); they must hold the full values when it returns. values_done: that read is over (every
  // values_needed has one values_done with the same arguments; reads may nest). The blocks make the
  // same calls in the same order on every rank of a data-parallel group whatever the data (an expert
  // with no rows still takes part), so an implementation may gather collectively inside them.
  virtual void values_needed(int /*param*/, size_t /*begin*/, size_t /*end*/) {}
  virtual void values_done(int /*param*/, size_t /*begin*/, size_t /*end*/) {}
};

}  // namespace moe4d
