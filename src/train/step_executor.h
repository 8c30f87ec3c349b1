// train/step_executor.h — runs the micro-batches of one step through this rank's model chunks.
//
// Training: every micro-batch of this data replica goes forward and backward (gradients accumulate
// in the ParamStore); during the last micro-batch's backward the layers whose gradients are final
// are reported to the GradSync so their buckets start reducing while backward continues. Without
// pipeline parallelism this is the plain loop F0 B0 F1 B1 ...; pipeline schedules belong here too.
// Owns the activation memory (one MicroBatchState per in-flight micro-batch) and the scratch arena.
#pragma once

#include <functional>
#include <vector>

#include "config/config.h"
#include "model/transformer.h"
#include "train/grad_sync.h"

namespace moe4d {

// Fills tokens and targets [micro_batch_size, seq] of global micro-batch `index`.
using MicroBatchFill = std::function<void(int index, int* tokens, int* targets)>;

class StepExecutor {
 public:
  StepExecutor(const Config& config, ParallelContext& pc, Transformer& model, ParamStore& params,
               int micro_batch_size);

  // Forward and backward of this replica's micro_batch_num micro-batches (global indices
  // data_replica * micro_batch_num + j). Each micro-batch's loss is weighted by grad_scale.
  // Returns the sum over micro-batches of their mean cross-entropy (0 on ranks without the head).
  double train(const MicroBatchFill& fill, float grad_scale, std::vector<MoeLayerStats>* stats, GradSync& sync);

  // Forward only of `count` micro-batches with global indices first, first + 1, ...; returns the sum
  // of their mean cross-entropy (0 on ranks without the head).
  double evaluate(const MicroBatchFill& fill, int first, int count);

  // Largest activation memory held at once by this rank (bytes), since construction.
  size_t peak_activation_bytes() const;

 private:
  const Config& config_;
  ParallelContext& pc_;
  Transformer& model_;
  ParamStore& params_;
  int micro_batch_size_;
  MicroBatchState state_;
  Arena scratch_;
  std::vector<int> tokens_, targets_;
};

}  // namespace moe4d
