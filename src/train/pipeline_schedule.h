// train/pipeline_schedule.h — pipeline schedules as per-stage lists of compute actions.
//
// A schedule says, for one pipeline stage, in which order it runs the forward and backward passes of
// its (micro-batch, model chunk) pairs during one training step. Communication is implied by the
// partition (train/stage_partition.h): a forward of virtual stage vs > 0 needs the activations of
// vs - 1, a backward of vs < last needs the gradient from vs + 1; StepExecutor posts those receives
// ahead and sends without blocking, so a schedule runs without deadlock exactly when its dependency
// graph is acyclic — which simulate_pipeline checks, and the unit tests prove for every schedule.
//
//   GPipe        all m forwards, then all m backwards: every stage holds m micro-batches.
//   1F1B         (PipeDream-flush) stage s runs min(p - s - 1, m) warm-up forwards, then alternates one
//                forward / one backward, then drains: stage s holds at most min(p - s, m).
//   interleaved  Megatron's interleaved 1F1B over v chunks per stage: warm-up of 2 (p - s - 1) + (v - 1) p
//                chunk-forwards, groups of p micro-batches per chunk; needs m % p == 0. Bubble shrinks
//                by v at the price of v times more stage-to-stage messages.
//
// Each side handles a chunk's micro-batches in increasing order (forwards and backwards alike); the
// executor's message tags rely on that (MPI matches equal tags in send order).
//
// Pure functions, no MPI; thread-safe.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "config/config.h"

namespace moe4d {

enum class PipelineOp { kForward, kBackward };

struct PipelineAction {
  PipelineOp op = PipelineOp::kForward;
  int micro_batch = 0;  // 0 .. m-1 within this data replica's step
  int chunk = 0;        // model chunk of this stage (0 .. v-1); virtual stage chunk * stages + stage
  bool operator==(const PipelineAction&) const = default;
};

const char* pipeline_schedule_name(PipelineSchedule schedule);  // "gpipe", "1f1b", "interleaved"
const char* pipeline_op_name(PipelineOp op);                    // "forward", "backward"

// The actions of pipeline stage `stage` (0-based, of `stages`) in one training step with
// `micro_batches` micro-batches and `chunks` model chunks per stage (1 unless interleaved).
// Preconditions (checked, MOE4D_CHECK): micro_batches >= 1; interleaved: stages >= 2, chunks >= 2,
// micro_batches % stages == 0; otherwise chunks == 1.
std::vector<PipelineAction> pipeline_actions(PipelineSchedule schedule, int stages, int micro_batches, int chunks,
                                             int stage);

// Evaluation: forward only, micro-batch by micro-batch, each through this stage's chunks in order.
std::vector<PipelineAction> forward_only_actions(int micro_batches, int chunks);

// Largest number of (micro-batch, chunk) activations held at once by a stage running `actions`
// (forward acquires, backward releases).
int max_in_flight(const std::vector<PipelineAction>& actions);

// The bubble the formula predicts for equal stages: ((p-1)/v) / (m + (p-1)/v), i.e. the articles'
// (p-1)/(m+p-1) for GPipe and 1F1B (v = 1).
double pipeline_bubble_formula(int stages, int micro_batches, int chunks);

// micro_batch_num < pipeline_parallel is refused (moe4d::Error, with the bubble it would cause and
// the articles' advice); see docs/pipeline.md for why refuse rather than warn.
void check_pipeline_micro_batches(const ParallelConfig& parallel);
// A warning for pipeline_parallel <= micro_batch_num < 4 x pipeline_parallel (the articles' advice),
// naming the bubble; nullopt when the advice is followed or there is no pipeline.
std::optional<std::string> pipeline_bubble_warning(const ParallelConfig& parallel);

// Event-driven simulation of all stages with free communication: each action takes
// duration(stage, action) seconds and starts as soon as its stage is free and its input exists.
// `per_stage[s]` is stage s's action list.
struct SimulatedAction {
  PipelineAction action;
  double start = 0, end = 0;
};
struct PipelineSimulation {
  bool completed = false;  // false: the schedules deadlock (a cycle of waits)
  double makespan = 0;
  std::vector<double> busy;                           // per stage
  std::vector<std::vector<SimulatedAction>> timeline;  // per stage, in execution order
  double bubble() const;                               // mean over stages of idle / makespan
};
using ActionDuration = std::function<double(int stage, const PipelineAction& action)>;
PipelineSimulation simulate_pipeline(const std::vector<std::vector<PipelineAction>>& per_stage, int chunks,
                                     const ActionDuration& duration);
// Every forward takes forward_time, every backward backward_time.
PipelineSimulation simulate_pipeline(const std::vector<std::vector<PipelineAction>>& per_stage, int chunks,
                                     double forward_time, double backward_time);

}  // namespace moe4d
