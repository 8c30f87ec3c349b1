#include "train/grad_sync.h"

#include <algorithm>

namespace moe4d {

GradSync::GradSync(ParamStore& params, ParallelContext& pc, int num_buckets, bool overlap, int num_layers)
    : params_(params), pc_(pc), overlap_(overlap), num_layers_(num_layers), buckets_of_layer_(num_layers + 2) {
  // The first stage always holds embed.weight, the last one only when the embedding is tied (its
  // copy): only then are there two gradients to sum. Only the last stage can tell, so it says.
  if (pc.embed) {
    int tied = 0;
    for (int id = 0; id < params.size(); ++id) tied |= params.info(id).is_tied_copy ? 1 : 0;
    pc.embed->all_reduce(&tied, 1, DType::kI32, ReduceOp::kMax);
    tied_embedding_ = tied != 0;
  }
  for (ParamGroup group : {ParamGroup::kDense, ParamGroup::kExpert}) {
    Communicator* comm = group == ParamGroup::kDense ? pc.dp_ep.get() : pc.dp.get();
    const size_t total = params.flat_size(group);
    if (comm->size() == 1 || total == 0) continue;
    std::vector<int> ids;
    for (int id = 0; id < params.size(); ++id)
      if (params.info(id).group == group) ids.push_back(id);
    // Cut at parameter boundaries into `num_buckets` runs of roughly total / num_buckets elements.
    const size_t target = (total + num_buckets - 1) / num_buckets;
    size_t begin = 0;
    std::vector<int> layers;
    for (size_t i = 0; i < ids.size(); ++i) {
      const ParamInfo& info = params.info(ids[i]);
      if (std::find(layers.begin(), layers.end(), info.layer) == layers.end()) layers.push_back(info.layer);
      const bool last = i + 1 == ids.size();
      const size_t end = last ? total : params.info(ids[i + 1]).offset;
      if (end - begin >= target || last) {
        Bucket b{comm, params.flat_grads(group) + begin, end - begin, layers};
        for (int layer : layers) buckets_of_layer_[layer + 1].push_back(static_cast<int>(buckets_.size()));
        buckets_.push_back(std::move(b));
        begin = end;
        layers.clear();
      }
    }
  }
}

void GradSync::begin() {
  for (Bucket& b : buckets_) {
    b.pending = static_cast<int>(b.layers.size());
    b.work.reset();
  }
}

void GradSync::launch(Bucket& bucket) {
  bucket.work = bucket.comm->all_reduce_async(bucket.data, bucket.count, DType::kF32, ReduceOp::kSum);
}

void GradSync::on_layer_ready(int layer) {
  for (int index : buckets_of_layer_[layer + 1]) {
    Bucket& b = buckets_[index];
    if (--b.pending == 0 && overlap_) launch(b);
  }
}

void GradSync::finish() {
  for (Bucket& b : buckets_) {
    if (!b.work) launch(b);
  }
  for (Bucket& b : buckets_) b.work->wait();
  if (tied_embedding_) {  // tied embedding split over the first and last pipeline stage
    for (int id = 0; id < params_.size(); ++id)
      if (params_.info(id).name == "embed.weight") pc_.embed->all_reduce(params_.grad(id), params_.info(id).numel());
  }
}

}  // namespace moe4d
