// train/onebit_adam.h — 1-bit Adam (Tang et al. 2021, "1-bit Adam: Communication Efficient
// Large-Scale Training with Adam's Convergence Speed"; DeepSpeed's OnebitAdam), and its
// error-compensated 1-bit all-reduce.
//
// Warm-up (steps 1 .. train.freeze_steps): plain AdamW on gradients all-reduced in full precision
// (or in 16 bit with grad_compression). After the warm-up the variance v is frozen, gradients are
// no longer reduced (GradSync::set_data_parallel(false)); each replica updates its momentum with
// its local gradient, m = b1 m + (1 - b1) ranks x g_local (ranks x g_local: the replica's estimate
// of the mean gradient, since losses are pre-divided by the number of replicas), and the momenta
// are averaged over the data-parallel group by OneBitAllReduce, bucket by bucket (the ZeroLayout's
// buckets, train/zero_layout.h): each element travels as one sign bit plus one fp32 scale per
// chunk. Compressing per bucket keeps a tied embedding's two copies (on the first and last pipeline
// stage, each a bucket of its own) bit-identical: same inputs, same chunks, same scales. The update is then p -= lr (m_hat / (sqrt(v_hat) + eps) + wd p)
// with v_hat = v / (1 - b2^freeze_steps) frozen. Unlike DeepSpeed, the bias corrections are kept,
// so that the warm-up is exactly this project's AdamW (a run with freeze_steps >= steps is AdamW).
//
// OneBitAllReduce (DeepSpeed's compressed_allreduce): the buffer is cut into `ranks` chunks, chunk r
// "served" by rank r. Worker side: x = data + worker_error; each chunk becomes sign(x) and
// scale = |x|_2 / sqrt(n) (sign(0) = +1); worker_error = x - scale sign(x); chunk r is sent to rank
// r (all_to_all_v of packed bits). Server side: y = mean of the ranks' decompressed chunks +
// server_error, compressed the same way with server_error = y - scale sign(y); the compressed
// chunks are all-gathered and decompressed, so every rank ends with the same averaged momentum.
// Bytes handed to collectives per call: (ranks - 1) blocks to the all_to_all_v plus one block to the
// all-gather, a block being n / (8 ranks) bytes of bits plus a 4-byte scale — about 32x fewer than
// an fp32 all-reduce's 4n.
//
// Error-feedback state is per rank (not a global tensor), so checkpoints do not store it: a run
// resumed after the warm-up restarts the feedback from zero (and is not bit-exact).
//
// Threading: the trainer's thread only. Collective over each group's data-parallel communicator.
#pragma once

#include <memory>

#include <vector>

#include "comm/communicator.h"
#include "train/optimizer.h"
#include "train/zero_layout.h"

namespace moe4d {

class OneBitAllReduce {
 public:
  // Averages buffers of `count` floats over `comm` (borrowed); the compression runs on `backend`
  // (borrowed; null: this thread's CPU backend).
  OneBitAllReduce(Communicator& comm, size_t count, Backend* backend = nullptr);

  // data[count] = the compressed average of every rank's data[count]. Collective.
  void average(float* data);

  size_t state_bytes() const { return worker_error_.bytes() + server_error_.bytes(); }
  size_t block_bytes() const { return sizeof(float) + chunk_ / 8; }
  int64_t payload_bytes() const { return payload_bytes_; }

 private:
  Communicator& comm_;
  Backend& backend_;
  size_t count_;
  size_t chunk_;          // elements per chunk, a multiple of 8
  Buffer worker_error_;   // ranks x chunk floats
  Buffer server_error_;   // chunk floats (this rank's chunk)
  Buffer send_, recv_, gathered_;  // ranks blocks each
  int64_t payload_bytes_ = 0;
};

class OneBitAdam : public AdamW {
 public:
  // Segments and state as for AdamW with zero_stage 0 (one segment per parameter, state laid out
  // like the ParamStore's flat buffers). train.freeze_steps >= 1. `layout` (borrowed) gives the
  // buckets the momentum is compressed in.
  OneBitAdam(std::vector<OptimizerSegment> segments, const size_t state_size[kNumParamGroups],
             const TrainConfig& config, ParamStore& params, ParallelContext& pc, const ZeroLayout& layout,
             Backend* backend = nullptr);
  ~OneBitAdam() override;

  void step(int64_t step, double lr, float grad_scale) override;
  bool keeps_gradients_local(int64_t step) const override { return step > config_.freeze_steps; }
  size_t state_bytes() const override;
  int64_t payload_bytes() const override;
  const char* name() const override { return "onebit_adam"; }

 private:
  ParamStore& params_;
  const ZeroLayout& layout_;
  std::vector<std::unique_ptr<OneBitAllReduce>> reduce_;  // per layout bucket
  int ranks_[kNumParamGroups] = {1, 1};
};

}  // namespace moe4d
