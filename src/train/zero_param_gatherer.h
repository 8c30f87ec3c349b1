// train/zero_param_gatherer.h — where ZeRO keeps parameter values, and the all-gathers that bring
// full values back (docs/zero.md).
//
// zero_stage 1 / 2: every rank holds the full values in the ParamStore; the optimizer updates only
//   this rank's slices (train/zero_layout.h) in place, and gather_after_step() all-gathers the
//   other ranks' slices bucket by bucket.
// zero_stage 3: the values live in fp32 shards (P elements per group); the ParamStore's flat value
//   range holds physical memory only for the buckets being used. acquire(layer, next) all-gathers
//   the buckets holding the layer's parameters into the flat range (waiting for a prefetch started
//   earlier, if any) and starts the all-gather of up to `prefetch_buckets` of `next`'s buckets
//   (DeepSpeed's stage3_prefetch_bucket_size, counted in buckets); release(layer) returns the pages
//   of the buckets no layer uses any more (train/zero_memory.h), except one that `next` holds too.
//   A rank therefore holds its shard plus the running layer's buckets plus at most
//   `prefetch_buckets` more. Reference counts let the head and a tied embedding share the table's
//   buckets, and two layers share a bucket that holds the end of one and the start of the other.
//
// The gathers are all_to_all_v calls on the group's data-parallel communicator (dp_ep for dense
// parameters, dp for experts) with this rank's slice as the block for every peer: an all-gather
// whose blocks may differ in length (the last ranks' slices are short), written in place.
// Collective calls happen in the same order on every rank of a group because every rank runs the
// same schedule. Threading: the trainer's thread only.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "comm/communicator.h"
#include "model/layer_hooks.h"
#include "model/param_store.h"
#include "parallel/parallel_context.h"
#include "train/zero_layout.h"

namespace moe4d {

class ZeroParamGatherer {
 public:
  // `head_uses_embedding`: this rank's head multiplies by its own embed.weight (tied, one stage), so
  // the table's bucket is materialised with the head's. `layout` must outlive this object.
  ZeroParamGatherer(ParamStore& params, ParallelContext& pc, const ZeroLayout& layout, int zero_stage,
                    bool head_uses_embedding, int prefetch_buckets = 2);
  ~ZeroParamGatherer();
  ZeroParamGatherer(const ZeroParamGatherer&) = delete;
  ZeroParamGatherer& operator=(const ZeroParamGatherer&) = delete;

  int zero_stage() const { return stage_; }

  // Stage 3: takes this rank's slices of the full flat values (just initialised or loaded) into the
  // shards and releases the flat range. Other stages: nothing.
  void shard_from_flat();
  // Stage 3: the value shard of group g (layout.shard_size(g) floats); null for other stages.
  float* shard_values(ParamGroup g) { return stage_ == 3 ? shards_[int(g)].f32() : nullptr; }

  // Stage 1 / 2, after the optimizer step: every rank's updated slices to every rank (sent from a
  // transient copy of this rank's slices, P floats per group). Collective.
  void gather_after_step();

  // Stage 3, from the layer hooks (no-ops otherwise). Collective over the data-parallel groups.
  void acquire(int layer, int next);
  void release(int layer);
  // Stage 3: all values resident (checkpoints, gathering full tensors) until release_all().
  void materialize_all();
  void release_all();

  // full (flat_size(g) floats) = the shards of every rank of g's group, where `shard` is this rank's
  // (layout.shard_size(g) floats). Collective over the group; any stage.
  void assemble(ParamGroup g, const float* shard, float* full);
  // This rank's slices of `full` into `shard` (padding zeroed). Local.
  void cut(ParamGroup g, const float* full, float* shard) const;

  // Bytes of parameter values held between steps: the flat buffers (stage 1 / 2) or the shards (3).
  size_t held_bytes() const;
  // Stage 3: most bytes held at once since construction — shards plus the flat value range, measured
  // after each acquire and its prefetch as the larger of what is resident (mincore) and the buckets
  // gathered or being gathered; held_bytes() for other stages.
  size_t peak_bytes() const { return stage_ == 3 ? peak_ : held_bytes(); }
  int prefetch_buckets() const { return prefetch_; }
  // Parameter bytes this rank sent to other ranks in gathers since construction.
  int64_t payload_bytes() const { return payload_bytes_; }

 private:
  enum class State { kReleased, kInFlight, kResident };
  struct Unit {
    State state = State::kReleased;
    int users = 0;
    std::unique_ptr<Work> work;
  };
  Communicator* comm_of(ParamGroup g) const;
  // Sends `send` (this rank's slice of bucket b) to every rank and receives every rank's into
  // `bucket_dst` (the bucket's first element). `send` must not lie inside the destination range.
  std::unique_ptr<Work> gather_bucket(const ZeroBucket& b, const float* send, float* bucket_dst);
  const std::vector<int>& units_of(int layer) const;
  void start(int bucket);
  void note_peak();

  ParamStore& params_;
  ParallelContext& pc_;
  const ZeroLayout& layout_;
  int stage_;
  int prefetch_;
  int next_ = LayerHooks::kNoLayer;  // the hint of the last acquire
  Buffer shards_[kNumParamGroups];  // stage 3
  std::vector<Unit> units_;          // per layout bucket (stage 3)
  std::vector<int> head_units_;      // the head's buckets plus the embedding table's, if shared
  size_t peak_ = 0;
  int64_t payload_bytes_ = 0;
};

}  // namespace moe4d
