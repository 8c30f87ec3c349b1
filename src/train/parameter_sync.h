// train/parameter_sync.h — one job: keeping the data-parallel copies of the training state in step.
// It owns the ZeRO layout (buckets and slices), the bucketed gradient reduction (train/grad_sync.h),
// the value shards and their all-gathers (zero_stage >= 1, train/zero_param_gatherer.h), the
// optimizer on this rank's slices (train/optimizer.h) and the model's layer hooks through which
// stages 2/3 reduce and gather during backward and forward (docs/zero.md).
//
// The Trainer owns one and drives it once per step: begin_step, the micro-batches through
// grad_sync(), grad_sync().finish(), reduce_grad_norm, optimizer_step. Checkpoints read and write
// the state through the narrow accessors at the end (trainer_checkpoint.cc).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "backend/backend.h"
#include "config/config.h"
#include "model/param_store.h"
#include "model/transformer.h"
#include "train/checkpoint_shards.h"
#include "train/grad_sync.h"
#include "train/memory_report.h"
#include "train/optimizer.h"
#include "train/tensor_gather.h"
#include "train/zero_layer_hooks.h"
#include "train/zero_layout.h"
#include "train/zero_param_gatherer.h"

namespace moe4d {

class ParameterSync {
 public:
  // Builds the layout of this rank's `chunks`, the gradient sync, the value shards (taken from the
  // flat values: call after params.init_values) and the optimizer, and sets `model`'s layer hooks.
  ParameterSync(const Config& config, ParallelContext& pc, ParamStore& params, Backend& backend,
                const std::vector<ChunkSpec>& chunks, Transformer& model);
  ~ParameterSync();

  // Before a step's first micro-batch: zeroes the gradients and decides whether this step reduces
  // them (1-bit Adam after its warm-up keeps them local). `updates`: the optimizer updates made so
  // far (skipped steps do not count).
  void begin_step(int64_t updates);
  GradSync& grad_sync() { return *grad_sync_; }
  ZeroLayerHooks* hooks() { return hooks_.get(); }
  const ZeroLayout& layout() const { return *layout_; }
  // The global norm of the (scaled) gradients; collective over the world.
  double reduce_grad_norm();
  // The optimizer update, then (ZeRO 1/2) the all-gather of the updated slices.
  void optimizer_step(int64_t step, double lr, float grad_scale);
  // Full parameter tensors gathered on rank 0 (empty elsewhere). Collective.
  std::map<std::string, FullTensor> gather_parameters();
  // This rank's parameter, gradient and optimizer bytes, held and peak, their formula, and its
  // parameter count (local).
  void add_memory(RankMemoryUse& m) const;
  // The step's ZeRO record ("zero", docs/metrics.md): the payload since the previous call (local;
  // advances the counters).
  nlohmann::json take_record();

  // Checkpoints.
  const char* optimizer_name() const { return optimizer_->name(); }
  // Whether the optimizer state is this rank's ZeRO slices (zero_stage >= 1) rather than flat buffers.
  bool state_sharded() const { return values_ != nullptr; }
  // AdamW's first (`second` false) or second moments of group g: the flat buffer, or the shard.
  float* moment(ParamGroup g, bool second);
  size_t moment_size(ParamGroup g) const { return optimizer_->state_size(g); }
  // Every moment of both groups set to zero (before a sharded load fills this rank's pieces of them).
  void zero_moments();
  // The moments of group g in this rank's flat layout: the flat buffer itself, or the shard
  // assembled into `scratch` (allocated here).
  const float* flat_moment(ParamGroup g, bool second, Buffer& scratch);
  // After new values were written into the flat buffers: zero_stage >= 1 takes its shards of them.
  void reshard_values();
  // Where this rank's checkpoint pieces are read from (train/checkpoint_shards.h).
  PieceSources piece_sources();

 private:
  const Config& config_;
  ParallelContext& pc_;
  ParamStore& params_;
  Backend& backend_;
  std::unique_ptr<ZeroLayout> layout_;          // buckets and slices of every ZeRO stage
  std::unique_ptr<ZeroParamGatherer> values_;   // zero_stage >= 1
  std::unique_ptr<AdamW> optimizer_;
  std::unique_ptr<GradSync> grad_sync_;
  std::unique_ptr<ZeroLayerHooks> hooks_;       // the model's layer hooks (every stage)
  bool gradients_local_ = false;                // this step's gradients are not reduced (1-bit Adam)
  int64_t payload_seen_[3] = {0, 0, 0};         // take_record(): counters at the previous step
};

}  // namespace moe4d
