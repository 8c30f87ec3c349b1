// train/zero_param_gatherer.h — where ZeRO keeps parameter values, and the all-gathers that bring
// full values back (docs/zero.md).
//
// zero_stage 1 / 2: every rank holds the full values in the ParamStore; the optimizer updates only
//   this rank's slices (train/zero_layout.h) in place, and gather_after_step() all-gathers the
//   other ranks' slices bucket by bucket.
// zero_stage 3: the values live in fp32 shards (P elements per group); the ParamStore's flat value
//   range holds physical memory only for the buckets being read. Reads are announced per parameter
//   range (model/layer_hooks.h values_needed / values_done): need() first releases the buckets that
//   no open read holds and the prefetch window does not keep (train/zero_memory.h) — the last read's
//   stay until then, so a bucket shared with the next read is not gathered twice — then all-gathers
//   the buckets holding the range (waiting for a prefetch started earlier, if any). A bucket shared
//   by neighbouring parameters, or by the head and the tied embedding table, is counted once.
//   Prefetch (DeepSpeed's stage3_prefetch_bucket_size, counted in buckets): each layer pass records
//   the buckets of its reads, per group, keyed by (layer, forward or backward); the next time that
//   pass runs, the recorded reads still ahead — the rest of this layer's, then the next layer's —
//   are what the pass will read, and the first `prefetch_buckets` distinct buckets among them form
//   the group's window: gathered ahead and kept (a bucket the next weight needs too survives the
//   read before it). A read that differs from the record ends the window for the rest of the layer;
//   the new record replaces the old. The record is a function of the call sequence alone, which is
//   the same on every rank of a group, so every rank starts the same gathers in the same order.
//   Each group has its own record and window (dense and expert reads follow different groups).
//   Resident at any time: the buckets of the open reads (one weight, or one expert's slice of one,
//   except the expert-replica fetch that reads a layer's three expert weights at once) plus at most
//   `prefetch_buckets` per group: params peak <= P + max read cover + prefetch x sum_g B_g
//   (docs/zero.md §Peak). No layer term: a layer's weights are never all held at once.
//
// The gathers are all_to_all_v calls on the group's data-parallel communicator (dp_ep for dense
// parameters, dp for experts) with this rank's slice as the block for every peer: an all-gather
// whose blocks may differ in length (the last ranks' slices are short), written in place.
// Collective calls happen in the same order on every rank of a group because every rank runs the
// same schedule. Threading: the trainer's thread only.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "comm/communicator.h"
#include "model/layer_hooks.h"
#include "model/param_store.h"
#include "parallel/parallel_context.h"
#include "train/zero_layout.h"

namespace moe4d {

class Backend;

class ZeroParamGatherer {
 public:
  // `layout` must outlive this object; copies run on `backend` (borrowed; null: this thread's CPU backend).
  ZeroParamGatherer(ParamStore& params, ParallelContext& pc, const ZeroLayout& layout, int zero_stage,
                    int prefetch_buckets = 2, Backend* backend = nullptr);
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
  // begin_layer / end_layer bracket one layer pass (forward, or backward with its recomputation);
  // need / done bracket one read of local elements [begin, end) of `param`'s value inside it.
  void begin_layer(int layer, int next, bool backward);
  void end_layer(int layer, bool backward);
  void need(int param, size_t begin, size_t end);
  void done(int param, size_t begin, size_t end);
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
  // after each need and its prefetch as the larger of what is resident (mincore) and the buckets
  // gathered or being gathered; held_bytes() for other stages.
  size_t peak_bytes() const { return stage_ == 3 ? peak_ : held_bytes(); }
  int prefetch_buckets() const { return prefetch_; }
  // Parameter bytes this rank sent to other ranks in gathers since construction.
  int64_t payload_bytes() const { return payload_bytes_; }

 private:
  enum class State { kReleased, kInFlight, kResident };
  struct Unit {
    State state = State::kReleased;
    int users = 0;  // open reads (and materialize_all) holding it
    std::unique_ptr<Work> work;
  };
  // The buckets of each read of one layer pass in one group, in the order of the reads.
  using Trace = std::vector<std::vector<int>>;
  struct GroupReads {
    std::map<std::pair<int, bool>, Trace> traces;  // (layer, backward) -> the last record
    Trace recording;                               // this pass's reads so far
    const Trace* expected = nullptr;               // the record of this pass; null: none or left
    size_t position = 0;                           // reads of `expected` done
  };
  Communicator* comm_of(ParamGroup g) const;
  // Sends `send` (this rank's slice of bucket b) to every rank and receives every rank's into
  // `bucket_dst` (the bucket's first element). `send` must not lie inside the destination range.
  std::unique_ptr<Work> gather_bucket(const ZeroBucket& b, const float* send, float* bucket_dst);
  // The buckets (indices into layout_.buckets()) holding local elements [begin, end) of `param`.
  std::vector<int> cover(int param, size_t begin, size_t end) const;
  const Trace* trace_of(ParamGroup g, int layer, bool backward) const;
  // The first prefetch_ distinct buckets the pass will read next in group g.
  std::vector<int> window(ParamGroup g) const;
  // Releases group g's buckets that no read holds and `keep` does not list.
  void evict(ParamGroup g, const std::vector<int>& keep);
  // evict(g, window(g)), then starts the window's gathers.
  void settle(ParamGroup g);
  void start(int bucket);
  void finish(int bucket);
  void discard(int bucket);
  void note_peak();

  ParamStore& params_;
  Backend& backend_;
  ParallelContext& pc_;
  const ZeroLayout& layout_;
  int stage_;
  int prefetch_;
  int layer_ = LayerHooks::kNoLayer;  // the layer pass running, or kNoLayer between passes
  int next_ = LayerHooks::kNoLayer;   // the pass's prefetch hint
  bool backward_ = false;
  int open_reads_ = 0;
  Buffer shards_[kNumParamGroups];  // stage 3
  std::vector<Unit> units_;          // per layout bucket (stage 3)
  std::vector<int> by_group_[kNumParamGroups];  // bucket indices of each group, in flat order
  GroupReads reads_[kNumParamGroups];
  size_t peak_ = 0;
  int64_t payload_bytes_ = 0;
};

}  // namespace moe4d
