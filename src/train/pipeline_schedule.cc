// train/pipeline_schedule.cc — GPipe, 1F1B and interleaved 1F1B action lists, and their simulation.
#include "train/pipeline_schedule.h"

#include <algorithm>

#include <fmt/format.h>

#include "config/config_names.h"
#include "core/check.h"
#include "core/error.h"

namespace moe4d {
namespace {

std::vector<PipelineAction> gpipe(int m) {
  std::vector<PipelineAction> out;
  for (int j = 0; j < m; ++j) out.push_back({PipelineOp::kForward, j, 0});
  for (int j = 0; j < m; ++j) out.push_back({PipelineOp::kBackward, j, 0});
  return out;
}

std::vector<PipelineAction> one_f_one_b(int p, int m, int s) {
  const int warmup = std::min(p - s - 1, m);
  std::vector<PipelineAction> out;
  for (int j = 0; j < warmup; ++j) out.push_back({PipelineOp::kForward, j, 0});
  for (int j = 0; j < m - warmup; ++j) {
    out.push_back({PipelineOp::kForward, warmup + j, 0});
    out.push_back({PipelineOp::kBackward, j, 0});
  }
  for (int j = m - warmup; j < m; ++j) out.push_back({PipelineOp::kBackward, j, 0});
  return out;
}

// Megatron-LM's forward_backward_pipelining_with_interleaving: the k-th chunk-forward of a stage
// works on chunk (k mod pv) / p and micro-batch (k / pv) p + k mod p; backwards visit the chunks in
// reverse. Micro-batches therefore go through the chunks in groups of p.
std::vector<PipelineAction> interleaved(int p, int m, int v, int s) {
  const int total = m * v;
  const int warmup = m == p ? total : std::min(2 * (p - s - 1) + (v - 1) * p, total);
  auto action = [&](PipelineOp op, int k) {
    const int in_group = k % (p * v);
    int chunk = in_group / p;
    if (op == PipelineOp::kBackward) chunk = v - 1 - chunk;
    return PipelineAction{op, k / (p * v) * p + k % p, chunk};
  };
  std::vector<PipelineAction> out;
  for (int k = 0; k < warmup; ++k) out.push_back(action(PipelineOp::kForward, k));
  for (int k = 0; k < total - warmup; ++k) {
    out.push_back(action(PipelineOp::kForward, warmup + k));
    out.push_back(action(PipelineOp::kBackward, k));
  }
  for (int k = total - warmup; k < total; ++k) out.push_back(action(PipelineOp::kBackward, k));
  return out;
}

}  // namespace

const char* pipeline_schedule_name(PipelineSchedule schedule) {
  return config_names::name_of(config_names::kScheduleNames, schedule).data();  // a string literal
}

const char* pipeline_op_name(PipelineOp op) { return op == PipelineOp::kForward ? "forward" : "backward"; }

std::vector<PipelineAction> pipeline_actions(PipelineSchedule schedule, int stages, int micro_batches, int chunks,
                                             int stage) {
  MOE4D_CHECK_GE(micro_batches, 1);
  MOE4D_CHECK(stage >= 0 && stage < stages);
  switch (schedule) {
    case PipelineSchedule::kGPipe:
      MOE4D_CHECK_EQ(chunks, 1);
      return gpipe(micro_batches);
    case PipelineSchedule::k1F1B:
      MOE4D_CHECK_EQ(chunks, 1);
      return one_f_one_b(stages, micro_batches, stage);
    case PipelineSchedule::kInterleaved:
      MOE4D_CHECK_GE(stages, 2);
      MOE4D_CHECK_GE(chunks, 2);
      MOE4D_CHECK_EQ(micro_batches % stages, 0);
      return interleaved(stages, micro_batches, chunks, stage);
  }
  return {};
}

std::vector<PipelineAction> forward_only_actions(int micro_batches, int chunks) {
  std::vector<PipelineAction> out;
  for (int j = 0; j < micro_batches; ++j)
    for (int c = 0; c < chunks; ++c) out.push_back({PipelineOp::kForward, j, c});
  return out;
}

int max_in_flight(const std::vector<PipelineAction>& actions) {
  int held = 0, peak = 0;
  for (const PipelineAction& a : actions) {
    held += a.op == PipelineOp::kForward ? 1 : -1;
    peak = std::max(peak, held);
  }
  return peak;
}

double pipeline_bubble_formula(int stages, int micro_batches, int chunks) {
  const double idle = double(stages - 1) / chunks;
  return idle / (micro_batches + idle);
}

void check_pipeline_micro_batches(const ParallelConfig& p) {
  const int stages = p.pipeline_parallel, m = p.micro_batch_num;
  if (stages <= 1 || m >= stages) return;
  fail("parallel_config.micro_batch_num {} is smaller than pipeline_parallel {}: with m micro-batches a pipeline of "
       "p stages idles (p-1)/(m+p-1) = {:.0f}% of every step (the bubble) and at most m of its p stages are ever "
       "busy at once, so the extra stages only add idle devices; the articles advise micro_batch_num >= 4 x "
       "pipeline_parallel ({}); raise micro_batch_num (global_batch_size must stay a multiple of data_parallel x "
       "expert_parallel x micro_batch_num) or lower pipeline_parallel",
       m, stages, 100 * pipeline_bubble_formula(stages, m, 1), 4 * stages);
}

std::optional<std::string> pipeline_bubble_warning(const ParallelConfig& p) {
  const int stages = p.pipeline_parallel, m = p.micro_batch_num;
  if (stages <= 1 || m >= 4 * stages) return std::nullopt;
  const int v = p.pipeline_schedule == PipelineSchedule::kInterleaved ? p.virtual_pipeline : 1;
  return fmt::format("micro_batch_num {} is below 4 x pipeline_parallel ({}): the pipeline bubble (p-1)/v/(m+(p-1)/v) "
                     "will take about {:.0f}% of every step; the articles advise micro_batch_num >= {} (or the "
                     "interleaved schedule, which divides the bubble by virtual_pipeline)",
                     m, 4 * stages, 100 * pipeline_bubble_formula(stages, m, v), 4 * stages);
}

double PipelineSimulation::bubble() const {
  if (busy.empty() || makespan <= 0) return 0;
  double idle = 0;
  for (double b : busy) idle += makespan - b;
  return idle / (makespan * double(busy.size()));
}

PipelineSimulation simulate_pipeline(const std::vector<std::vector<PipelineAction>>& per_stage, int chunks,
                                     double forward_time, double backward_time) {
  return simulate_pipeline(per_stage, chunks, [=](int, const PipelineAction& a) {
    return a.op == PipelineOp::kForward ? forward_time : backward_time;
  });
}

PipelineSimulation simulate_pipeline(const std::vector<std::vector<PipelineAction>>& per_stage, int chunks,
                                     const ActionDuration& duration_of) {
  const int p = static_cast<int>(per_stage.size());
  const int virtual_count = p * chunks;
  int m = 0;
  for (const auto& actions : per_stage)
    for (const PipelineAction& a : actions) m = std::max(m, a.micro_batch + 1);
  // done[op][vs][mb]: finish time, or -1 while not run.
  std::vector<double> done(size_t(2) * virtual_count * m, -1.0);
  auto at = [&](PipelineOp op, int vs, int mb) -> double& {
    return done[(size_t(op == PipelineOp::kBackward) * virtual_count + vs) * m + mb];
  };

  PipelineSimulation sim;
  sim.busy.assign(p, 0.0);
  sim.timeline.assign(p, {});
  std::vector<size_t> next(p, 0);
  std::vector<double> free_at(p, 0.0);
  for (bool progress = true; progress;) {
    progress = false;
    for (int s = 0; s < p; ++s) {
      while (next[s] < per_stage[s].size()) {
        const PipelineAction& a = per_stage[s][next[s]];
        const int vs = a.chunk * p + s;
        double ready = free_at[s];
        if (a.op == PipelineOp::kForward) {
          if (vs > 0) {
            if (at(PipelineOp::kForward, vs - 1, a.micro_batch) < 0) break;
            ready = std::max(ready, at(PipelineOp::kForward, vs - 1, a.micro_batch));
          }
        } else {
          if (at(PipelineOp::kForward, vs, a.micro_batch) < 0) break;
          if (vs < virtual_count - 1) {
            if (at(PipelineOp::kBackward, vs + 1, a.micro_batch) < 0) break;
            ready = std::max(ready, at(PipelineOp::kBackward, vs + 1, a.micro_batch));
          }
        }
        const double duration = duration_of(s, a);
        at(a.op, vs, a.micro_batch) = free_at[s] = ready + duration;
        sim.busy[s] += duration;
        sim.timeline[s].push_back({a, ready, ready + duration});
        sim.makespan = std::max(sim.makespan, ready + duration);
        ++next[s];
        progress = true;
      }
    }
  }
  sim.completed = true;
  for (int s = 0; s < p; ++s) sim.completed = sim.completed && next[s] == per_stage[s].size();
  return sim;
}

}  // namespace moe4d
