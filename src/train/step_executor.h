// train/step_executor.h — runs one step's micro-batches through this rank's model chunks, following
// the pipeline schedule, and measures how the step went.
//
// Training: this rank runs the actions of its pipeline stage (train/pipeline_schedule.h) for the
// micro_batch_num micro-batches of its data replica. Forwards of a virtual stage > 0 take the
// previous stage's activations, backwards below the last take the next stage's gradient: [T, d]
// floats per micro-batch, moved with non-blocking send/recv on the `pp` group. Receives are posted a
// couple of actions ahead, sends never block (their buffers are recycled once complete), so the only
// waits are for data that is really needed next. Gradients accumulate in the ParamStore; during the
// last backward of each chunk its layers are reported to the GradSync, whose buckets then start
// reducing while the remaining backwards run. Without pipelining (one stage, 1F1B) this is the plain
// loop F0 B0 F1 B1 ...
//
// Every rank of a TP / EP / DP group sits on the same pipeline stage and runs the same action list,
// so the blocking collectives inside the blocks happen in the same order on all of them.
//
// Memory: one MicroBatchState per (micro-batch, chunk) in flight, each with its own arena; the
// executor measures the largest sum of saved activations held at once (that is what 1F1B bounds and
// recompute lowers), separately from scratch (temporaries, including recomputed layers) and from the
// stage-to-stage message buffers.
//
// Threading: one thread, the trainer's. Not copyable.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include <nlohmann/json.hpp>

#include "config/config.h"
#include "model/transformer.h"
#include "train/grad_sync.h"
#include "train/pipeline_schedule.h"

namespace moe4d {

// Fills tokens and targets [micro_batch_size, seq] of global micro-batch `index`.
using MicroBatchFill = std::function<void(int index, int* tokens, int* targets)>;

// What the last training step looked like on this rank. Times in seconds since the stages of the
// pipeline started the step together (a barrier on the pp group).
struct StepTrace {
  struct Event {
    PipelineAction action;
    double start_s = 0, end_s = 0;
  };
  std::vector<Event> events;         // every forward / backward, in execution order
  std::chrono::steady_clock::time_point origin;  // the clock time of 0 s
  double span_s = 0;                 // until the end of the last action (gradient sync not included)
  double busy_s = 0;                 // sum of the actions' durations (compute and in-stage TP/EP collectives)
  double recv_wait_s = 0;            // blocked on a neighbouring stage's activations or gradients
  size_t peak_activation_bytes = 0;  // largest sum of saved activations of the micro-batches in flight
  size_t micro_batch_bytes = 0;      // saved activations of one (micro-batch, chunk) after its forward (max)
  int peak_in_flight = 0;            // most (micro-batch, chunk) activations held at once
  size_t peak_scratch_bytes = 0;     // temporaries, including layers rebuilt by recompute
  size_t peak_transfer_bytes = 0;    // buffers of stage-to-stage messages
};

class StepExecutor {
 public:
  // Throws moe4d::Error for micro_batch_num < pipeline_parallel (check_pipeline_micro_batches); warns
  // on world rank 0 below the articles' micro_batch_num >= 4 x pipeline_parallel.
  StepExecutor(const Config& config, ParallelContext& pc, Transformer& model, ParamStore& params,
               int micro_batch_size);
  ~StepExecutor();
  StepExecutor(const StepExecutor&) = delete;
  StepExecutor& operator=(const StepExecutor&) = delete;

  // Forward and backward of this replica's micro_batch_num micro-batches (global indices
  // data_replica * micro_batch_num + j) by the schedule. Each micro-batch's loss is weighted by
  // grad_scale. Calls sync.begin() first and sync.on_layer_ready() as layers become final; the caller
  // calls sync.finish(). Returns the sum over micro-batches of their mean cross-entropy (0 on ranks
  // without the head). Collective over the pipeline, TP and EP groups.
  double train(const MicroBatchFill& fill, float grad_scale, std::vector<MoeLayerStats>* stats, GradSync& sync);

  // Forward only of `count` micro-batches with global indices first, first + 1, ...; returns the sum
  // of their mean cross-entropy (0 on ranks without the head).
  double evaluate(const MicroBatchFill& fill, int first, int count);

