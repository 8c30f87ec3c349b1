// plan/schedule_model.h — pipeline schedules: micro-batches in flight (memory) and the bubble (time).
//
// GPipe runs all m forwards before any backward, so every stage holds m micro-batches. 1F1B
// (PipeDream-flush) holds min(m, pp - stage). Megatron's interleaved schedule with v model chunks
// per rank warms up 2 (pp - stage - 1) + (v - 1) pp chunk-forwards and holds one more, each chunk
// being 1/v of the stage. Time: with per-micro-batch stage times t_s the step is
//   m * max_s t_s + (sum_s t_s - max_s t_s) / v          (v = 1 unless interleaved)
// which for equal stages is (m + (pp - 1)/v) t, i.e. a bubble of ((pp-1)/v) / (m + (pp-1)/v) —
// the articles' (PP - 1) / (PP + micro_batch_num - 1) for v = 1. Pure functions.
#pragma once

#include "config/config.h"

namespace moe4d {

// Micro-batches' worth of the stage's activations that stage `stage` holds at its peak
// (interleaved: chunk-micro-batches / v, so it multiplies the whole stage's per-micro-batch bytes).
double in_flight_micro_batches(PipelineSchedule schedule, int pp, int micro_batches, int virtual_stages, int stage);

struct PipelineTime {
  double total = 0;   // time of the forward/backward part of the step
  double bubble = 0;  // the part of `total` the critical stage spends idle
  int critical_stage = 0;
};

// stage_time[s]: forward + backward time of one micro-batch on stage s.
PipelineTime pipeline_time(PipelineSchedule schedule, int micro_batches, int virtual_stages, const double* stage_time,
                           int pp);

// Bubble share of the step for equal stages.
double bubble_fraction(int pp, int micro_batches, int virtual_stages);

}  // namespace moe4d
