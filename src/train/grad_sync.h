// train/grad_sync.h — data-parallel gradient synchronisation in fused buckets, overlapped with
// backward, for every ZeRO stage (docs/zero.md).
//
// Gradients of dense parameters are summed over the DP x EP group, those of expert parameters over
// the DP group (docs/model.md §2); each micro-batch loss is already scaled by 1 / (replicas x micro-batches)
// so the sum is the mean gradient. The buckets are the ZeroLayout's (train/zero_layout.h).
//
// zero_stage 0 / 1: the full gradients accumulate over the micro-batches in the ParamStore; during
// the last micro-batch's backward the executor reports each layer whose gradients are final, and a
// bucket is all-reduced asynchronously as soon as all its layers are (overlap), or after backward.
// The all-reduces go through ParallelContext::dp_ep_sync / dp_sync: hierarchical (intra-node
// reduce-scatter, inter-node all-reduce, intra-node all-gather) when the group spans nodes with the
// same number of ranks on each; its stages advance when the executor reports a layer (poll()).
// ZeRO-2/3's reduce-scatters stay flat over the group (each rank's slice must be the one its
// optimizer shard owns, which a node-aware reduce-scatter would permute).
// zero_stage 2 / 3: every micro-batch's backward reports, from inside the blocks, each range of a
// parameter's gradient as soon as it is written (on_grad_ready, through the Transformer's layer
// hooks; model/layer_hooks.h). A bucket whose elements have all been reported is copied to a staging
// buffer at once, its range of the flat gradient buffer is released (zeroed, pages returned:
// train/zero_memory.h) and the staging buffer is reduce-scattered; this rank's slice is added to its
// fp32 gradient shard. The blocks write weight gradients in reverse flat order, cut at the buckets'
// starts (grad_cut_below), so the unreleased part of each flat buffer is one bucket being filled plus
// fewer than kGradRowAlign (16) gradient rows of the bucket below it (model/block_matmul.h). A rank then holds the shard (P elements), that,
// and at most kMaxInFlight staging buffers (docs/zero.md §Peak). Reductions are per micro-batch:
// the full gradient never accumulates over micro-batches (the shard does), so the bound holds for
// any micro_batch_num, at the price of moving micro_batch_num x (ranks-1)/ranks x F elements per
// step instead of one all-reduce's 2 (ranks-1)/ranks x F. At most kMaxInFlight staged reductions are
// outstanding (the oldest is completed first, in launch order, so the shard sums in the same order
// on every run). At the end of each layer's backward (on_layer_backward) every parameter of the layer
// must have been reported in full.
//
// grad_compression bf16 / fp16: the reduction moves 16-bit values (each pairwise combine of the MPI
// operator widens to fp32 and rounds back: comm/mpi/mpi_reduce_ops.h) and the result lands in fp32.
// 1-bit Adam's compression stage (set_data_parallel(false)): gradients stay local; the optimizer
// reduces its momentum instead.
//
// With tied embeddings split over pipeline stages, the two copies' gradients are also summed over
// the `embed` group (first and last stage) — on the full gradients (0 / 1) or on the shards (2 / 3,
// where both copies are a bucket of their own with identical slices). The constructor is collective
// over `embed` (the last stage tells the first whether the table is tied).
//
// Launch order is the same on every rank of a group (it follows the layer order), as MPI requires.
// Threading: the trainer's thread only.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

#include "comm/communicator.h"
#include "config/config.h"
#include "model/param_store.h"
#include "parallel/parallel_context.h"
#include "train/zero_layout.h"

namespace moe4d {

class Backend;

struct GradSyncOptions {
  Backend* backend = nullptr;  // the kernels' backend (borrowed); null: this thread's CPU backend
  int zero_stage = 0;
  GradCompression compression = GradCompression::kNone;
  bool overlap = true;  // launch bucket reductions during backward
};

class GradSync {
 public:
  static constexpr int kMaxInFlight = 2;  // staged reductions outstanding at once

  // `layout` must outlive this object.
  GradSync(ParamStore& params, ParallelContext& pc, const ZeroLayout& layout, GradSyncOptions options);
  ~GradSync();
  GradSync(const GradSync&) = delete;
  GradSync& operator=(const GradSync&) = delete;

  // Start of a step: every gradient reads zero (ZeRO-2/3 also returns the flat buffers' pages).
  void zero_grads();
  // false: 1-bit Adam's compression stage — no data-parallel reduction this step (tied sum still).
  void set_data_parallel(bool reduce) { reduce_ = reduce; }

