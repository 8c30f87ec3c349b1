// plan/schedule_model.cc — in-flight micro-batches and pipeline time per schedule.
#include "plan/schedule_model.h"

#include <algorithm>

namespace moe4d {

double in_flight_micro_batches(PipelineSchedule schedule, int pp, int m, int v, int stage) {
  switch (schedule) {
    case PipelineSchedule::kGPipe: return m;
    case PipelineSchedule::k1F1B: return std::min(m, pp - stage);
    case PipelineSchedule::kInterleaved: {
      const int warmup = 2 * (pp - stage - 1) + (v - 1) * pp;
      return static_cast<double>(std::min(m * v, warmup + 1)) / v;
    }
  }
  return m;
}

PipelineTime pipeline_time(PipelineSchedule schedule, int m, int v, const double* stage_time, int pp) {
  PipelineTime out;
  double sum = 0;
  double worst = 0;
  for (int s = 0; s < pp; ++s) {
    sum += stage_time[s];
    if (stage_time[s] > worst) {
      worst = stage_time[s];
      out.critical_stage = s;
    }
  }
  const double chunks = schedule == PipelineSchedule::kInterleaved ? v : 1;
  out.bubble = (sum - worst) / chunks;
  out.total = m * worst + out.bubble;
  return out;
}

double bubble_fraction(int pp, int m, int v) {
  const double idle = static_cast<double>(pp - 1) / v;
  return idle / (m + idle);
}

}  // namespace moe4d
