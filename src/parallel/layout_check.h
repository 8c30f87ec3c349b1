// parallel/layout_check.h — up-front validation of a parallel layout against the model and batch.
//
// Called once at start-up (train, plan, ckpt convert) before anything is allocated, so that a bad
// layout fails with one line that names the numbers involved and what to change, instead of a
// shape CHECK deep inside a kernel. Pure arithmetic, no MPI; thread-safe.
#pragma once

#include <cstdint>

namespace moe4d {

struct ModelConfig;
struct ParallelConfig;

// Throws moe4d::Error for the first problem, checked in this order:
//   sizes >= 1; dp x ep x tp x pp == world_size ("parallel size mismatch: dp 4 x ep 1 x tp 4 x pp 3 = 48,
//   but 64 ranks were started"); device_list is a permutation of the world; num_heads, ffn_hidden_size
//   and vocab_size divisible by tensor_parallel; expert_parallel > 1 only for MoE models and dividing
//   num_experts; num_layers split over pipeline_parallel (evenly, or by stage_layers); the interleaved
//   schedule's virtual_pipeline rules; global_batch_size divisible by dp x ep x micro_batch_num.
void validate_layout(const ModelConfig& model, const ParallelConfig& parallel, int64_t global_batch_size,
                     int world_size);

// The subset that needs no model: sizes >= 1, the world-size product and the device list.
void validate_parallel_size(const ParallelConfig& parallel, int world_size);

}  // namespace moe4d
