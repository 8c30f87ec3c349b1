// train/tensor_gather.h — assembling full (unsharded) tensors from the shards spread over the ranks,
// and cutting a rank's shards back out of full tensors.
//
// Checkpoints store every parameter (and its optimizer state) as the full global tensor under its
// global name, so a checkpoint written by any parallel layout loads into any other (resharding is
// free). Saving gathers the shards on world rank 0 with point-to-point messages from the ranks that
// hold a unique copy (data-parallel rank 0; for dense parameters EP rank 0; for TP-replicated ones
// TP rank 0; pipeline stages each send their own layers).
#pragma once

#include <functional>
#include <map>
#include <string>

#include "core/tensor.h"
#include "model/param_store.h"
#include "parallel/parallel_context.h"

namespace moe4d {

struct FullTensor {
  Shape shape;
  Buffer data;  // fp32, row-major
};

// Whether this rank holds the copy of `info` that is saved / counted once (gradient norms).
bool is_canonical_copy(const ParamInfo& info, const GridCoord& coord);

// Collective over pc.world. `source(id)` gives this rank's local shard data of parameter `id` (e.g. the
// values, or Adam's m). Returns the full tensors by name on world rank 0, an empty map elsewhere.
std::map<std::string, FullTensor> gather_full_tensors(ParallelContext& pc, const ParamStore& params,
                                                      const std::function<const float*(int id)>& source);

// Copies this rank's shard of parameter `id` out of the full tensor `full` into `dst`.
// Throws moe4d::Error if the shape differs from the parameter's global shape.
void copy_shard_from_full(const ParamInfo& info, const Tensor& full, float* dst, const std::string& origin);

}  // namespace moe4d
