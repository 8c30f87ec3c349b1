// train/grad_sync.h — data-parallel gradient synchronisation in fused buckets, overlapped with backward.
//
// Gradients of dense parameters are summed over the DP x EP group, those of expert parameters over
// the DP group (design.md §3); each micro-batch loss is already scaled by 1 / (replicas x micro-batches)
// so the sum is the mean gradient. `gradient_aggregation_group` is the NUMBER of buckets per parameter
// group (not a size): each group's flat gradient buffer is cut at parameter boundaries into that many
// contiguous buckets of roughly equal bytes. During the last micro-batch's backward the model reports
// each layer whose gradients are final; a bucket is all-reduced asynchronously as soon as all its
// layers are final, so its communication overlaps the backward of earlier layers. With overlap off,
// all buckets are launched after backward. Launch order is the same on every rank (it follows the
// layer order), as MPI requires.
//
// With tied embeddings split over pipeline stages, the two copies' gradients are also summed over the
// `embed` group (first and last stage). The constructor is collective over `embed` (the last stage
// tells the first whether the table is tied).
#pragma once

#include <memory>
#include <vector>

#include "comm/communicator.h"
#include "model/param_store.h"
#include "parallel/parallel_context.h"

namespace moe4d {

class GradSync {
 public:
  GradSync(ParamStore& params, ParallelContext& pc, int num_buckets, bool overlap, int num_layers);

  // Before the last micro-batch's backward.
  void begin();
  // From Transformer::backward: all gradients of `layer` (-1 embedding, num_layers head) are final.
  void on_layer_ready(int layer);
  // After backward: launches what is left and waits for everything.
  void finish();

  int num_buckets() const { return static_cast<int>(buckets_.size()); }

 private:
  struct Bucket {
    Communicator* comm;
    float* data;
    size_t count;
    std::vector<int> layers;  // distinct layers with parameters in this bucket
    int pending = 0;
    std::unique_ptr<Work> work;
  };
  void launch(Bucket& bucket);

  ParamStore& params_;
  ParallelContext& pc_;
  bool overlap_;
  bool tied_embedding_ = false;  // this rank is on `embed` and the embedding is tied (copies on both ends)
  int num_layers_;
  std::vector<Bucket> buckets_;
  std::vector<std::vector<int>> buckets_of_layer_;  // index layer + 1
};

}  // namespace moe4d
