// train/stage_partition.cc — contiguous layer blocks per (virtual) pipeline stage.
#include "train/stage_partition.h"

#include <numeric>

#include "core/error.h"

namespace moe4d {

std::vector<ChunkSpec> StagePartition::chunks_of(int stage) const {
  std::vector<ChunkSpec> out;
  for (int c = 0; c < chunks_per_stage; ++c) out.push_back(virtual_stages[virtual_stage(stage, c)]);
  return out;
}

StagePartition partition_stages(const ModelConfig& model, const ParallelConfig& parallel) {
  StagePartition out;
  out.stages = parallel.pipeline_parallel;
  const bool interleaved = parallel.pipeline_schedule == PipelineSchedule::kInterleaved;
  out.chunks_per_stage = interleaved ? parallel.virtual_pipeline : 1;
  if (out.stages < 1) fail("parallel_config.pipeline_parallel is {}; it must be >= 1", out.stages);
  if (out.chunks_per_stage < 1)
    fail("parallel_config.virtual_pipeline is {}; it must be >= 1", out.chunks_per_stage);
  if (!interleaved && parallel.virtual_pipeline > 1)
    fail("parallel_config.virtual_pipeline {} is only used by pipeline_schedule interleaved; set "
         "pipeline_schedule: interleaved or virtual_pipeline: 1",
         parallel.virtual_pipeline);
  const int virtual_count = out.stages * out.chunks_per_stage;

  std::vector<int> layers;
  if (!parallel.stage_layers.empty()) {
    if (interleaved)
      fail("parallel_config.stage_layers cannot be combined with pipeline_schedule interleaved (its chunks are "
           "equal); drop stage_layers or use 1f1b");
    if (static_cast<int>(parallel.stage_layers.size()) != out.stages)
      fail("parallel_config.stage_layers has {} entries, but pipeline_parallel is {}; give one layer count per stage",
           parallel.stage_layers.size(), out.stages);
    for (size_t s = 0; s < parallel.stage_layers.size(); ++s)
      if (parallel.stage_layers[s] < 1)
        fail("parallel_config.stage_layers[{}] is {}; every pipeline stage needs at least 1 layer", s,
             parallel.stage_layers[s]);
    const int total = std::accumulate(parallel.stage_layers.begin(), parallel.stage_layers.end(), 0);
    if (total != model.num_layers)
      fail("parallel_config.stage_layers sum to {}, but model.num_layers is {}; the stages must hold every layer "
           "exactly once",
           total, model.num_layers);
    layers = parallel.stage_layers;
  } else {
    if (model.num_layers % virtual_count != 0)
      fail("model.num_layers {} cannot be split evenly over {} pipeline stage(s) x {} chunk(s) = {}; change "
           "pipeline_parallel / virtual_pipeline or list the layers of each stage with stage_layers",
           model.num_layers, out.stages, out.chunks_per_stage, virtual_count);
    layers.assign(virtual_count, model.num_layers / virtual_count);
  }

  int first = 0;
  for (int vs = 0; vs < virtual_count; ++vs) {
    out.virtual_stages.push_back(ChunkSpec{.first_layer = first,
                                           .num_layers = layers[vs],
                                           .has_embedding = vs == 0,
                                           .has_head = vs == virtual_count - 1});
    first += layers[vs];
  }
  return out;
}

}  // namespace moe4d