  // From the step executor: before the first micro-batch; during the last backward of each chunk
  // (`layer` final: -1 embedding, num_layers head; used by ZeRO 0/1); after backward (waits for all).
  void begin();
  void on_layer_ready(int layer);
  void finish();
  // From the Transformer's layer hooks after every micro-batch's backward of `layer` (ZeRO-2/3):
  // checks that each of its parameters was reported in full.
  void on_layer_backward(int layer);
  // From the blocks through the layer hooks (ZeRO-2/3): local elements [begin, end) of parameter
  // `param`'s gradient hold this micro-batch's contribution; buckets completed by it are launched.
  void on_grad_ready(int param, size_t begin, size_t end);
  // The largest local offset in (0, end) of `param` at which a bucket begins, 0 if none (where a
  // block should cut a weight-gradient GEMM so the bucket above completes). Every stage answers, so
  // that stages 0/1 compute the same row blocks (the same GEMMs, bit for bit) as stages 2/3.
  size_t grad_cut_below(int param, size_t end) const;

  // ZeRO-2/3: the reduced gradient shard of group g (layout.shard_size(g) floats); null otherwise.
  float* shard_grads(ParamGroup g) { return sharded() ? shards_[int(g)].f32() : nullptr; }
  bool sharded() const { return options_.zero_stage >= 2; }

  // Sum of squares of the gradient elements this rank contributes to the global norm (the caller
  // sums over the world): every element once across data-parallel replicas (ZeRO 0: the canonical
  // copy; >= 1: this rank's slices), TP-replicated parameters on TP rank 0 only, tied copies never.
  // local_estimates (1-bit Adam's compression stage, unreduced gradients): every replica contributes
  // ranks x |g|^2, so the world sum is the mean over replicas of |ranks x g|^2.
  double grad_sum_squares(bool local_estimates);

  // Bytes of gradients held between steps: the full flat buffers (ZeRO 0/1) or the shards (2/3).
  size_t held_bytes() const;
  // Since construction, beyond held_bytes(): ZeRO-2/3 the most bytes of the flat gradient buffers
  // resident at once (mincore, measured when a bucket is released) plus the staging buffers (at most
  // kMaxInFlight, each of the largest bucket); ZeRO 0/1 the 16-bit staging buffers (compression).
  size_t peak_transient_bytes() const { return peak_transient_; }
  // Gradient bytes handed to data-parallel collectives since construction (send buffers: an
  // all-reduce of n fp32 values counts 4n, a reduce-scatter its whole input).
  int64_t payload_bytes() const { return payload_bytes_; }

 private:
  struct Bucket {
    const ZeroBucket* layout;
    Communicator* comm;
    int pending = 0;  // ZeRO 0/1: layers of the bucket not yet reported this step
    bool launched = false;
    size_t param_elements = 0;  // ZeRO 2/3: elements of parameters in it (alignment gaps left out)
    size_t pending_elements = 0;  // of those, not yet reported this micro-batch (this round)
  };
  struct InFlight {
    int bucket;
    int staging;  // index in staging_, -1: in place on the flat gradients
    std::unique_ptr<Work> work;
  };
  Communicator* comm_of(ParamGroup g) const;
  HierarchicalAllReduce& all_reduce_of(ParamGroup g) const;
  void poll();  // drive the in-flight reductions (a hierarchical one starts its next stage)
  DType wire_type() const;
  void launch(int index);
  void complete_oldest();
  int acquire_staging(size_t bytes);
  void note_transient();
  int bucket_at(ParamGroup g, size_t flat) const;  // the bucket of group g holding flat element `flat`

  ParamStore& params_;
  ParallelContext& pc_;
  const ZeroLayout& layout_;
  GradSyncOptions options_;
  Backend& backend_;
  bool reduce_ = true;
  bool tied_embedding_ = false;  // this rank is on `embed` and the embedding is tied (copies on both ends)
  std::vector<Bucket> buckets_;
  int group_first_[kNumParamGroups + 1] = {0, 0, 0};  // buckets_ of group g: [first[g], first[g+1])
  std::vector<size_t> reported_;                     // per parameter: elements reported this round
  std::vector<int> rounds_;                          // per parameter: full reports since its layer's end
  std::vector<std::vector<int>> params_of_layer_;    // index layer + 1
  Buffer shards_[kNumParamGroups];  // ZeRO-2/3
  std::vector<Buffer> staging_;
  std::vector<int> free_staging_;
  std::deque<InFlight> in_flight_;
  size_t peak_transient_ = 0;
  int64_t payload_bytes_ = 0;
};

}  // namespace moe4d
