// train/tensor_gather.h — assembling full (unsharded) tensors from the shards spread over the ranks.
//
// Full-tensor checkpoints (checkpoint.format: full) store every parameter (and its optimizer state)
// as the full global tensor under its global name. Saving gathers the shards on world rank 0 with
// point-to-point messages from the ranks that hold a unique copy (data-parallel rank 0; for dense
// parameters EP rank 0; for TP-replicated ones TP rank 0; pipeline stages each send their own
// layers). Loading either format reads each rank's block directly (checkpoint/sharded_index.h).
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

}  // namespace moe4d