  const std::vector<PipelineAction>& actions() const { return actions_; }
  const StepTrace& last_trace() const { return trace_; }
  // How the blocks compute their GEMMs from now on (precision, tensor inspection): copied into every
  // BlockContext of train() and evaluate(). Default: fp32, no inspection.
  void set_numerics(const BlockNumerics& numerics) { numerics_ = numerics; }
  // Activation memory since construction: the peak of saved activations of in-flight micro-batches
  // plus the peak of scratch (temporaries, recomputed layers) — an upper bound of both held at once.
  size_t peak_activation_bytes() const { return lifetime_peak_ + lifetime_scratch_peak_; }

  // Collective over pc.pp; every rank calls it once after train(). Adds record["pipeline"]: the
  // schedule; per stage the busy / idle seconds, time blocked on receives, mean forward / backward
  // time per chunk and peak activation memory; the bubble measured (mean over stages of idle / span),
  // the formula's ((p-1)/v)/(m+(p-1)/v), and the schedule replayed with the measured chunk times and
  // free communication (what unequal stages explain; the rest is communication and waiting). On the
  // steps records_timeline() picks, also record["pipeline_timeline"]: one {stage, chunk, micro_batch,
  // kind, start_s, end_s} box per forward / backward of every stage. Values come from the pipeline of
  // this rank's (dp, ep, tp) slice; every rank gets the same record.
  void gather_step_metrics(nlohmann::json& record, int64_t step, int64_t total_steps) const;
  // The timeline is kept for step 2 (the first without allocation warm-up), every 100th step and
  // the last step, so the metrics file stays small.
  static bool records_timeline(int64_t step, int64_t total_steps);

 private:
  struct Slot;
  struct Transfer {
    std::unique_ptr<Work> work;
    int buffer = -1;
  };
  struct Pass {
    const MicroBatchFill& fill;
    int first_index;  // global index of micro-batch 0
    float grad_scale;
    RecomputeGranularity recompute;
    std::vector<MoeLayerStats>* stats;
    GradSync* sync;  // null: forward only
  };

  double run(const std::vector<PipelineAction>& actions, const Pass& pass, StepTrace& trace);
  double forward(const PipelineAction& a, const float* input, const Pass& pass, StepTrace& trace);
  void backward(const PipelineAction& a, const float* dx_out, const Pass& pass, bool last_of_chunk, StepTrace& trace);
  std::optional<Transfer> post_receive(const PipelineAction& a);
  void send(int buffer, int peer, int tag);
  int message_tag(bool gradient, int receiver_chunk, int micro_batch) const;
  int virtual_stage(int chunk) const { return chunk * stages_ + stage_; }

  Slot& acquire_slot(int micro_batch, int chunk);
  Slot& find_slot(int micro_batch, int chunk);
  void note_memory(const Slot& active, StepTrace& trace, bool after_forward);
  int acquire_buffer();
  void release_buffer(int buffer) { free_buffers_.push_back(buffer); }
  void reap_sends(bool wait_all);

  const Config& config_;
  ParallelContext& pc_;
  Transformer& model_;
  ParamStore& params_;
  int micro_batch_size_;
  int stage_, stages_, chunks_;
  int seq_;  // positions of each sequence on this rank: seq_length / context_parallel
  size_t width_;  // floats of one stage-to-stage message: tokens x hidden
  std::vector<PipelineAction> actions_;
  std::vector<int> last_backward_;  // per chunk: index in actions_ of its last backward

  std::vector<std::unique_ptr<Slot>> slots_;
  Arena scratch_;
  std::vector<Buffer> buffers_;
  std::vector<int> free_buffers_;
  std::vector<Transfer> sends_;
  size_t transfer_peak_ = 0;  // most message buffers in use at once during the current pass
  StepTrace trace_;
  size_t lifetime_peak_ = 0;          // saved activations, over all passes
  size_t lifetime_scratch_peak_ = 0;  // scratch, over all passes
  BlockNumerics numerics_;
};

}  // namespace moe4d
