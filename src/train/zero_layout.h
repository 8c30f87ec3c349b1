// train/zero_layout.h — how ZeRO cuts a rank's parameters into buckets and each bucket into equal
// slices over the data-parallel group (docs/zero.md).
//
// Per parameter group (dense, expert) the ParamStore's flat buffer [0, F) is covered by contiguous
// buckets in registration (forward) order. Bucket k of L_k elements is split into `ranks` equal
// slices of S_k = ceil(L_k / ranks) elements; group rank r owns [begin + r S_k, begin + (r+1) S_k)
// clipped to the bucket, so only the last ranks' slices are short (padding, at most ranks - 1
// elements per bucket). A rank's *shard* is its slices of all buckets of the group, back to back:
// P = sum_k S_k elements, the same on every rank of the group. Every collective is then a balanced
// reduce_scatter / all-gather of one bucket, and a bucket can be reduced as soon as its layers'
// gradients are final.
//
// The group's data-parallel communicator is dp_ep for dense parameters (replicated over DP x EP) and
// dp for experts (docs/model.md §2). Bucketing (the same for every ZeRO stage):
//   by size   parallel_config.grad_bucket_size elements per bucket (default max(40M, 1M x group
//             size), Megatron-Core's bucket_size);
//   by count  gradient_aggregation_group buckets of about F / n elements (MindFormers).
// Either way the cut points are the multiples of the bucket size in the flat buffer (rounded up to
// whole pages of floats, so that releasing one bucket's range returns its pages without touching its
// neighbours'), whether or not they fall inside a parameter: a parameter larger than a bucket is
// split over several, and no bucket is larger than the setting. A parameter's slices may then lie in
// several buckets; ShardPiece keeps them apart. Besides, a bucket never spans two model chunks (a
// chunk's backward completes its buckets for one micro-batch), and the token-embedding table (and its
// tied copy on the last pipeline stage) is cut into buckets of its own starting at the table, so that
// both copies have the same buckets and slices and tied gradients can be summed on the shards.
// ZeRO-3 gathers a layer as the buckets holding its parameters; a bucket that holds the end of one
// layer and the start of the next serves both.
//
// Pure arithmetic, no MPI; immutable after construction, so thread-safe.
#pragma once

#include <cstddef>
#include <vector>

#include "config/config.h"
#include "model/param_store.h"
#include "model/transformer.h"

namespace moe4d {

// How each group's flat buffer is cut into buckets.
struct ZeroBucketing {
  int count = 0;                              // > 0: about F / count elements per bucket
  size_t elements[kNumParamGroups] = {0, 0};  // otherwise: elements per bucket of each group
};

// parallel_config.grad_bucket_size's default for a group of `ranks`: max(40M, 1M x ranks) elements
// (Megatron-Core: larger groups need larger buckets for each rank's part to stay bandwidth-bound).
size_t default_bucket_elements(int ranks);

// The bucketing of a parallel_config (gradient_aggregation_group, or grad_bucket_size or its default)
// for groups of `ranks[g]` ranks.
ZeroBucketing zero_bucketing(const ParallelConfig& parallel, const int ranks[kNumParamGroups]);

struct ZeroBucket {
  ParamGroup group = ParamGroup::kDense;
  size_t begin = 0, end = 0;  // element range of the group's flat buffers
  size_t slice = 0;           // S = ceil((end - begin) / ranks)
  size_t shard_offset = 0;    // where every rank's slice of this bucket sits in its shard
  int chunk = 0;              // the model chunk whose backward produces its gradients
  std::vector<int> layers;    // distinct layers with parameters in it (-1 embedding, num_layers head)
  bool embedding_table = false;  // embed.weight alone (or the last stage's tied copy)

  size_t numel() const { return end - begin; }
  // Flat range of group rank r's slice (empty for padding-only ranks).
  size_t slice_begin(int r) const;
  size_t slice_end(int r) const;
};

// A run of one parameter inside this rank's shard.
struct ShardPiece {
  int param = 0;
  ParamGroup group = ParamGroup::kDense;
  size_t flat_begin = 0;    // element index in the group's flat buffers
  size_t count = 0;
  size_t shard_offset = 0;  // element index in the group's shard
};

class ZeroLayout {
 public:
  // `ranks[g]` / `rank[g]`: size of and this rank's index in group g's data-parallel communicator.
  // `chunks`: the model chunks this rank holds (Transformer order); `num_layers` of the whole model.
  ZeroLayout(const ParamStore& params, const std::vector<ChunkSpec>& chunks, int num_layers,
             const ZeroBucketing& bucketing, const int ranks[kNumParamGroups], const int rank[kNumParamGroups]);

  // Flat elements between two cut points of group g (the bucket size, after rounding).
  size_t bucket_elements(ParamGroup g) const { return bucket_elements_[int(g)]; }
  // Elements of the largest bucket of group g (never more than bucket_elements(g)).
  size_t largest_bucket(ParamGroup g) const;

  const std::vector<ZeroBucket>& buckets() const { return buckets_; }
  // Buckets holding parameters of `layer` (-1 .. num_layers).
  const std::vector<int>& buckets_of_layer(int layer) const { return buckets_of_layer_[layer + 1]; }
  int num_layers() const { return num_layers_; }

  int ranks(ParamGroup g) const { return ranks_[int(g)]; }
  int rank(ParamGroup g) const { return rank_[int(g)]; }
  size_t flat_size(ParamGroup g) const { return flat_size_[int(g)]; }
  // P: elements of this rank's shard of group g (equal on every rank of the group).
  size_t shard_size(ParamGroup g) const { return shard_size_[int(g)]; }
  // Padding elements in group g's shards over the whole group: ranks x P - F.
  size_t padding(ParamGroup g) const { return size_t(ranks(g)) * shard_size(g) - flat_size(g); }

  // Every parameter run inside this rank's slices, bucket by bucket (alignment gaps left out).
  const std::vector<ShardPiece>& pieces() const { return pieces_; }

 private:
  int num_layers_;
  int ranks_[kNumParamGroups] = {1, 1};
  int rank_[kNumParamGroups] = {0, 0};
  size_t flat_size_[kNumParamGroups] = {0, 0};
  size_t shard_size_[kNumParamGroups] = {0, 0};
  size_t bucket_elements_[kNumParamGroups] = {0, 0};
  std::vector<ZeroBucket> buckets_;
  std::vector<std::vector<int>> buckets_of_layer_;  // index layer + 1
  std::vector<ShardPiece> pieces_;
};

// Bytes per rank of fp32 parameters, gradients and AdamW state (m, v) held between steps under
// `zero_stage`, with F = sum of the groups' flat sizes and P = sum of their shard sizes:
//   stage 0: 4F + 4F + 8F   1: 4F + 4F + 8P   2: 4F + 4P + 8P   3: 4P + 4P + 8P
// (P = F / ranks up to the padding, at most ranks - 1 elements per bucket; docs/zero.md).
struct ZeroStateBytes {
  size_t params = 0, grads = 0, optimizer = 0;
  size_t total() const { return params + grads + optimizer; }
};
ZeroStateBytes zero_state_bytes(int zero_stage, const ZeroLayout& layout);

}  // namespace moe4d
