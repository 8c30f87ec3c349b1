// train/stage_partition.h — which layers each pipeline stage (and each model chunk of a stage) holds.
//
// The model's layers are cut into contiguous blocks, one per *virtual stage*. Without the
// interleaved schedule there is one virtual stage per pipeline stage (rank s holds block s); with it
// every rank holds `virtual_pipeline` chunks and chunk c of rank s is virtual stage c * stages + s
// (Megatron's assignment, so a micro-batch visits rank 0, 1, ..., p-1, 0, 1, ... in turn). The first
// virtual stage also holds the token embedding, the last one final norm + head + loss.
//
// Default: every virtual stage gets the same number of layers. `stage_layers` lists the layers of each
// stage explicitly (uneven models; not with interleaving, whose chunks are equal). The rules are the
// ones parallel/layout_check.cc states up front; partition_stages repeats them so that it is safe to
// call on any config. Pure arithmetic, no MPI; thread-safe.
#pragma once

#include <vector>

#include "config/config.h"
#include "model/transformer.h"

namespace moe4d {

struct StagePartition {
  int stages = 1;            // pipeline_parallel
  int chunks_per_stage = 1;  // virtual_pipeline (1 unless interleaved)
  std::vector<ChunkSpec> virtual_stages;  // [stages * chunks_per_stage], layers ascending

  int num_virtual_stages() const { return static_cast<int>(virtual_stages.size()); }
  // Virtual stage of chunk `chunk` of pipeline stage `stage`.
  int virtual_stage(int stage, int chunk) const { return chunk * stages + stage; }
  // The chunks pipeline stage `stage` holds, in chunk order (what Transformer is built from).
  std::vector<ChunkSpec> chunks_of(int stage) const;
};

// Throws moe4d::Error (naming the keys and numbers) when the layers cannot be split as configured.
StagePartition partition_stages(const ModelConfig& model, const ParallelConfig& parallel);

}  // namespace moe4d
